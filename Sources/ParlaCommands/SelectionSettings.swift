import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Subprocess
#if canImport(Glibc)
    import Glibc
#endif

/// The user's speak-selection settings.
struct SelectionSettings {
    var rate: Double?
    var voice: String?
    /// A voice per language (language → voice identifier).
    var voices: [LanguageTag: String] = [:]
    var languages: [LanguageTag] = []
    var device: String?
    var notify = false
    /// How far to lower other audio while speaking, in dB (nil: not at all).
    var duck: Double?
    /// Where to look for the selected text, in order.
    var sources = Selection.Source.defaults
    /// How long each source may take, in milliseconds.
    var timeout = Selection.defaultTimeoutMilliseconds

    static let template = """
        # Parla speak-selection settings. One "key = value" per line; '#' starts a comment.
        # Remove the '#' in front of a setting to use it.

        # Speaking rate in words per minute, 80–1000 (default: the voice's, 175).
        # rate = 175

        # The voice for text in its language (see 'parla voices'), e.g. espeak-ng.en-gb.
        # voice = espeak-ng.en-us

        # A voice per language, before each language's default: a Piper neural voice for
        # English, say (see 'parla voices'; Piper voices go in ~/.local/share/parla/voices).
        # voices = en=piper.en_US-joe-medium, fr=espeak-ng.fr

        # Preferred languages, most preferred first, for text the detector cannot decide
        # (default: from $LANGUAGE / $LANG).
        # languages = en, el

        # The PulseAudio sink to play to (default: the server's default sink).
        # device = alsa_output.pci-0000_00_1f.3.analog-stereo

        # Also show the text in a desktop notification.
        # notify = false

        # Lower other audio (music, videos) while speaking: true (by 15 dB), false, or the
        # number of dB, 1–60.
        # duck = false

        # Where to look for the selected text, in order: accessibility (the focused
        # application's selection, as screen readers read it), primary (the highlighted text,
        # through wl-paste or xclip), clipboard (what was last copied).
        # sources = accessibility, primary

        # How long each source may take to answer, in milliseconds.
        # timeout = 45

        """

    static var defaultPath: String {
        let base =
            getenv("XDG_CONFIG_HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            ?? ((getenv("HOME").map { String(cString: $0) } ?? "") + "/.config")
        return base + "/parla/speak-selection.conf"
    }

    /// Reads the settings file, creating it with the commented template when it does not exist.
    /// - Throws: a `UserError` naming the file and line of a bad setting.
    static func load(path explicit: String?) throws -> SelectionSettings {
        let path = explicit ?? defaultPath
        if access(path, F_OK) != 0 {
            if explicit != nil { throw UserError("The settings file \(path) does not exist.") }
            create(path)
            return SelectionSettings()
        }
        let text = try TextInput.read(path: path)
        return try parse(text, path: path)
    }

    static func create(_ path: String) {
        _ = AtomicFile.makeDirectories(String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]))
        guard let file = fopen(path, "wx") else { return }  // never overwrite
        fputs(template, file)
        fclose(file)
    }

    /// A list of sources, like "accessibility, primary".
    static func parseSources(_ value: String) -> Result<[Selection.Source], UserError> {
        var sources: [Selection.Source] = []
        for name in value.split(separator: ",").map({ $0.trimmed().lowercased() }) where !name.isEmpty {
            guard let source = Selection.Source(rawValue: name) else {
                return .failure(
                    UserError("sources must be some of accessibility, primary and clipboard, separated by commas, not '\(name)'"))
            }
            if !sources.contains(source) { sources.append(source) }
        }
        if sources.isEmpty { return .failure(UserError("sources must name at least one of accessibility, primary and clipboard")) }
        return .success(sources)
    }

    static func parse(_ text: String, path: String) throws -> SelectionSettings {
        var s = SelectionSettings()
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let trimmed = line.trimmed()
            if trimmed.isEmpty { continue }
            func fail(_ why: String) -> UserError {
                UserError("\(path), line \(i + 1): \(why). Fix the line or delete the file to get the defaults back.")
            }
            guard let eq = trimmed.firstIndex(of: "=") else { throw fail("expected 'key = value', found '\(trimmed)'") }
            let key = trimmed[..<eq].trimmed().lowercased()
            let value = trimmed[trimmed.index(after: eq)...].trimmed()
            switch key {
            case "rate":
                guard let r = Double(value), SpeechPlan.rateRange.contains(r) else {
                    throw fail("rate must be a number from 80 to 1000, not '\(value)'")
                }
                s.rate = r
            case "voice":
                s.voice = value.isEmpty ? nil : value
            case "voices":
                do {
                    s.voices = try VoiceCatalog.parseVoicePreferences([value])
                } catch {
                    throw fail("voices must be LANG=VOICE pairs separated by commas, like 'en=piper.en_US-joe-medium' (\(error))")
                }
            case "languages":
                do {
                    s.languages = try value.split(separator: ",").map { try LanguageTag(parsing: $0.trimmed()) }
                } catch {
                    throw fail("languages must be language tags separated by commas, like 'en, el' (\(error))")
                }
            case "device":
                s.device = value.isEmpty ? nil : value
            case "notify":
                guard let b = ["true": true, "yes": true, "1": true, "false": false, "no": false, "0": false][value.lowercased()] else {
                    throw fail("notify must be true or false, not '\(value)'")
                }
                s.notify = b
            case "duck":
                if let b = ["true": true, "yes": true, "false": false, "no": false][value.lowercased()] {
                    s.duck = b ? 15 : nil
                } else if let dB = Double(value), (1...60).contains(dB) {
                    s.duck = dB
                } else {
                    throw fail("duck must be true, false or a number of dB from 1 to 60, not '\(value)'")
                }
            case "sources":
                switch parseSources(value) {
                case .success(let sources): s.sources = sources
                case .failure(let error): throw fail(error.description)
                }
            case "timeout":
                guard let ms = Int(value), (1...10_000).contains(ms) else {
                    throw fail("timeout must be a number of milliseconds from 1 to 10000, not '\(value)'")
                }
                s.timeout = ms
            default:
                throw fail(
                    "unknown setting '\(key)' (the settings are rate, voice, voices, languages, device, notify, duck, sources and timeout)")
            }
        }
        return s
    }
}
