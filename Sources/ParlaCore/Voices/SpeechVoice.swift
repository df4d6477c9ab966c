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
    /// The engine that speaks this voice: `espeak-ng`, or `piper` for Piper's neural voices.
    public var engine: String
    /// The engine's own voice name (`en-us`), passed to the engine unchanged; for a Piper
    /// voice, the path of its model.
    public var engineVoice: String
    /// The engine variant (`f2`, `klatt`), if any.
    public var variant: String?
    /// Languages this voice serves, most specific first.
    public var languages: [LanguageTag]
    /// The voice's gender, if known.
    public var gender: Gender?
    /// Default rate in words per minute, if the preset overrides the engine's 175 (a preset
    /// file's `rate`). An utterance's ``Utterance/rate`` multiplies it.
    public var wordsPerMinute: Double?
    /// Default pitch, as a multiple of the engine voice's, if the preset overrides 1. An
    /// utterance's ``Utterance/pitch`` multiplies it.
    public var pitch: Double?
    /// The voice's quality as its maker rates it (Piper: `x_low`, `low`, `medium`, `high`).
    public var quality: String?
    /// The rate the engine makes this voice's audio at, in Hz, if known (a Piper voice at
    /// another rate than espeak-ng's 22,050 Hz is resampled to it).
    public var sampleRate: Int?

    /// The former name of ``wordsPerMinute``.
    @available(*, deprecated, renamed: "wordsPerMinute")
    public var rate: Double? {
        get { wordsPerMinute }
        set { wordsPerMinute = newValue }
    }

    // A preset file's keys: `rate` is words per minute there, as it always was.
    private enum CodingKeys: String, CodingKey {
        case identifier, name, engine, engineVoice, variant, languages, gender, pitch, quality, sampleRate
        case wordsPerMinute = "rate"
    }

    /// Creates a preset; catalogs normally load these from `voices/`.
    public init(
        identifier: String, name: String, engine: String = "espeak-ng", engineVoice: String,
        variant: String? = nil, languages: [LanguageTag], gender: Gender? = nil,
        wordsPerMinute: Double? = nil, pitch: Double? = nil, quality: String? = nil, sampleRate: Int? = nil
    ) {
        self.identifier = identifier
        self.name = name
        self.engine = engine
        self.engineVoice = engineVoice
        self.variant = variant
        self.languages = languages
        self.gender = gender
        self.wordsPerMinute = wordsPerMinute
        self.pitch = pitch
        self.quality = quality
        self.sampleRate = sampleRate
    }

    /// The name the engine is given: `engineVoice` or `engineVoice+variant`; for a Piper
    /// voice, `piper:` and the model's path.
    public var engineVoiceName: String {
        if engine == SpeechVoice.piperEngine { return "piper:" + engineVoice }
        return variant.map { "\(engineVoice)+\($0)" } ?? engineVoice
    }

    /// How good a voice's `quality` is, for choosing among voices of one language: higher is better.
    public static func qualityRank(_ quality: String?) -> Int {
        switch quality {
        case "high": 4
        case "medium": 3
        case "low": 2
        case "x_low": 1
        default: 0
        }
    }

    /// The engine name of Piper's neural voices.
    public static let piperEngine = "piper"

    /// The identifier of the Piper voice whose model is at `path`: `piper.` and the model's file
    /// name without `.onnx`, as the catalog names the voices it finds.
    package static func piperIdentifier(modelPath path: String) -> String {
        let file = path.split(separator: "/").last.map(String.init) ?? path
        return "piper." + (file.hasSuffix(".onnx") ? String(file.dropLast(".onnx".count)) : file)
    }

    /// The voice's main language (its first listed one).
    public var primaryLanguage: LanguageTag? { languages.first }

    /// Whether this voice serves `language` or a more specific form of it.
    public func speaks(_ language: LanguageTag) -> Bool {
        languages.contains { $0.isSpecialization(of: language) || language.isSpecialization(of: $0) }
    }

    public var description: String { "\(identifier) (\(name))" }
}
