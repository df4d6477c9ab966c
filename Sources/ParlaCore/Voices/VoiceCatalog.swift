import FoundationEssentials

/// The set of voice presets Parla can use, loaded from a `voices/` directory and the
/// user's own preset directory, with the defaults that pick a voice for each language.
public struct VoiceCatalog: Sendable {
    /// All presets, sorted by identifier. User presets replace built-in ones with the same identifier.
    public let voices: [SpeechVoice]
    /// Engine voice variants that may be appended to an identifier with `+`.
    public let variants: [String]
    /// Lowercased language tag → identifier of the voice that serves it by default.
    public let languageDefaults: [String: String]
    /// ISO 15924 script code → the language that script means when nothing else decides.
    public let scriptDefaults: [String: LanguageTag]
    /// The directories the presets were loaded from.
    package let directories: [String]
    /// Lowercased language tag → the espeak-ng voice that was its default before a Piper voice
    /// took over (`adding(piperVoicesIn:)`, in ParlaIO): it spells out
    /// what the Piper voice cannot.
    package let espeakDefaults: [String: String]

    /// Piper voices found on disk that cannot be used, each with the reason (a broken or
    /// missing `NAME.onnx.json`, a missing model, phonemes that are not espeak-ng's). Asking
    /// for one by identifier throws ``ParlaError/invalidVoicePreset(path:reason:)`` with it.
    public let unusableVoices: [UnusableVoice]

    private let byIdentifier: [String: SpeechVoice]

    /// Creates a catalog from presets already in memory.
    public init(
        voices: [SpeechVoice], variants: [String] = [], languageDefaults: [String: String] = [:],
        scriptDefaults: [String: LanguageTag] = [:], directories: [String] = [], espeakDefaults: [String: String] = [:],
        unusableVoices: [UnusableVoice] = []
    ) {
        var map: [String: SpeechVoice] = [:]
        for v in voices { map[v.identifier.lowercased()] = v }
        self.byIdentifier = map
        self.voices = map.values.sorted { $0.identifier < $1.identifier }
        self.variants = variants
        self.languageDefaults = languageDefaults
        self.scriptDefaults = scriptDefaults
        self.directories = directories
        self.espeakDefaults = espeakDefaults
        self.unusableVoices = unusableVoices
    }

    /// The espeak-ng voice for `language`: the default it had before a Piper voice took over,
    /// else the default, else an espeak-ng voice that speaks it; nil if none does.
    public func espeakVoice(for language: LanguageTag) -> SpeechVoice? {
        var tag: LanguageTag? = language
        while let t = tag {
            for table in [espeakDefaults, languageDefaults] {
                if let id = table[t.identifier.lowercased()], let v = byIdentifier[id.lowercased()], v.engine != SpeechVoice.piperEngine {
                    return v
                }
            }
            tag = t.parent
        }
        return voices(speaking: language).first { $0.engine != SpeechVoice.piperEngine }
    }

    // MARK: Lookup

    /// The voice with `identifier`; `base+variant` selects an engine variant of a base voice.
    /// - Throws: ``ParlaError/unknownVoice(_:)`` if there is no such voice or variant.
    public func voice(identifier: String) throws(ParlaError) -> SpeechVoice {
        let key = identifier.lowercased()
        if let v = byIdentifier[key] { return v }
        if let plus = key.firstIndex(of: "+"), let base = byIdentifier[String(key[..<plus])] {
            let variantName = String(identifier[identifier.index(after: plus)...])
            guard let known = variants.first(where: { $0.lowercased() == variantName.lowercased() }) else {
                throw .unknownVoice(identifier)
            }
            var v = base
            v.identifier = base.identifier + "+" + known
            v.name = base.name + " (" + known + ")"
            v.variant = known
            return v
        }
        if let unusable = unusableVoices.first(where: { $0.identifier.lowercased() == key }) {
            throw .invalidVoicePreset(path: unusable.path, reason: unusable.reason)
        }
        throw .unknownVoice(identifier)
    }

    /// The best voice for `language`: a hand-chosen default, then an exact match, then the
    /// default for a less specific tag, then any voice of the same primary language.
    /// - Throws: ``ParlaError/noVoiceForLanguage(_:)`` if no voice speaks it.
    public func voice(for language: LanguageTag) throws(ParlaError) -> SpeechVoice {
        var tag: LanguageTag? = language
        while let t = tag {
            if let id = languageDefaults[t.identifier.lowercased()], let v = byIdentifier[id.lowercased()] {
                return v
            }
            if let v = voices.first(where: { $0.languages.first == t }) ?? voices.first(where: { $0.languages.contains(t) }) {
                return v
            }
            tag = t.parent
        }
        if let v = voices.first(where: { $0.languages.contains { $0.language == language.language } }) {
            return v
        }
        throw .noVoiceForLanguage(language)
    }

    /// This catalog with `voices` (language → voice identifier) as the defaults for those
    /// languages and every more specific form of them: `en` → `piper.en_US-joe-medium` makes
    /// joe speak `en`, `en-US` and `en-GB` text.
    /// - Throws: ``ParlaError/unknownVoice(_:)`` for an identifier that is not in the catalog.
    public func preferring(_ voices: [LanguageTag: String]) throws(ParlaError) -> VoiceCatalog {
        var defaults = languageDefaults
        for (tag, identifier) in voices {
            let voice = try voice(identifier: identifier)
            for key in defaults.keys {
                if let other = LanguageTag(key), other.isSpecialization(of: tag) { defaults.removeValue(forKey: key) }
            }
            defaults[tag.identifier.lowercased()] = voice.identifier
        }
        return VoiceCatalog(
            voices: self.voices, variants: variants, languageDefaults: defaults, scriptDefaults: scriptDefaults, directories: directories,
            espeakDefaults: espeakDefaults, unusableVoices: unusableVoices)
    }

    /// Parses voice preferences such as `en=piper.en_US-joe-medium,fr=espeak-ng.fr`
    /// (`LANG=VOICE`, separated by commas; the option may also be given several times).
    /// - Throws: ``ParlaError/invalidLanguageTag(_:)`` or ``ParlaError/invalidInput(_:)`` naming what is wrong.
    package static func parseVoicePreferences(_ values: [String]) throws(ParlaError) -> [LanguageTag: String] {
        var out: [LanguageTag: String] = [:]
        for value in values {
            for item in value.split(separator: ",") {
                let parts = item.split(separator: "=", maxSplits: 1).map { String($0.filter { !$0.isWhitespace }) }
                guard parts.count == 2, !parts[1].isEmpty else {
                    throw .invalidInput("'\(item)' is not a voice preference: write LANG=VOICE, such as en=piper.en_US-joe-medium")
                }
                out[try LanguageTag(parsing: parts[0])] = parts[1]
            }
        }
        return out
    }

    /// Every voice that serves `language` or a more specific form of it.
    public func voices(speaking language: LanguageTag) -> [SpeechVoice] {
        voices.filter { voice in voice.languages.contains { $0.isSpecialization(of: language) } }
    }

    /// Every language some voice serves, sorted.
    public var languages: [LanguageTag] {
        Array(Set(voices.flatMap(\.languages))).sorted()
    }
}

/// A voice found on disk that cannot be used (``VoiceCatalog/unusableVoices``).
public struct UnusableVoice: Sendable, Equatable {
    /// The identifier it would have (`piper.NAME`).
    public let identifier: String
    /// The file at fault.
    public let path: String
    /// Why it cannot be used, and what would fix it.
    public let reason: String

    /// Creates the record of an unusable voice.
    public init(identifier: String, path: String, reason: String) {
        self.identifier = identifier
        self.path = path
        self.reason = reason
    }
}
