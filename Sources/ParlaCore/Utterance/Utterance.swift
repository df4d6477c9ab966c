import FoundationEssentials

/// A piece of text to speak, with its speech settings.
///
/// The text is an `AttributedString` whose spans may carry ``SpeechAttributes`` (language,
/// pitch, rate, volume, punctuation, spell-out, announcement queueing and priority). The
/// utterance-level settings below apply to the whole text; span attributes multiply them.
///
/// ```swift
/// var text = AttributedString("Hello ")
/// var greek = AttributedString("Καλημέρα")
/// greek.speechLanguage = "el"
/// text.append(greek)
/// let utterance = Utterance(text)
/// ```
public struct Utterance: Sendable {
    /// The text, with optional speech attributes on spans.
    public var text: AttributedString
    /// The language of text that has no language attribute (nil: the voice's language, else English).
    public var language: LanguageTag?
    /// The voice for text whose language it speaks (nil: the default voice for each language).
    public var voice: SpeechVoice?
    /// Voices to prefer, by language, for text ``voice`` does not speak: a voice listed for
    /// `en` speaks English of any region (`en-GB` too), before the catalog's default. Empty:
    /// the catalog's defaults.
    public var preferredVoices: [LanguageTag: SpeechVoice] = [:]
    /// Speaking rate as a multiple of the voice's own rate (1: the voice's rate; 2: twice as
    /// fast), 0.25–6. The same unit as the `speechRate` attribute and the live
    /// `SpeechSynthesizer.setRate(_:)`, so rates compose by multiplying. The words per minute
    /// they give are kept within 80–1,000.
    public var rate: Double = 1
    /// The rate to multiply in words per minute, 80–1,000, instead of the voice's own (nil: the
    /// voice's, 175 for espeak-ng's voices). A convenience for tools whose users speak in
    /// words per minute, such as `parla say --rate`.
    public var wordsPerMinute: Double?
    /// Pitch as a multiple of the voice's own, 0–2 (1: the voice's pitch; 0 is the engine's
    /// lowest). The same unit as the live `SpeechSynthesizer.setPitch(_:)` and the `pitch`
    /// attribute, so pitches compose by multiplying.
    public var pitch: Double = 1
    /// The former name of ``pitch``.
    @available(*, deprecated, renamed: "pitch")
    public var pitchMultiplier: Double {
        get { pitch }
        set { pitch = newValue }
    }
    /// Volume as a multiple of the voice's normal loudness, 0–2 (1: normal), like
    /// ``rate`` and ``pitch``. Unlike AVSpeechUtterance's 0–1 it can ask for louder
    /// than normal (SSML `loud`, `parla say --volume 150`), which the engine makes without
    /// clipping. The live `SpeechSynthesizer.setVolume(_:)` multiplies it again, 0–2.
    public var volume: Double = 1
    /// How much punctuation is read aloud where spans do not say otherwise.
    public var punctuation: PunctuationMode = .none
    /// Silence before the speech starts.
    public var preUtteranceDelay: Duration = .zero
    /// Silence after the speech ends.
    public var postUtteranceDelay: Duration = .zero
    /// Silences inside the text (from SSML `<break>` or added by the caller).
    public var pauses: [Pause] = []
    /// Named points in the text (from SSML `<mark name="…"/>` or added by the caller). Live
    /// speech reports each as a ``SpeechEvent/Kind/mark(_:)`` event when the listener reaches it.
    public var marks: [Mark] = []
    /// Whether an interrupting announcement suspends this utterance rather than cutting it off:
    /// it then goes back into the queue right after the announcement and carries on from
    /// ``resumePoint``, reporting ``SpeechEvent/Kind/resumed(from:)`` and keeping its offsets.
    /// `stop` and queued announcements still end it. The same as the
    /// ``SpeechAttributes/ResumesAfterInterruptionAttribute`` attribute on any span.
    public var resumesAfterInterruption = false
    /// Where a suspended utterance carries on: the start of the sentence (default) or of the
    /// word the listener was hearing.
    public var resumePoint: ResumePoint = .sentence
    /// For utterances parsed from markup: the markup itself and where each text scalar came from.
    package internal(set) var source: SourceMap?

    /// Where an utterance suspended by an announcement carries on.
    public enum ResumePoint: String, Sendable, Hashable, CaseIterable {
        /// The start of the sentence that was being heard.
        case sentence
        /// The start of the word that was being heard.
        case word
    }

    /// A silence of `duration` placed before the scalar at `offset` of the text.
    public struct Pause: Sendable, Hashable {
        /// Unicode-scalar offset into ``Utterance/string`` where the silence goes.
        public var offset: Int
        /// How long the silence lasts.
        public var duration: Duration
        /// Creates a pause.
        public init(offset: Int, duration: Duration) {
            self.offset = offset
            self.duration = duration
        }
    }

    /// A named point placed before the scalar at `offset` of the text (SSML's `<mark>`).
    ///
    /// The listener reaches it when the first word that does not end before it starts to be
    /// heard; a mark after the last word is reached when the audio ends.
    public struct Mark: Sendable, Hashable {
        /// The mark's name, as given (speech-dispatcher's index marks, Orca's word marks).
        public var name: String
        /// Unicode-scalar offset into ``Utterance/string`` where the mark sits.
        public var offset: Int
        /// Creates a mark.
        public init(name: String, offset: Int) {
            self.name = name
            self.offset = offset
        }
    }

    /// An utterance of plain `string` (spoken literally: `<` and `&` are text, not markup).
    public init(string: String, language: LanguageTag? = nil) {
        self.text = AttributedString(string)
        self.language = language
    }

    /// An utterance of an attributed string whose spans may carry speech attributes.
    public init(_ text: AttributedString, language: LanguageTag? = nil) {
        self.text = text
        self.language = language
    }

    /// Parses an SSML document (`<speak>…</speak>`) into an utterance.
    /// Reported ranges are offsets into `ssml` itself.
    /// - Throws: ``ParlaError/invalidSSML(line:column:reason:)`` if the markup is not well-formed.
    public init(ssml: String) throws(ParlaError) {
        var parser = SSMLParser(ssml)
        self = try parser.parse()
    }

    /// The plain text that is spoken (for SSML input: the text content, not the markup).
    public var string: String {
        // The slice's initializer copies the text in one go; the generic one, a character at a
        // time, took 3-5 ms for 10,000 characters.
        String(text.characters[...])
    }

    /// The text the caller gave, in whose index space every reported range lies:
    /// the markup for SSML input, otherwise ``string``.
    public var inputText: String { source?.markup ?? string }

    /// Where each mark sits in ``inputText`` (Unicode-scalar offsets), in text order.
    package var markPositions: [(name: String, inputOffset: Int)] {
        let sorted = marks.enumerated().sorted { ($0.element.offset, $0.offset) < ($1.element.offset, $1.offset) }.map(\.element)
        guard let source else { return sorted.map { ($0.name, max(0, $0.offset)) } }
        return sorted.map { ($0.name, source.markupOffset(before: $0.offset)) }
    }
}

/// Where each Unicode scalar of an utterance's text came from in the markup it was parsed from.
package struct SourceMap: Sendable, Hashable {
    /// The markup the utterance was parsed from.
    package let markup: String
    /// For text scalar `i`, its range in `markup` (scalar offsets) is `starts[i]..<ends[i]`.
    package let starts: [Int32]
    package let ends: [Int32]
    /// Text offsets, ascending, where the markup ends a sentence whatever the punctuation:
    /// `<p>` and `<s>` boundaries and strong `<break>`s. (Whitespace in markup is layout.)
    let sentenceBreaks: [Int]

    /// How many Unicode scalars the markup has.
    package let markupScalarCount: Int

    init(markup: String, scalarCount: Int? = nil, starts: [Int32], ends: [Int32], sentenceBreaks: [Int] = []) {
        self.markup = markup
        self.markupScalarCount = scalarCount ?? markup.unicodeScalars.count
        self.starts = starts
        self.ends = ends
        self.sentenceBreaks = sentenceBreaks
    }

    /// Whether the markup ends a sentence at a text offset in `range`.
    package func breaksSentence(in range: ClosedRange<Int>) -> Bool {
        var lo = 0, hi = sentenceBreaks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if sentenceBreaks[mid] < range.lowerBound { lo = mid + 1 } else { hi = mid }
        }
        return lo < sentenceBreaks.count && sentenceBreaks[lo] <= range.upperBound
    }

    /// Where in the markup the point before text scalar `offset` lies: where that scalar came
    /// from, or the end of the markup for a point after the last scalar.
    /// The text offset of the first scalar that comes from markup offset `offset` or later
    /// (the scalar count when none does).
    package func textOffset(atMarkup offset: Int) -> Int {
        var lo = 0, hi = starts.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if Int(starts[mid]) < offset { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    package func markupOffset(before offset: Int) -> Int {
        offset >= 0 && offset < starts.count ? Int(starts[offset]) : markupScalarCount
    }

    /// The range in the markup covered by the text scalars `range`.
    package func markupRange(of range: Range<Int>) -> Range<Int> {
        guard !starts.isEmpty else { return 0..<0 }
        let lo = Int(starts[min(range.lowerBound, starts.count - 1)])
        let hi = range.isEmpty ? lo : Int(ends[min(range.upperBound - 1, ends.count - 1)])
        return lo..<max(lo, hi)
    }
}
