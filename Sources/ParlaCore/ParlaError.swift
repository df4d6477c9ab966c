/// Errors Parla reports; each description says what went wrong and what to do about it.
///
/// Parla's calls throw `ParlaError` by type, so a plain `catch` gets one. With Swift 6.3.1,
/// prefer comparing it to matching a case in the `catch` clause: a clause such as
/// `catch ParlaError.emptyText` can crash that compiler (a known bug of typed throws,
/// swiftlang/swift#86924). This compiles everywhere:
///
/// ```swift
/// do {
///     try await synth.write(utterance, to: url)
/// } catch {
///     if error == .emptyText { return }
///     throw error
/// }
/// ```
public enum ParlaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A string that is not a BCP 47 language tag.
    case invalidLanguageTag(String)
    /// A voice identifier the catalog does not contain.
    case unknownVoice(String)
    /// A valid language tag that no installed voice speaks.
    case noVoiceForLanguage(LanguageTag)
    /// The voice catalog directory could not be found in any of the searched places.
    case voiceCatalogNotFound(searched: [String])
    /// A voice preset file that could not be read or decoded.
    case invalidVoicePreset(path: String, reason: String)
    /// The text to speak is empty or contains only whitespace.
    case emptyText
    /// SSML input that is not well-formed or uses an attribute value Parla cannot interpret.
    case invalidSSML(line: Int, column: Int, reason: String)
    /// Input bytes that are not valid UTF-8; `byteOffset` is 0-based.
    case invalidUTF8(source: String, byteOffset: Int)
    /// An input file that could not be opened or read.
    case unreadableInput(path: String, reason: String)
    /// An output file that could not be created or written.
    case unwritableOutput(path: String, reason: String)
    /// A numeric setting outside the range it accepts.
    case parameterOutOfRange(name: String, value: Double, range: ClosedRange<Double>)
    /// The speech engine failed; `reason` is the engine's own message.
    case engineFailure(String)
    /// The work was cancelled before it finished.
    case cancelled
    /// The language-identification model could not be read or is malformed.
    case languageModelInvalid(path: String, reason: String)
    /// The language-identification model was not found in any of the searched places.
    case languageModelNotFound(searched: [String])
    /// No sound server could be reached (none running, or `PULSE_SERVER` points nowhere).
    case audioServerUnavailable(reason: String)
    /// The sound server went away while an utterance was playing.
    case audioServerLost(reason: String)
    /// The output device (PulseAudio sink) does not exist.
    case audioDeviceNotFound(String)
    /// The sound server took a connection or a stream but did not go on (`what` says where it
    /// stopped): its session manager is probably not running.
    case audioServerStalled(String)
    /// The sound server refused a request; `reason` is its message.
    case audioFailure(String)
    /// An input that cannot be rendered as it is; the message says why and what to do.
    case invalidInput(String)
    /// The word timings of an utterance broke one of their rules (a bug in Parla): they are
    /// not written. `reason` names the rule.
    case invalidTimeline(String)

    /// What went wrong and what to do, for any program: advice in terms of the command line
    /// (`-o FILE.wav`, `parla voices`) is added by the commands themselves (ParlaCommands'
    /// `commandLineMessage`), not given to library users.
    public var description: String {
        switch self {
        case .invalidLanguageTag(let s):
            return
                "'\(s)' is not a BCP 47 language tag. Use a tag such as 'en', 'pt-BR' or 'zh-Hans'."
        case .unknownVoice(let s):
            return
                "No voice with identifier '\(s)' (identifiers look like 'espeak-ng.en-us', 'espeak-ng.fr+f2' or 'piper.en_US-joe-medium')."
        case .noVoiceForLanguage(let tag):
            return
                "No voice speaks language '\(tag)'."
        case .voiceCatalogNotFound(let searched):
            return
                "The voice catalog was not found (looked in: \(searched.joined(separator: ", "))). Set PARLA_VOICES to the 'voices' directory of a Parla checkout, or to PREFIX/share/parla/voices of an installed Parla."
        case .invalidVoicePreset(let path, let reason):
            return "The voice preset '\(path)' is invalid: \(reason). Fix or remove the file."
        case .emptyText:
            return "There is nothing to say: the text is empty."
        case .invalidSSML(let line, let column, let reason):
            return "Invalid SSML at line \(line), column \(column): \(reason)."
        case .invalidUTF8(let source, let offset):
            return
                "\(source) is not valid UTF-8: the byte at offset \(offset) (0-based) does not start or continue a UTF-8 character. Convert the file to UTF-8 (for example with iconv) and try again."
        case .unreadableInput(let path, let reason):
            return "Cannot read '\(path)': \(reason). Check the path and its permissions."
        case .unwritableOutput(let path, let reason):
            return "Cannot write '\(path)': \(reason). Choose a path in a directory you can write to."
        case .parameterOutOfRange(let name, let value, let range):
            return
                "\(name) \(formatNumber(value)) is out of range: use a value from \(formatNumber(range.lowerBound)) to \(formatNumber(range.upperBound))."
        case .engineFailure(let reason):
            return "The speech engine failed: \(reason)."
        case .cancelled:
            return "Cancelled before the speech was complete."
        case .languageModelInvalid(let path, let reason):
            return
                "The language model '\(path)' cannot be used: \(reason). Restore voices/langid.bin from a Parla checkout (or retrain it with scripts/langid/train), or turn language detection off and give the language."
        case .audioServerUnavailable(let reason):
            return
                "No sound server is available (\(reason)). Start PulseAudio or PipeWire's pulse server (or set PULSE_SERVER), or render to a file instead."
        case .audioServerLost(let reason):
            return
                "The sound server went away while speaking (\(reason)). The next utterance reconnects once a server is running again; rendering to a file needs none."
        case .audioDeviceNotFound(let name):
            return
                "There is no output device (PulseAudio sink) named '\(name)'. List the sinks with 'pactl list short sinks', or use the default device."
        case .audioServerStalled(let what):
            return
                "The sound server \(what). Check that its session manager runs (PipeWire: 'systemctl --user status wireplumber'; PulseAudio: 'pactl info'), or render to a file instead."
        case .audioFailure(let reason):
            return "The sound server refused to play: \(reason)."
        case .invalidInput(let message):
            return message
        case .invalidTimeline(let reason):
            return
                "Parla could not time the words of this text correctly (\(reason)). This is a bug in Parla: please report it with the text. The audio can still be rendered without its timings."
        case .languageModelNotFound(let searched):
            return
                "The language model langid.bin was not found (looked in: \(searched.joined(separator: ", "))). Set PARLA_VOICES to the 'voices' directory of a Parla checkout, or turn language detection off and give the language."
        }
    }
}

func formatNumber(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
}

/// The version of Parla every program reports (`--version`).
public let parlaVersion = "0.1.0"
