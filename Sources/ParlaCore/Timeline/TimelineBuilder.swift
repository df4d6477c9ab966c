/// Turns what the engine reports while it speaks a ``SpeechPlan`` (audio blocks, word and
/// sentence positions) into ``SynthesisEvent``s whose ranges lie in the caller's text.
///
/// The engine's word events are repaired here: positions are mapped back through the
/// ``EngineInput`` and the ``SourceMap``, expanded to grapheme clusters, matched against
/// Parla's own word tokens (so a word the engine skipped still gets a mark, with interpolated
/// timing, and a word reported twice gets one), and word ends are trimmed to the silence
/// before the next word.
package struct TimelineBuilder {
    /// Samples per second of the engine's audio.
    package let sampleRate: Int
    private let plan: SpeechPlan
    private let textScalars: [Unicode.Scalar]
    private let segments: [(range: Range<Int>, language: LanguageTag, voice: SpeechVoice)]
    private let emit: (SynthesisEvent) -> Void

    /// Samples produced so far.
    package private(set) var sampleCount = 0
    private var runIndex = -1
    private var aligner: RunAligner?
    private var input: EngineInput?
    private var segmentIndex = -1
    private var segmentStart = 0
    private var segmentRange = 0..<0
    /// The sentence being spoken: where it starts in the spoken text and in the caller's
    /// text, its first sample, and whether that sample was repaired.
    private var pendingSentence: (spoken: Int, input: Int, start: Int, estimated: Bool)?
    /// Sentence starts (in the caller's text) that no word handed out has reached yet: a word
    /// that would run across one is cut there, so that every word lies inside one sentence.
    private var openSentenceStarts: [(spoken: Int, input: Int)] = []
    private var silence = SilenceTracker()
    /// The grapheme clusters of the caller's text (``Utterance/inputText``), in whose index
    /// space every range is handed out.
    private let inputClusters: GraphemeBoundaries
    /// The grapheme clusters of the spoken text (the same as ``inputClusters`` for plain text).
    private let spokenClusters: GraphemeBoundaries
    /// Where the last word, sentence and segment handed out end, in the caller's text: each
    /// mark starts at or after the end of the one before it.
    private var lastWordEnd = 0
    private var lastSentenceEnd = 0
    /// The words handed out while the pending sentence was being spoken, in the caller's text.
    private var sentenceWords: Range<Int>?
    private var lastSegmentEnd = 0
    /// The current segment's range in the caller's text.
    private var segmentInputRange = 0..<0
    /// Where the first run's audio starts.
    private var speechStartSample: Int?
    /// Whether words and sentences are marked. Off (for a batch that writes no timings or
    /// captions), no word or sentence events are made and the audio is not scanned for the
    /// silences that trim their ends: only segments are reported, each ending where the next
    /// one starts. Set it before the first event.
    package var marksWords = true
    /// Whether the engine's silence before the utterance's first sound is dropped (live
    /// speech: espeak-ng starts "Hello" with 12 ms of zeros, which would only delay what the
    /// listener hears). Only the engine's own zero samples at the very start go; a planned
    /// pause (``SpeechPlan/leadingSilence``) is kept, and so is everything after the first
    /// sound. Events are moved with the audio. Set it before the first event.
    package var skipsLeadingSilence = false
    /// Whether the engine's silence after the utterance's last sound is dropped (live speech:
    /// the utterance ends, and the next one starts, when its last sound has been heard). The
    /// engine's audio that ends in silence is held back until more sound, an event, a planned
    /// pause or the next run comes, so only the silence after everything else goes; a planned
    /// pause (``SpeechPlan/trailingSilence``) is kept. Set it before the first event.
    package var skipsTrailingSilence = false
    /// The largest magnitude that counts as silence for ``skipsLeadingSilence`` and
    /// ``skipsTrailingSilence``: 0, only exact zeros (espeak-ng's silence); a Piper voice's
    /// silence is a faint noise (32 is −60 dBFS).
    package var silenceThreshold: Int16 = 0
    /// The engine's silent samples held back at the end of what it has sent (``skipsTrailingSilence``).
    private var heldBack: [Int16] = []
    /// Engine samples dropped from the start of the current run, and from the utterance.
    private var runSkipped = 0
    private var skipped = 0

    /// Creates a builder for `plan` that passes each event to `emit` as soon as it is final.
    package init(plan: SpeechPlan, sampleRate: Int, emit: @escaping (SynthesisEvent) -> Void) {
        self.plan = plan
        self.sampleRate = sampleRate
        self.textScalars = Array(plan.text.unicodeScalars)
        self.segments = plan.segments
        self.emit = emit
        self.inputClusters = GraphemeBoundaries(plan.source?.markup ?? plan.text)
        self.spokenClusters = plan.source == nil ? inputClusters : GraphemeBoundaries(plan.text)
    }

    // MARK: Driving

    /// Appends `duration` of silence to the audio.
    package mutating func silence(_ duration: Duration) {
        releaseHeldBack()
        let count = duration.samples(atRate: sampleRate)
        guard count < Int.max else { return }  // SpeechPlan accepts pauses of up to an hour
        zeros(count)
    }

    /// Appends `count` zero samples, in blocks of at most 4,096.
    private mutating func zeros(_ count: Int) {
        var n = count
        while n > 0 {
            let chunk = min(n, 4096)
            audio(Array(repeating: 0, count: chunk))
            n -= chunk
        }
    }

    /// Starts run `index` of the plan and returns the text to hand to the engine for it.
    package mutating func beginRun(_ index: Int) -> EngineInput {
        let run = plan.runs[index]
        let input = Self.engineInput(run, scalars: textScalars[run.range])
        beginRun(index, input: input)
        return input
    }

    /// What ``beginRun(_:)`` hands the engine for run `index` of `plan`, and whether that run
    /// ends a sentence (``runEndsSentence(_:)``), made without a builder: an engine can be
    /// sent its first run before its sample rate, which a builder needs, is known.
    package static func engineInput(of plan: SpeechPlan, run index: Int) -> (input: EngineInput, endsSentence: Bool) {
        let run = plan.runs[index]
        let scalars = plan.text.unicodeScalars
        let lo = scalars.index(scalars.startIndex, offsetBy: run.range.lowerBound, limitedBy: scalars.endIndex) ?? scalars.endIndex
        let hi = scalars.index(lo, offsetBy: run.range.count, limitedBy: scalars.endIndex) ?? scalars.endIndex
        return (engineInput(run, scalars: scalars[lo..<hi]), !run.range.isEmpty && endsSentence(scalars[lo..<hi]))
    }

    /// The engine input of `run`, whose text is `scalars`.
    private static func engineInput(_ run: SpeechPlan.Run, scalars: some Sequence<Unicode.Scalar>) -> EngineInput {
        let text = String(String.UnicodeScalarView(scalars))
        return EngineInput(text: Substring(text).unicodeScalars, range: run.range, spellOut: run.spellOut)
    }

    /// Starts run `index` of the plan, spoken from `input`.
    package mutating func beginRun(_ index: Int, input: EngineInput) {
        releaseHeldBack()
        let run = plan.runs[index]
        runIndex = index
        runSkipped = 0
        self.input = input
        if speechStartSample == nil { speechStartSample = sampleCount }
        var seg = max(segmentIndex, 0)
        while seg + 1 < segments.count, !segments[seg].range.contains(run.range.lowerBound) { seg += 1 }
        if seg != segmentIndex {
            finishSegment()
            segmentIndex = seg
            segmentStart = sampleCount
            segmentRange = segments[seg].range
            let r = inputRange(segmentRange)
            let lo = max(r.lowerBound, lastSegmentEnd)
            segmentInputRange = lo..<max(lo, r.upperBound)
            lastSegmentEnd = segmentInputRange.upperBound
        }
        aligner = marksWords ? RunAligner(scalars: textScalars, range: run.range, startSample: sampleCount) : nil
    }

    /// Adds a block of the engine's audio for the current run; without
    /// ``skipsLeadingSilence``, the same as ``audio(_:)``.
    package mutating func engineAudio(_ samples: [Int16]) {
        let threshold = silenceThreshold
        func isSound(_ s: Int16) -> Bool { s.magnitude > threshold.magnitude }
        var block = samples[...]
        if skipsLeadingSilence, sampleCount == 0, heldBack.isEmpty {
            let sound = block.firstIndex(where: isSound) ?? block.endIndex
            runSkipped += sound - block.startIndex
            skipped += sound - block.startIndex
            block = block[sound...]
            if block.isEmpty { return }
        }
        guard skipsTrailingSilence else { return audio(Array(block)) }
        guard let last = block.lastIndex(where: isSound) else {
            heldBack += block
            return
        }
        releaseHeldBack()
        audio(Array(block[...last]))
        heldBack = Array(block[(last + 1)...])
    }

    /// Passes on the silence held back at the end of the engine's audio: something follows it.
    private mutating func releaseHeldBack() {
        guard !heldBack.isEmpty else { return }
        let samples = heldBack
        heldBack = []
        audio(samples)
    }

    /// Ends the engine's audio: the silence after its last sound is dropped but for 10 ms
    /// (``skipsTrailingSilence``: the end of the sound itself, fading, is never cut, and the
    /// utterance ends just after it is heard), and an utterance that made no sound at all gets
    /// back the silence ``skipsLeadingSilence`` held back, so it still lasts as long as the
    /// engine made it.
    package mutating func endEngineAudio() {
        if !heldBack.isEmpty {
            let kept = Array(heldBack.prefix(sampleRate / 100))
            heldBack = []
            audio(kept)
        }
        guard sampleCount == 0, skipped > 0 else { return }
        zeros(skipped)
        skipped = 0
    }

    /// Adds a block of audio.
    package mutating func audio(_ samples: [Int16]) {
        guard !samples.isEmpty else { return }
        if marksWords { silence.scan(samples, startingAt: sampleCount) }
        let buffer = PCMBuffer(samples: samples, startSample: sampleCount, sampleRate: sampleRate)
        sampleCount += samples.count
        emit(.audio(buffer))
    }

    /// Records an engine word event: 1-based engine `position`, `length` in scalars, at `sample`
    /// counted from the start of the current run's audio.
    ///
    /// The engine's events are untrusted: a position outside the run, before the last word or
    /// inside a word already timed is dropped, and a time outside the audio made so far (or
    /// before the previous word's) is moved to the nearest possible one, which marks the word
    /// as estimated.
    /// `estimated`: the engine itself says the time is a guess (a Piper voice whose model does
    /// not give its phonemes' lengths).
    package mutating func word(position: Int, length: Int, runSample: Int, estimated: Bool = false) {
        releaseHeldBack()
        guard let input, var aligner else { return }
        guard let start = input.textOffset(ofEnginePosition: position &- 1) else { return }
        let endEngine = (position &- 1).addingReportingOverflow(max(length, 1) - 1)
        let end = (endEngine.overflow ? nil : input.textOffset(ofEnginePosition: endEngine.partialValue)).map { $0 + 1 } ?? start + 1
        let (sample, repaired) = clampedSample(runSample, runStart: aligner.startSample)
        aligner.anchor(start..<max(start + 1, end), sample: sample, repaired: repaired || estimated, silences: silence.intervals)
        self.aligner = aligner
        flushWords()
    }

    /// Records the phonemes (IPA) the engine spoke the word at 1-based engine `position` with;
    /// they come after the word's event, and join its mark. Untrusted like the events: for a
    /// position outside the run, or a word whose mark is already out, they are dropped.
    package mutating func phonemes(position: Int, ipa: String) {
        guard let input, var aligner, let offset = input.textOffset(ofEnginePosition: position &- 1) else { return }
        aligner.addPhonemes(ipa, at: offset)
        self.aligner = aligner
    }

    /// Records an engine sentence event at 1-based engine `position`, `runSample` into the run.
    ///
    /// A sentence that does not start after the one before it (the engine sometimes reports a
    /// sentence again, or one behind the words it has already spoken) is dropped; a time
    /// outside the audio made so far, or before the previous sentence's, is clamped and the
    /// sentence marked as estimated.
    package mutating func sentence(position: Int, runSample: Int, estimated: Bool = false) {
        releaseHeldBack()
        guard let input, let aligner, let position = input.textOffset(ofEnginePosition: position &- 1) else { return }
        // A sentence starts with a whole word, or at least a whole grapheme cluster.
        let start = aligner.wordStart(containing: position)
        var (sample, repaired) = clampedSample(runSample, runStart: aligner.startSample)
        repaired = repaired || estimated
        guard let p = pendingSentence else {
            // The first sentence holds everything before it too: the engine may speak words
            // (or skip them) before it reports a sentence.
            pendingSentence = start > 0 ? (0, 0, speechStartSample ?? sample, repaired) : (start, inputStart(of: start), sample, repaired)
            return
        }
        guard start > p.spoken, !continuesSentence(at: start, runStart: aligner.range.lowerBound) else { return }
        // In the caller's text: not before the end of the words already handed out (a late
        // event could fall inside one of them), and after the start of the sentence it ends.
        let boundary = max(inputStart(of: start), lastWordEnd)
        guard boundary > p.input else { return }
        if sample < p.start {
            sample = p.start
            repaired = true
        }
        emitSentence(p.spoken..<start, input: p.input..<boundary, startSample: p.start, endSample: sample, estimated: p.estimated)
        pendingSentence = (start, boundary, sample, repaired)
        sentenceWords = nil
        openSentenceStarts.append((start, boundary))
    }

    /// Where spoken-text offset `offset` lies in the caller's text, at a grapheme boundary.
    private func inputStart(of offset: Int) -> Int {
        inputRange(offset..<offset).lowerBound
    }

    /// The utterance sample of an engine event `runSample` samples into the run that started at
    /// `runStart`, moved into the audio made so far (the engine reports each event with the
    /// audio block it belongs to); whether it had to be moved.
    private func clampedSample(_ engineSample: Int, runStart: Int) -> (sample: Int, repaired: Bool) {
        // In the silence skipped before the first sound: where the sound starts.
        if engineSample >= 0, engineSample < runSkipped { return (runStart, false) }
        let runSample = engineSample >= 0 ? engineSample - runSkipped : engineSample
        let (sum, overflow) = runStart.addingReportingOverflow(runSample)
        if overflow { return (runSample < 0 ? runStart : sampleCount, true) }
        if sum < runStart { return (runStart, true) }
        if sum > sampleCount { return (sampleCount, true) }
        return (sum, false)
    }

    /// Ends the current run once the engine has returned.
    package mutating func endRun() {
        guard var aligner else { return }
        aligner.finish(endSample: sampleCount, silences: silence.intervals)
        self.aligner = aligner
        flushWords()
        self.aligner = nil
    }

    /// Ends the utterance: emits the last sentence and segment.
    package mutating func finish() {
        endRun()
        if let p = pendingSentence {
            emitSentence(
                p.spoken..<textScalars.count, input: p.input..<inputClusters.scalarCount,
                startSample: p.start, endSample: max(p.start, speechEnd()), estimated: p.estimated)
            pendingSentence = nil
        }
        finishSegment()
    }

    // MARK: Emitting

    private mutating func flushWords() {
        guard var aligner else { return }
        for w in aligner.takeFinal() {
            // In the caller's text: whole clusters, inside the segment, after the last word,
            // not across the start of a sentence, and (being cut) without blanks at its ends.
            let r = inputRange(w.range)
            let lo = max(r.lowerBound, lastWordEnd, segmentInputRange.lowerBound)
            var hi = min(r.upperBound, segmentInputRange.upperBound)
            openSentenceStarts.removeAll { $0.input <= lo }
            if let next = openSentenceStarts.first, next.input < hi {
                // Cut where the sentence starts in the spoken text, mapped as sentences are
                // (markup between the two halves stays out of both).
                let before = w.range.lowerBound..<max(w.range.lowerBound, min(next.spoken, w.range.upperBound))
                hi = before.isEmpty ? next.input : min(inputRange(before).upperBound, next.input)
            }
            let range = inputClusters.trimmingBlank(lo..<max(lo, hi))
            guard !range.isEmpty else { continue }  // nothing of the word is left to mark
            lastWordEnd = range.upperBound
            sentenceWords = sentenceWords.map { $0.lowerBound..<range.upperBound } ?? range
            // Plain text: the word is the text its range covers; markup: the decoded text.
            let spoken = plan.source == nil ? range : w.range
            let text = String(String.UnicodeScalarView(textScalars[spoken]))
            emit(
                .word(
                    WordMark(
                        range: range, word: text, startSample: w.start, endSample: w.end,
                        segment: segmentIndex, isEstimated: w.estimated, phonemes: w.phonemes.isEmpty ? nil : w.phonemes)))
        }
        self.aligner = aligner
    }

    private func speechEnd() -> Int {
        if let last = silence.intervals.last, last.upperBound >= sampleCount, last.lowerBound > 0 {
            return last.lowerBound
        }
        return sampleCount
    }

    /// Emits the sentence spoken from `range` of the spoken text, which lies within `input`
    /// of the caller's text.
    private mutating func emitSentence(_ range: Range<Int>, input: Range<Int>, startSample: Int, endSample: Int, estimated: Bool) {
        // Its spoken text without blank clusters at either end (a space followed by a
        // combining mark is one cluster, and not blank), and the words handed out
        // while it was spoken (a late sentence event may have moved its end past its spoken
        // text), within its bounds.
        let trimmed = spokenClusters.trimmingBlank(spokenClusters.widening(range))
        var lo = input.upperBound, hi = input.lowerBound
        if !trimmed.isEmpty {
            let r = inputRange(trimmed)
            lo = r.lowerBound
            hi = r.upperBound
        }
        if let words = sentenceWords {
            lo = min(lo, words.lowerBound)
            hi = max(hi, words.upperBound)
        }
        let start = max(lo, lastSentenceEnd, input.lowerBound)
        let end = min(hi, input.upperBound)
        guard start < end else { return }
        lastSentenceEnd = end
        var endTime = endSample
        if let gap = silence.intervals.last(where: {
            $0.lowerBound > startSample && $0.lowerBound < endSample && $0.upperBound >= endSample - 1
        }) {
            endTime = gap.lowerBound
        }
        emit(
            .sentence(
                SentenceMark(range: start..<end, startSample: startSample, endSample: max(startSample, endTime), isEstimated: estimated)))
    }

    /// Whether an engine sentence event at `start` only marks the start of a run (a cut made by
    /// an SSML `<break>` or a change of voice, language or rate) inside a sentence that goes on:
    /// nothing but spaces lie between the run's start and `start`, and the text before them
    /// does not end a sentence. It does when it ends with sentence punctuation, and, in markup,
    /// at a `<p>` or `<s>` boundary or a strong `<break>` (line breaks there are layout); in
    /// plain text, at a blank line.
    private func continuesSentence(at start: Int, runStart: Int) -> Bool {
        guard runStart <= start, start <= textScalars.count,
            textScalars[runStart..<start].allSatisfy({ $0.properties.isWhitespace })
        else { return false }
        var i = start, lineBreaks = 0
        while i > 0, textScalars[i - 1].properties.isWhitespace {
            i -= 1
            switch textScalars[i] {
            case "\n", "\u{0B}", "\u{85}", "\u{2028}": lineBreaks += 1
            case "\r": if i + 1 >= textScalars.count || textScalars[i + 1] != "\n" { lineBreaks += 1 }
            case "\u{0C}", "\u{2029}": lineBreaks += 2  // a page or paragraph separator
            default: break
            }
        }
        guard i > 0 else { return false }
        if let source = plan.source {
            if source.breaksSentence(in: i...start) { return false }
        } else if lineBreaks >= 2 {
            return false
        }
        return !Self.endsSentence(textScalars[..<i])
    }

    /// Whether the last visible scalar of `scalars`, past closing quotes and brackets, ends a
    /// sentence (`.`, `!`, `?`, `。`, `؟`, `।`, `…`: Unicode's Sentence_Terminal, and the
    /// ellipsis); an empty or blank stretch counts as ended.
    package static func endsSentence(_ scalars: some BidirectionalCollection<Unicode.Scalar>) -> Bool {
        var sawText = false
        for s in scalars.reversed() where !s.properties.isWhitespace {
            sawText = true
            switch s.properties.generalCategory {
            case .closePunctuation, .finalPunctuation, .initialPunctuation: continue
            default: if s == "\"" || s == "'" { continue }
            }
            return s.properties.isSentenceTerminal || s == "…"
        }
        return !sawText
    }

    /// Whether run `index` of the plan ends at the end of a sentence.
    package func runEndsSentence(_ index: Int) -> Bool {
        let r = plan.runs[index].range
        return !r.isEmpty && Self.endsSentence(textScalars[r])
    }

    private mutating func finishSegment() {
        guard segmentIndex >= 0 else { return }
        let seg = segments[segmentIndex]
        emit(
            .segment(
                SegmentMark(
                    index: segmentIndex, range: segmentInputRange, language: seg.language,
                    voice: seg.voice.identifier, startSample: segmentStart, endSample: sampleCount)))
        segmentIndex = -1
    }

    /// Maps a range of spoken-text scalars to the caller's input text, widened to whole
    /// grapheme clusters there (a cut between runs, or markup next to a combining mark, can
    /// fall inside a cluster of the caller's text).
    private func inputRange(_ range: Range<Int>) -> Range<Int> {
        inputClusters.widening(plan.source?.markupRange(of: range) ?? range)
    }
}
