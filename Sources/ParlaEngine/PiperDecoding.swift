internal import CParlaPiper
import FoundationEssentials
import ParlaCore
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// How a Piper voice's audio is made: a chunk at a time as it is heard, or a whole sentence at
/// a time, for a voice whose graph does not split at its decoder.
package enum PiperDecoding: Sendable, Equatable {
    /// Decoded a chunk at a time: the first sound comes after the first chunk.
    case streamed
    /// Decoded a whole sentence at a time, and why.
    case wholeSentences(reason: String)
    /// The model cannot be read.
    case unreadable(reason: String)
}

extension SpeechVoice {
    /// For a Piper voice, how its audio is made (reads the model, without ONNX Runtime); nil for
    /// other engines, which all stream.
    package func piperDecoding() -> PiperDecoding? {
        guard engine == SpeechVoice.piperEngine else { return nil }
        var why = [CChar](repeating: 0, count: 512)
        let found = parla_piper_model_streams(engineVoice, &why, why.count)
        let reason = String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch found {
        case 1: return .streamed
        case 0: return .wholeSentences(reason: reason)
        default: return .unreadable(reason: reason)
        }
    }
}

/// The espeak-ng that gives a Piper voice its phonemes: the one it was trained with, or, where
/// that one is missing, the one that stands in (whose phonemes differ in places: piper-phonemize's
/// says "more" as mˈoːɹ, espeak-ng 1.52 as mˈɔːɹ).
package struct PiperPhonemizer: Sendable, Equatable {
    /// The one the voice was trained with: `piper-phonemize` (Piper 1.x voices) or `espeak-ng 1.52`.
    package var trained: String
    /// The directory of the one that speaks, nil for the system's libespeak-ng.
    package var directory: String?
    /// Whether the one that speaks is the one the voice was trained with.
    package var isTrained: Bool

    /// The one that speaks, in words: "piper-phonemize's espeak-ng (DIR)".
    package var speaking: String {
        guard let directory else { return "the system's espeak-ng" }
        let name =
            directory.hasSuffix("/piper-phonemize")
            ? "piper-phonemize's espeak-ng" : directory.hasSuffix("/espeak-ng") ? "espeak-ng 1.52" : "the espeak-ng"
        return "\(name) (\(directory))"
    }

    /// The warning a user gets once where the trained one is missing.
    package func warning(voice: String) -> String {
        "\(voice) was trained with \(trained == "piper-phonemize" ? "piper-phonemize's espeak-ng" : trained), which is not installed: \(speaking) gives its phonemes instead, and some words sound other than the voice learned them (run scripts/setup, or install Parla with scripts/install or its package, which carry it)"
    }
}

extension SpeechVoice {
    /// For a Piper voice, which espeak-ng phonemizes it in the engine host Parla starts (found
    /// without loading it); nil for other engines, or a voice whose config cannot be read.
    package func piperPhonemizer() -> PiperPhonemizer? {
        guard engine == SpeechVoice.piperEngine else { return nil }
        let programDirectory = EngineHost.program.map { path in
            String(path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/"))
        }
        var trained: Int32 = 0
        var used = [CChar](repeating: 0, count: 4200)
        let found = parla_piper_phonemizer(engineVoice, programDirectory, &trained, &used, used.count)
        guard found >= 0 else { return nil }
        let directory = String(decoding: used.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return PiperPhonemizer(
            trained: trained == Int32(PARLA_PIPER_PHONEMIZE) ? "piper-phonemize" : "espeak-ng 1.52",
            directory: directory.isEmpty ? nil : directory, isTrained: found == 1)
    }

    /// The licence the voice's maker gives it, as its model card names it (a Piper voice's
    /// `MODEL.MODEL_CARD`, which `parla voices install` puts beside it: "CC0", "CC BY 4.0");
    /// espeak-ng's voices are espeak-ng's data (GPL-3.0-or-later). Nil where nothing says.
    package func license() -> String? {
        guard engine == SpeechVoice.piperEngine else { return engine == "espeak-ng" ? "GPL-3.0-or-later" : nil }
        let stem = engineVoice.hasSuffix(".onnx") ? String(engineVoice.dropLast(".onnx".count)) : engineVoice
        return Self.license(modelCard: stem + ".MODEL_CARD")
    }

    /// The licence a Piper model card at `path` names (its `License:` line), nil if none.
    package static func license(modelCard path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path), data.count < 1 << 20 else { return nil }
        for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            var text = line.drop { $0 == " " || $0 == "*" || $0 == "-" }
            guard text.lowercased().hasPrefix("license:") else { continue }
            text = text.dropFirst("license:".count).drop { $0.isWhitespace }
            while text.last?.isWhitespace == true { text = text.dropLast() }
            if !text.isEmpty { return String(text) }
        }
        return nil
    }
}

/// What a Piper voice can do with rate and pitch in the engine host Parla starts: with libsonic
/// (Debian's libsonic0; the wheel carries it), 80–1,000 words a minute and any pitch; without,
/// up to 450 (the model's length_scale alone) at the voice's own pitch.
package enum PiperProsody {
    /// Whether the engine host finds libsonic (looked for once per process).
    package static let canStretch: Bool = {
        let programDirectory = EngineHost.program.map { path in
            String(path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/"))
        }
        return parla_piper_stretch_found(programDirectory) == 1
    }()
    /// The fastest rate a Piper voice speaks at, in words per minute.
    package static var maxRate: Int { canStretch ? Int(PARLA_PIPER_RATE_MAX) : 450 }
    private static let warned = Mutex(false)

    /// Says once per process, on standard error, that a run's rate or pitch cannot be honoured.
    package static func check(voice: SpeechVoice, rate: Int, pitch: Int) {
        guard voice.engine == SpeechVoice.piperEngine, rate > 450 || pitch != 50, !canStretch else { return }
        guard
            warned.withLock({ w in
                defer { w = true }; return !w
            })
        else { return }
        let line =
            "parla: warning: libsonic is not installed: Piper voices speak at most 450 words a minute, at their own pitch (install libsonic0: apt-get install libsonic0)\n"
        _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }
}

/// Says once per voice and process, on standard error, that a Piper voice is phonemized by
/// another espeak-ng than the one it was trained with.
package enum PiperPhonemizerWarning {
    private static let checked = Mutex<Set<String>>([])

    /// Checks `voice` the first time it is spoken (later calls cost a set lookup).
    package static func check(_ voice: SpeechVoice) {
        guard voice.engine == SpeechVoice.piperEngine, checked.withLock({ $0.insert(voice.engineVoice).inserted }) else { return }
        guard let phonemizer = voice.piperPhonemizer(), !phonemizer.isTrained else { return }
        let line = "parla: warning: " + phonemizer.warning(voice: voice.identifier) + "\n"
        _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }
}
