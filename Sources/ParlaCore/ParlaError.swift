/// An error Parla reports: a ``code`` that says what kind of failure it is, and a
/// ``description`` that says what went wrong and what to do about it.
///
/// `ParlaError` is a struct rather than an enum so that a new kind of failure can be added
/// without breaking the exhaustive `switch` of every program that uses Parla: compare
/// ``code`` with the codes you handle, and let the others through.
///
/// ```swift
/// do {
///     try await synth.write(utterance, to: url)
/// } catch {
///     if error.code == .emptyText { return }
///     throw error
/// }
/// ```
///
/// Parla's calls throw `ParlaError` by type, so a plain `catch` gets one.
public struct ParlaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure an error is. New codes may come in any release: a `switch` over
    /// codes needs a `default`. The raw value is stable, for logs and other languages.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        /// A code from its raw value.
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A string that is not a BCP 47 language tag (``subject``: the string).
        public static let invalidLanguageTag = Code(rawValue: "invalid-language-tag")
        /// A voice identifier no installed voice has (``subject``: the identifier).
        public static let unknownVoice = Code(rawValue: "unknown-voice")
        /// A valid language tag that no installed voice speaks (``subject``: the tag).
        public static let noVoiceForLanguage = Code(rawValue: "no-voice-for-language")
        /// The voice catalog was found nowhere it was looked for.
        public static let voiceCatalogNotFound = Code(rawValue: "voice-catalog-not-found")
        /// A voice preset file that could not be read or decoded (``subject``: its path).
        public static let invalidVoicePreset = Code(rawValue: "invalid-voice-preset")
        /// The text to speak is empty or holds only whitespace.
        public static let emptyText = Code(rawValue: "empty-text")
        /// SSML that is not well-formed or holds a value Parla cannot read (``line``, ``column``).
        public static let invalidSSML = Code(rawValue: "invalid-ssml")
        /// Input bytes that are not UTF-8 (``subject``: where they came from; ``byteOffset``).
        public static let invalidUTF8 = Code(rawValue: "invalid-utf8")
        /// An input file that could not be opened or read (``subject``: its path).
        public static let unreadableInput = Code(rawValue: "unreadable-input")
        /// An output file that could not be created or written (``subject``: its path).
        public static let unwritableOutput = Code(rawValue: "unwritable-output")
        /// A numeric setting outside the range it accepts (``subject``: the setting's name).
        public static let parameterOutOfRange = Code(rawValue: "parameter-out-of-range")
        /// A speech engine, or a part it needs, is missing or cannot start (``subject``:
        /// `espeak-ng`, `onnxruntime`, `parla-engine`, a `render worker`).
        public static let engineUnavailable = Code(rawValue: "engine-unavailable")
        /// A speech engine died while it worked (``subject``: which); the next utterance
        /// starts it again.
        public static let engineCrashed = Code(rawValue: "engine-crashed")
        /// A voice that is installed but cannot be loaded: a Piper model that is damaged or of
        /// a form Parla cannot run (``subject``: the voice).
        public static let voiceUnavailable = Code(rawValue: "voice-unavailable")
        /// A speech engine refused or failed this text (``subject``: which engine, if known).
        public static let engineFailure = Code(rawValue: "engine-failure")
        /// The work was cancelled before it finished.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The language-identification model could not be read (``subject``: its path).
        public static let languageModelInvalid = Code(rawValue: "language-model-invalid")
        /// The language-identification model was found nowhere it was looked for.
        public static let languageModelNotFound = Code(rawValue: "language-model-not-found")
        /// No sound server could be reached.
        public static let audioServerUnavailable = Code(rawValue: "audio-server-unavailable")
        /// The sound server went away while an utterance was playing.
        public static let audioServerLost = Code(rawValue: "audio-server-lost")
        /// The output device (a PulseAudio sink) does not exist (``subject``: its name).
        public static let audioDeviceNotFound = Code(rawValue: "audio-device-not-found")
        /// The sound server took a connection or a stream and did not go on.
        public static let audioServerStalled = Code(rawValue: "audio-server-stalled")
        /// The sound server refused a request.
        public static let audioFailure = Code(rawValue: "audio-failure")
        /// An input that cannot be rendered as it is.
        public static let invalidInput = Code(rawValue: "invalid-input")
        /// The word timings of an utterance broke one of their rules (a bug in Parla).
        public static let invalidTimeline = Code(rawValue: "invalid-timeline")
    }

    /// What kind of failure this is.
    public let code: Code
    /// What went wrong and what to do, for any program: advice in terms of the command line
    /// (`-o FILE.wav`, `parla voices`) is added by the commands themselves, not given to
    /// library users.
    public let description: String
    /// What the error is about, where there is one thing: the voice, language tag, path,
    /// setting or engine (each code says which).
    public let subject: String?
    /// The reason the failing part gave (the engine's, the file system's, the sound
    /// server's), where there is one.
    public let reason: String?
    /// Where in the input, for ``Code/invalidSSML`` (1-based line and column).
    public let line: Int?
    public let column: Int?
    /// Where in the input, for ``Code/invalidUTF8`` (0-based).
    public let byteOffset: Int?

    /// An error of `code` with its message; the other fields as the code describes them.
    public init(
        _ code: Code, _ description: String, subject: String? = nil, reason: String? = nil, line: Int? = nil,
        column: Int? = nil, byteOffset: Int? = nil
    ) {
        self.code = code
        self.description = description
        self.subject = subject
        self.reason = reason
        self.line = line
        self.column = column
        self.byteOffset = byteOffset
    }

    /// Whether `error` is of kind `code`: `catch ParlaError.Code.emptyText` style matching.
    public static func ~= (code: Code, error: ParlaError) -> Bool { error.code == code }

    /// A string that is not a BCP 47 language tag.
    public static func invalidLanguageTag(_ string: String) -> ParlaError {
        ParlaError(
            .invalidLanguageTag, "'\(string)' is not a BCP 47 language tag. Use a tag such as 'en', 'pt-BR' or 'zh-Hans'.",
            subject: string)
    }

    /// A voice identifier the catalog does not contain.
    public static func unknownVoice(_ identifier: String) -> ParlaError {
        ParlaError(
            .unknownVoice,
            "No voice with identifier '\(identifier)' (identifiers look like 'espeak-ng.en-us', 'espeak-ng.fr+f2' or 'piper.en_US-joe-medium').",
            subject: identifier)
    }

    /// A valid language tag that no installed voice speaks.
    public static func noVoiceForLanguage(_ tag: LanguageTag) -> ParlaError {
        ParlaError(.noVoiceForLanguage, "No voice speaks language '\(tag)'.", subject: tag.identifier)
    }

    /// The voice catalog directory could not be found in any of the searched places.
    public static func voiceCatalogNotFound(searched: [String]) -> ParlaError {
        ParlaError(
            .voiceCatalogNotFound,
            "The voice catalog was not found (looked in: \(searched.joined(separator: ", "))). Set PARLA_VOICES to the 'voices' directory of a Parla checkout, or to PREFIX/share/parla/voices of an installed Parla."
        )
    }

    /// A voice preset file that could not be read or decoded.
    public static func invalidVoicePreset(path: String, reason: String) -> ParlaError {
        ParlaError(
            .invalidVoicePreset, "The voice preset '\(path)' is invalid: \(reason). Fix or remove the file.", subject: path, reason: reason)
    }

    /// The text to speak is empty or contains only whitespace.
    public static let emptyText = ParlaError(.emptyText, "There is nothing to say: the text is empty.")

    /// SSML input that is not well-formed or uses an attribute value Parla cannot interpret.
    public static func invalidSSML(line: Int, column: Int, reason: String) -> ParlaError {
        ParlaError(.invalidSSML, "Invalid SSML at line \(line), column \(column): \(reason).", reason: reason, line: line, column: column)
    }

    /// Input bytes that are not valid UTF-8; `byteOffset` is 0-based.
    public static func invalidUTF8(source: String, byteOffset: Int) -> ParlaError {
        ParlaError(
            .invalidUTF8,
            "\(source) is not valid UTF-8: the byte at offset \(byteOffset) (0-based) does not start or continue a UTF-8 character. Convert the file to UTF-8 (for example with iconv) and try again.",
            subject: source, byteOffset: byteOffset)
    }

    /// An input file that could not be opened or read.
    public static func unreadableInput(path: String, reason: String) -> ParlaError {
        ParlaError(.unreadableInput, "Cannot read '\(path)': \(reason). Check the path and its permissions.", subject: path, reason: reason)
    }

    /// An output file that could not be created or written.
    public static func unwritableOutput(path: String, reason: String) -> ParlaError {
        ParlaError(
            .unwritableOutput, "Cannot write '\(path)': \(reason). Choose a path in a directory you can write to.", subject: path,
            reason: reason)
    }

    /// A numeric setting outside the range it accepts.
    public static func parameterOutOfRange(name: String, value: Double, range: ClosedRange<Double>) -> ParlaError {
        ParlaError(
            .parameterOutOfRange,
            "\(name) \(formatNumber(value)) is out of range: use a value from \(formatNumber(range.lowerBound)) to \(formatNumber(range.upperBound)).",
            subject: name)
    }

    /// A speech engine, or a part it needs, is missing or cannot start.
    public static func engineUnavailable(_ engine: String, reason: String) -> ParlaError {
        ParlaError(.engineUnavailable, "The speech engine cannot start: \(reason).", subject: engine, reason: reason)
    }

    /// A speech engine died while it worked.
    public static func engineCrashed(_ engine: String, reason: String) -> ParlaError {
        ParlaError(.engineCrashed, "The speech engine failed: \(reason).", subject: engine, reason: reason)
    }

    /// An installed voice that cannot be loaded.
    public static func voiceUnavailable(_ voice: String, reason: String) -> ParlaError {
        ParlaError(.voiceUnavailable, "The voice \(voice) cannot be used: \(reason).", subject: voice, reason: reason)
    }

    /// The speech engine failed; `reason` is the engine's own message.
    public static func engineFailure(_ reason: String, engine: String? = nil) -> ParlaError {
        ParlaError(.engineFailure, "The speech engine failed: \(reason).", subject: engine, reason: reason)
    }

    /// The work was cancelled before it finished.
    public static let cancelled = ParlaError(.cancelled, "Cancelled before the speech was complete.")

    /// The language-identification model could not be read or is malformed.
    public static func languageModelInvalid(path: String, reason: String) -> ParlaError {
        ParlaError(
            .languageModelInvalid,
            "The language model '\(path)' cannot be used: \(reason). Restore voices/langid.bin from a Parla checkout (or retrain it with scripts/langid/train), or turn language detection off and give the language.",
            subject: path, reason: reason)
    }

    /// The language-identification model was not found in any of the searched places.
    public static func languageModelNotFound(searched: [String]) -> ParlaError {
        ParlaError(
            .languageModelNotFound,
            "The language model langid.bin was not found (looked in: \(searched.joined(separator: ", "))). Set PARLA_VOICES to the 'voices' directory of a Parla checkout, or turn language detection off and give the language."
        )
    }

    /// No sound server could be reached (none running, or `PULSE_SERVER` points nowhere).
    public static func audioServerUnavailable(reason: String) -> ParlaError {
        ParlaError(
            .audioServerUnavailable,
            "No sound server is available (\(reason)). Start PulseAudio or PipeWire's pulse server (or set PULSE_SERVER), or render to a file instead.",
            reason: reason)
    }

    /// The sound server went away while an utterance was playing.
    public static func audioServerLost(reason: String) -> ParlaError {
        ParlaError(
            .audioServerLost,
            "The sound server went away while speaking (\(reason)). The next utterance reconnects once a server is running again; rendering to a file needs none.",
            reason: reason)
    }

    /// The output device (PulseAudio sink) does not exist.
    public static func audioDeviceNotFound(_ name: String) -> ParlaError {
        ParlaError(
            .audioDeviceNotFound,
            "There is no output device (PulseAudio sink) named '\(name)'. List the sinks with 'pactl list short sinks', or use the default device.",
            subject: name)
    }

    /// The sound server took a connection or a stream but did not go on (`what` says where it
    /// stopped): its session manager is probably not running.
    public static func audioServerStalled(_ what: String) -> ParlaError {
        ParlaError(
            .audioServerStalled,
            "The sound server \(what). Check that its session manager runs (PipeWire: 'systemctl --user status wireplumber'; PulseAudio: 'pactl info'), or render to a file instead.",
            reason: what)
    }

    /// The sound server refused a request; `reason` is its message.
    public static func audioFailure(_ reason: String) -> ParlaError {
        ParlaError(.audioFailure, "The sound server refused to play: \(reason).", reason: reason)
    }

    /// An input that cannot be rendered as it is; the message says why and what to do.
    public static func invalidInput(_ message: String) -> ParlaError { ParlaError(.invalidInput, message) }

    /// The word timings of an utterance broke one of their rules (a bug in Parla): they are
    /// not written. `reason` names the rule.
    public static func invalidTimeline(_ reason: String) -> ParlaError {
        ParlaError(
            .invalidTimeline,
            "Parla could not time the words of this text correctly (\(reason)). This is a bug in Parla: please report it with the text. The audio can still be rendered without its timings.",
            reason: reason)
    }
}

func formatNumber(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
}

/// The version of Parla every program reports (`--version`).
public let parlaVersion = "0.2.0"
