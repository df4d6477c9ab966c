/// A word of the input with the stretch of audio that speaks it.
public struct WordMark: Sendable, Hashable {
    /// Unicode-scalar offsets into the caller's input text (``Utterance/inputText``), end exclusive,
    /// on grapheme-cluster boundaries.
    public var range: Range<Int>
    /// The word as spoken (for SSML input, the decoded text, not the markup).
    public var word: String
    /// First audio sample of the word, counted from the start of the utterance's audio.
    public var startSample: Int
    /// Sample just after the word's audio (before any following silence).
    public var endSample: Int
    /// Index of the segment (language and voice) the word belongs to.
    public var segment: Int
    /// True when the engine reported no position for this word and its timing was interpolated.
    public var isEstimated: Bool
    /// The phonemes the engine spoke the word with (IPA): for a Piper voice those fed to the
    /// model, as espeak-ng's `--ipa` writes them; for an espeak-ng voice its phoneme events,
    /// without stress marks. nil if the engine did not say.
    public var phonemes: String? = nil

    /// A word heard from `startSample` to `endSample` (engines, and ParlaTesting's fake).
    package init(
        range: Range<Int>, word: String, startSample: Int, endSample: Int, segment: Int, isEstimated: Bool, phonemes: String? = nil
    ) {
        self.range = range
        self.word = word
        self.startSample = startSample
        self.endSample = endSample
        self.segment = segment
        self.isEstimated = isEstimated
        self.phonemes = phonemes
    }
}

/// A sentence of the input with its audio span.
public struct SentenceMark: Sendable, Hashable {
    /// Unicode-scalar offsets into the caller's input text, end exclusive.
    public var range: Range<Int>
    /// First audio sample of the sentence.
    public var startSample: Int
    /// Sample just after the sentence's speech.
    public var endSample: Int
    /// True when the engine's report of the sentence's start was repaired (its time lay
    /// outside the audio or went backwards, and was moved to the nearest possible time).
    public var isEstimated: Bool = false

    /// A sentence heard from `startSample` to `endSample`.
    package init(range: Range<Int>, startSample: Int, endSample: Int, isEstimated: Bool = false) {
        self.range = range
        self.startSample = startSample
        self.endSample = endSample
        self.isEstimated = isEstimated
    }
}

/// A stretch of the input spoken in one language by one voice.
public struct SegmentMark: Sendable, Hashable {
    /// Position of the segment in the utterance, from 0.
    public var index: Int
    /// Unicode-scalar offsets into the caller's input text, end exclusive.
    public var range: Range<Int>
    /// The language the segment is spoken in.
    public var language: LanguageTag
    /// The identifier of the voice that speaks it.
    public var voice: String
    /// First audio sample of the segment.
    public var startSample: Int
    /// Sample just after the segment's audio.
    public var endSample: Int
}

/// A block of 16-bit mono PCM audio and where it sits in the utterance's audio.
public struct PCMBuffer: Sendable, Hashable {
    /// The samples, native-endian signed 16-bit.
    public var samples: [Int16]
    /// Index of the first sample in the utterance's audio.
    public var startSample: Int
    /// Samples per second.
    public var sampleRate: Int

    /// `samples` at `startSample` of the utterance's audio.
    package init(samples: [Int16], startSample: Int, sampleRate: Int) {
        self.samples = samples
        self.startSample = startSample
        self.sampleRate = sampleRate
    }
}

/// What synthesis produces, in order: audio as it is made, and each mark once its timing is final.
public enum SynthesisEvent: Sendable, Hashable {
    /// A block of audio.
    case audio(PCMBuffer)
    /// A word and its timing (marks arrive before or shortly after the audio they describe).
    case word(WordMark)
    /// A sentence and its timing.
    case sentence(SentenceMark)
    /// A language/voice segment, sent once its end is known.
    case segment(SegmentMark)
}

/// The full word, sentence and segment timeline of one rendered utterance.
public struct SpeechTimeline: Sendable, Hashable {
    /// Samples per second of the audio the timeline describes.
    public var sampleRate: Int
    /// Total number of samples in the audio.
    public var sampleCount: Int
    /// Language/voice segments in order.
    public var segments: [SegmentMark] = []
    /// Words in order.
    public var words: [WordMark] = []
    /// Sentences in order.
    public var sentences: [SentenceMark] = []

    /// Creates an empty timeline.
    public init(sampleRate: Int, sampleCount: Int = 0) {
        self.sampleRate = sampleRate
        self.sampleCount = sampleCount
    }

    /// Records a synthesis event (audio only extends ``sampleCount``).
    public mutating func record(_ event: SynthesisEvent) {
        switch event {
        case .audio(let b): sampleCount = max(sampleCount, b.startSample + b.samples.count)
        case .word(let w): words.append(w)
        case .sentence(let s): sentences.append(s)
        case .segment(let s): segments.append(s)
        }
    }

    /// The time from the start of the audio to `sample`.
    public func time(ofSample sample: Int) -> Duration { .samples(sample, atRate: sampleRate) }
}
