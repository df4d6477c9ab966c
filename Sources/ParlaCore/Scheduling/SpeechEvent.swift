/// A stretch of an utterance's text that is being heard, located every way a caller may need.
public struct SpokenRange: Sendable, Hashable {
    /// The range in the text the caller gave (``Utterance/inputText``: the markup for SSML).
    public var range: Range<String.Index>
    /// The same range as UTF-16 offsets (`NSRange`-style, for UI toolkits).
    public var utf16Range: Range<Int>
    /// The same range as Unicode-scalar offsets.
    public var scalarRange: Range<Int>
    /// The text as spoken (for SSML, the decoded text).
    public var text: String
    /// Where its audio starts, counted from the start of the utterance's audio, in samples.
    public var audioSample: Int
    /// Samples per second of that audio.
    public var sampleRate: Int
    /// For a word, the phonemes it is spoken with (IPA, as in its `WordMark`); nil if the
    /// engine did not say, and for a sentence.
    public var phonemes: String?

    /// Where its audio starts, as a time from the start of the utterance's audio.
    public var audioTime: Duration { .samples(audioSample, atRate: sampleRate) }

    /// Creates a range from all its parts.
    public init(
        range: Range<String.Index>, utf16Range: Range<Int>, scalarRange: Range<Int>, text: String, audioSample: Int, sampleRate: Int,
        phonemes: String? = nil
    ) {
        self.range = range
        self.utf16Range = utf16Range
        self.scalarRange = scalarRange
        self.text = text
        self.audioSample = audioSample
        self.sampleRate = sampleRate
        self.phonemes = phonemes
    }
}

/// How an announcement ended: the AnnouncementDidFinish notification of the accessibility world.
public struct AnnouncementResult: Sendable, Hashable {
    /// The announced text.
    public var string: String
    /// True when it was spoken to the end; false when it was cut off, dropped or failed.
    public var wasSuccessful: Bool
    /// Creates a result.
    public init(string: String, wasSuccessful: Bool) {
        self.string = string
        self.wasSuccessful = wasSuccessful
    }
}

/// How an utterance's audio played through the sound server: how often the server ran out of
/// audio (it then plays silence, and the rest comes that much later), and the buffer the stream
/// kept at the end (it grows after each underflow, up to 8 times the target latency or 250 ms).
public struct PlaybackReport: Sendable, Hashable {
    /// Times the server ran dry while playing.
    public var underflows: Int
    /// The buffer the stream asked the server to keep at the end.
    public var latency: Duration
    /// Creates a report.
    public init(underflows: Int, latency: Duration) {
        self.underflows = underflows
        self.latency = latency
    }
}

/// Something that happened to an utterance, at the moment the listener hears it.
public struct SpeechEvent: Sendable {
    /// What happened.
    public enum Kind: Sendable, Hashable {
        /// Its audio began playing.
        case started
        /// This word's audio is reaching the listener now.
        case willSpeakWord(SpokenRange)
        /// This sentence's audio is reaching the listener now.
        case willSpeakSentence(SpokenRange)
        /// The listener reached a named point of the text (an SSML `<mark name="…"/>`, an
        /// ``Utterance/Mark``): delivered just before the first word after it, or when the audio
        /// ends for a mark after the last word.
        case mark(String)
        /// A suspended utterance (``Utterance/resumesAfterInterruption``) carries on after the
        /// announcement that cut it off, from this word of the original text (the start of the
        /// sentence or the word that was being heard); its `started` came before the interruption.
        case resumed(from: SpokenRange)
        /// Playback paused (`pause(at:)`).
        case paused
        /// Playback resumed (`continue()`).
        case continued
        /// The last sample was played. Terminal.
        case finished
        /// Cut off while speaking, or dropped before it started. Terminal.
        case cancelled(CancellationReason)
        /// It could not be spoken (bad input, no sound server, server lost). Terminal.
        case failed(ParlaError)

        /// Whether this is the one event that ends an utterance.
        public var isTerminal: Bool {
            switch self {
            case .finished, .cancelled, .failed: return true
            default: return false
            }
        }

        /// The event's name as `--events json` prints it.
        public var name: String {
            switch self {
            case .started: return "started"
            case .willSpeakWord: return "word"
            case .willSpeakSentence: return "sentence"
            case .mark: return "mark"
            case .resumed: return "resumed"
            case .paused: return "paused"
            case .continued: return "continued"
            case .finished: return "finished"
            case .cancelled(.interrupted): return "interrupted"
            case .cancelled(.dropped): return "dropped"
            case .failed: return "failed"
            }
        }
    }

    /// The utterance it is about.
    public var utterance: UtteranceID
    /// What happened.
    public var kind: Kind
    /// When the event was delivered, on the monotonic clock.
    public var time: SpeechInstant
    /// For the terminal event of an announcement: its text and whether it was spoken to the end.
    public var announcement: AnnouncementResult?
    /// For the terminal event of an utterance that played: how its (last) stream played.
    public var playback: PlaybackReport?

    /// Creates an event.
    public init(
        utterance: UtteranceID, kind: Kind, time: SpeechInstant, announcement: AnnouncementResult? = nil, playback: PlaybackReport? = nil
    ) {
        self.utterance = utterance
        self.kind = kind
        self.time = time
        self.announcement = announcement
        self.playback = playback
    }
}
