import FoundationEssentials

/// A voice preset: an engine voice (plus optional variant) with the languages it serves.
///
/// Identifiers are stable strings such as `espeak-ng.en-us`; appending `+VARIANT`
/// (`espeak-ng.fr+f2`) selects one of the engine's voice variants.
public struct SpeechVoice: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The voice's listener gender, if the preset states one.
    public enum Gender: String, Sendable, Hashable, Codable {
        case male, female, neutral
    }

    /// Stable identifier, e.g. `espeak-ng.en-us` or `espeak-ng.fr+f2`.
    public var identifier: String
    /// Human-readable name, e.g. `English (America)`.
    public var name: String
    /// The engine that speaks this voice; currently always `espeak-ng`.
    public var engine: String
    /// The engine's own voice name (`en-us`), passed to the engine unchanged.
    public var engineVoice: String
    /// The engine variant (`f2`, `klatt`), if any.
    public var variant: String?
    /// Languages this voice serves, most specific first.
    public var languages: [LanguageTag]
    /// The voice's gender, if known.
    public var gender: Gender?
    /// Default rate in words per minute, if the preset overrides the engine's 175.
    public var rate: Double?
    /// Default pitch multiplier, if the preset overrides 1.
    public var pitch: Double?

    /// Creates a preset; catalogs normally load these from `voices/`.
    public init(
        identifier: String, name: String, engine: String = "espeak-ng", engineVoice: String,
        variant: String? = nil, languages: [LanguageTag], gender: Gender? = nil,
        rate: Double? = nil, pitch: Double? = nil
    ) {
        self.identifier = identifier
        self.name = name
        self.engine = engine
        self.engineVoice = engineVoice
        self.variant = variant
        self.languages = languages
        self.gender = gender
        self.rate = rate
        self.pitch = pitch
    }

    /// The name the engine is given: `engineVoice` or `engineVoice+variant`.
    public var engineVoiceName: String {
        variant.map { "\(engineVoice)+\($0)" } ?? engineVoice
    }

    /// The voice's main language (its first listed one).
    public var primaryLanguage: LanguageTag? { languages.first }

    /// Whether this voice serves `language` or a more specific form of it.
    public func speaks(_ language: LanguageTag) -> Bool {
        languages.contains { $0.isSpecialization(of: language) || language.isSpecialization(of: $0) }
    }

    public var description: String { "\(identifier) (\(name))" }
}
