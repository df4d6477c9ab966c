import FoundationEssentials
import ParlaCore

/// The speech settings a speech-dispatcher client chose, as the server sends them before every
/// message (`SET`, then `key=value` lines), and how they become an ``Utterance``'s settings.
///
/// speech-dispatcher gives rate, pitch, pitch range and volume as integers from -100 to 100,
/// 0 being the synthesizer's normal value (volume: 100 is normal, as with its espeak-ng module).
package struct ModuleSettings: Sendable, Equatable {
    package var rate = 0
    package var pitch = 0
    package var pitchRange = 0
    package var volume = 100
    package var punctuation = PunctuationMode.none
    package var spelling = false
    package var capitalLetters = CapitalLetters.none
    /// speech-dispatcher's voice type (`male1` … `child_female`), nil when a synthesis voice is chosen.
    package var voiceType: String?
    /// The client's language: a preference (text in another language is still spoken by its
    /// own voice), nil for none (`NULL`, or `c` from a client under the C locale).
    package var language: LanguageTag?
    /// The voice the client chose from `LIST VOICES`, nil for the language's default.
    package var synthesisVoice: String?

    package enum CapitalLetters: String, Sendable {
        case none, spell, icon
    }

    package init() {}

    /// Why a `SET` line was refused.
    package struct Refusal: Error, Equatable {
        package var line: String
        package var reason: String
    }

    /// Applies one `key=value` line. Unknown keys are accepted and ignored (later servers may
    /// send more); a known key with a value out of range is refused.
    package mutating func apply(_ line: String) throws(Refusal) {
        guard let eq = line.firstIndex(of: "=") else { throw Refusal(line: line, reason: "expected key=value") }
        let key = String(line[..<eq]).trimmingASCIIWhitespace()
        let value = String(line[line.index(after: eq)...]).trimmingASCIIWhitespace()
        func number() throws(Refusal) -> Int {
            guard let n = Int(value), (-100...100).contains(n) else {
                throw Refusal(line: line, reason: "\(key) must be an integer from -100 to 100")
            }
            return n
        }
        switch key {
        case "rate": rate = try number()
        case "pitch": pitch = try number()
        case "pitch_range": pitchRange = try number()
        case "volume": volume = try number()
        case "punctuation_mode":
            switch value {
            case "none": punctuation = .none
            case "some": punctuation = .some
            case "most", "all": punctuation = .all
            default: throw Refusal(line: line, reason: "punctuation_mode must be none, some, most or all")
            }
        case "spelling_mode":
            guard value == "on" || value == "off" else { throw Refusal(line: line, reason: "spelling_mode must be on or off") }
            spelling = value == "on"
        case "cap_let_recogn":
            guard let mode = CapitalLetters(rawValue: value) else {
                throw Refusal(line: line, reason: "cap_let_recogn must be none, spell or icon")
            }
            capitalLetters = mode
        case "voice":
            voiceType = value == "NULL" ? nil : value
        case "language":
            let lowered = value.lowercased()
            if value == "NULL" || value.isEmpty || lowered == "c" || lowered == "posix" {
                language = nil
            } else if let tag = LanguageTag(value) {
                language = tag
            } else {
                throw Refusal(line: line, reason: "'\(value)' is not a language tag")
            }
        case "synthesis_voice":
            synthesisVoice = value == "NULL" || value.isEmpty ? nil : value
        default:
            break
        }
    }

    /// The words per minute of speech-dispatcher's rate 100: the module configuration's
    /// `ParlaMaxRate` (as sd_espeak-ng's `EspeakMaxRate`), ``maxRateRange``, default 450.
    package var maxRate: Double = ModuleSettings.defaultMaxRate
    package static let defaultMaxRate: Double = 450
    package static let maxRateRange: ClosedRange<Double> = 175...1000

    /// Words per minute for a speech-dispatcher rate: 0 is Parla's normal 175, -100 the slowest
    /// (80) and 100 the fastest (``maxRate``), linear on each side.
    package var wordsPerMinute: Double {
        rate < 0 ? 175 + Double(rate) * (175 - 80) / 100 : 175 + Double(rate) * (maxRate - 175) / 100
    }

    /// `ParlaMaxRate N` from a module configuration's text: N words per minute within
    /// ``maxRateRange``; nil if there is no such line; a message if its value is unusable.
    package static func maxRate(inConfiguration text: String) -> Result<Double, Refusal>? {
        var found: Result<Double, Refusal>?
        for line in text.split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.first == "ParlaMaxRate" else { continue }
            let value = words.dropFirst().joined(separator: " ").filter { $0 != "\"" }
            if let n = Double(value), maxRateRange.contains(n) {
                found = .success(n)
            } else {
                found = .failure(
                    Refusal(
                        line: String(line), reason: "ParlaMaxRate must be words per minute from 175 to 1000; using \(Int(defaultMaxRate))"))
            }
        }
        return found
    }

    /// Pitch multiplier: -100 → 0 (the engine's lowest), 0 → 1, 100 → 2.
    package var pitchMultiplier: Double { 1 + Double(pitch) / 100 }

    /// Volume 0–1 of the engine's normal amplitude: -100 → silent, 100 → normal.
    package var volumeMultiplier: Double { Double(volume + 100) / 200 }

    /// The espeak-ng variant for a speech-dispatcher voice type (nil: the voice's own).
    package var variant: String? {
        switch voiceType {
        case "male2": return "m3"
        case "male3": return "m6"
        case "female1": return "f1"
        case "female2": return "f2"
        case "female3": return "f4"
        case "child_male": return "m7"
        case "child_female": return "f5"
        default: return nil  // male1: the voice as it is
        }
    }

    /// The voice an utterance should prefer: the chosen synthesis voice, else the default voice
    /// of the client's language with the voice type's variant. Other languages in the text are
    /// still spoken by their own voices.
    /// - Throws: ``ParlaError/unknownVoice(_:)`` for a synthesis voice the catalog does not have.
    package func voice(in catalog: VoiceCatalog) throws(ParlaError) -> SpeechVoice? {
        if let synthesisVoice { return try catalog.voice(identifier: synthesisVoice) }
        guard let language, let voice = try? catalog.voice(for: language) else { return nil }
        guard let variant, voice.variant == nil else { return voice }
        return (try? catalog.voice(identifier: voice.identifier + "+" + variant)) ?? voice
    }

    /// Applies rate, pitch, volume and punctuation to `utterance`, and spelling to its text.
    package func configure(_ utterance: inout Utterance, catalog: VoiceCatalog) throws(ParlaError) {
        utterance.wordsPerMinute = wordsPerMinute
        utterance.pitch = pitchMultiplier
        utterance.volume = volumeMultiplier
        utterance.punctuation = punctuation
        utterance.voice = try voice(in: catalog)
        if spelling {
            utterance.text.speechSpellOut = true
        }
    }
}
