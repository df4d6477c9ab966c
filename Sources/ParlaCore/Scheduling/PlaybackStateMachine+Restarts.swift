/// The decisions about where an utterance's synthesis stops and starts again: after an
/// interrupting announcement (the resume point), after a change of rate or pitch or when it
/// ran far enough ahead of the listener (the restart at a word), and how the sentence marks of
/// a pass that starts inside the text are fixed up. The driver only carries them out: it drops
/// the audio at the server and starts the engine again where these say.
extension PlaybackStateMachine {
    /// Where in the input a sentence began, and its first sample in the stream.
    package struct SentenceStart: Sendable, Hashable {
        package var input: Int
        package var sample: Int

        package init(input: Int, sample: Int) {
            self.input = input
            self.sample = sample
        }
    }

    /// Where synthesis starts again after the audio from ``word`` on was dropped.
    package struct Restart: Sendable, Hashable {
        /// The first word the new pass speaks (stream samples).
        package var word: WordMark
        /// Where the sentence that word is in began, when words of it come before the cut;
        /// nil when the cut starts a sentence.
        package var sentenceStart: SentenceStart?
        /// Whether that sentence was reported already, whole: the new pass must not report it
        /// again.
        package var sentenceReported: Bool

        package init(word: WordMark, sentenceStart: SentenceStart?, sentenceReported: Bool) {
            self.word = word
            self.sentenceStart = sentenceStart
            self.sentenceReported = sentenceReported
        }
    }

    /// Where a suspended utterance carries on: the start of the sentence, or of the word, the
    /// listener was hearing; the previous resume point if no word of this playback was heard.
    /// `source` maps input offsets of markup to offsets in the spoken text.
    package func resumePoint(at point: Utterance.ResumePoint, source: SourceMap?) -> Resume? {
        guard nextWord > 0 else { return resumedFrom }
        let heard = words[nextWord - 1]
        var start = heard
        if point == .sentence {
            let lo = heard.range.lowerBound
            let sentenceStart: Int
            if let sentence = sentences.last(where: { $0.range.lowerBound <= lo }), lo < sentence.range.upperBound {
                sentenceStart = sentence.range.lowerBound
            } else {
                // Its sentence mark is not synthesized yet: it began where the last known one ended.
                sentenceStart = sentences.last(where: { $0.range.upperBound <= lo })?.range.upperBound ?? resumedFrom?.input ?? 0
            }
            start = words.first { $0.range.lowerBound >= sentenceStart } ?? heard
        }
        let input = start.range.lowerBound
        return Resume(input: input, text: source.map { $0.textOffset(atMarkup: input) } ?? input, word: start.range)
    }

    /// Forgets the marks from word `w` on, whose audio the driver has just dropped at the
    /// server, and says where synthesis starts again to make them: at `w`, inside the sentence
    /// `w` is in. `passSentenceStart` is where the sentence the current pass started in began
    /// (nil: the pass started a sentence).
    package mutating func restart(droppingFrom w: WordMark, passSentenceStart: SentenceStart?) -> Restart {
        let cutInput = w.range.lowerBound
        let lastSentence = sentences.last { $0.startSample < w.startSample }
        // Reported already, whole, when the engine had reached the next sentence.
        let reported = (lastSentence?.range.upperBound ?? 0) > cutInput
        let sentenceInput = lastSentence?.range.upperBound ?? passSentenceStart?.input ?? resumedFrom?.input ?? 0
        var start: SentenceStart?
        // Only when words of that sentence come before the cut (else the cut starts a sentence).
        if !reported, let first = words.first(where: { $0.range.lowerBound >= sentenceInput }), first.range.lowerBound < cutInput {
            // At its first word, as in a whole rendering (the first sentence holds all before it).
            start = SentenceStart(input: lastSentence == nil ? sentenceInput : first.range.lowerBound, sample: first.startSample)
        }
        discardMarks(from: w.startSample)
        return Restart(word: w, sentenceStart: start, sentenceReported: reported)
    }

    /// Whether a pass asked to stop because it is far enough ahead of the listener stops at
    /// word `w`: at the start of a sentence, or anywhere once `samplesAhead` is twice
    /// ``aheadLimit``; never at the pass's first word (`passBase`).
    package mutating func parks(at w: WordMark, passBase: Int, samplesAhead: Int) -> Bool {
        w.startSample > passBase && (startsSentence(w) || samplesAhead > 2 * aheadLimit)
    }
}

/// The sentence marks of one synthesis pass, made right for the whole utterance: a pass that
/// starts inside the text (after a cut or a resume) has its first sentence start where the
/// sentence really began, and a sentence reported before a cut is not reported again.
package struct PassSentences: Sendable {
    /// Where the pass's audio lands in the stream, and where it starts in the input.
    package let base: Int
    package let input: Int
    /// Where the sentence the pass starts in began (nil: the pass starts a sentence).
    package let sentenceStart: PlaybackStateMachine.SentenceStart?
    private var sawSentence = false
    private var skipsFirst: Bool

    /// `skipsFirst`: that sentence was reported whole before the cut.
    package init(base: Int, input: Int, sentenceStart: PlaybackStateMachine.SentenceStart?, skipsFirst: Bool = false) {
        self.base = base
        self.input = input
        self.sentenceStart = sentenceStart
        self.skipsFirst = skipsFirst
    }

    /// The mark to record for the engine's sentence mark `m` (already in stream samples), nil
    /// if it is to be dropped.
    package mutating func accept(_ m: SentenceMark) -> SentenceMark? {
        if skipsFirst {
            skipsFirst = false
            sawSentence = true
            return nil
        }
        var m = m
        if !sawSentence, base > 0 || input > 0 {
            // The pass starts inside the text: its first sentence starts where it does.
            let start = sentenceStart ?? .init(input: input, sample: m.startSample)
            m.range = min(start.input, m.range.upperBound)..<m.range.upperBound
            m.startSample = min(start.sample, m.startSample)
        }
        sawSentence = true
        return m
    }
}
