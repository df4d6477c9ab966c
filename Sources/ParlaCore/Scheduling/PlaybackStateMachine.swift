/// The decisions of one utterance's live playback, with no clock, thread or sound server of
/// its own: given how far the listener has heard (the stream's played sample), what the
/// stream reports and the time, it says which events are due and what to do with the stream.
///
/// Live speech keeps one per started utterance. Its driver (in `Parla`) feeds it the marks the
/// engine produces (``words``, ``sentences``), asks ``advance(played:stream:now:)`` whenever
/// the clock wakes, and carries out the ``Action``s it returns: delivering events, corking the
/// stream, ending the utterance. Because every input is a value, its tests drive it exactly,
/// sample by sample, with no sleeps.
package struct PlaybackStateMachine: Sendable {
    /// Where a suspended utterance carries on: offsets in its input (the caller's text or
    /// markup) and in its spoken text, and the word it resumes with (input offsets).
    package struct Resume: Sendable, Hashable {
        package var input: Int
        package var text: Int
        package var word: Range<Int>

        package init(input: Int, text: Int, word: Range<Int>) {
            self.input = input
            self.text = text
            self.word = word
        }
    }

    /// What the stream reports.
    package enum StreamState: Sendable, Equatable {
        /// Not open yet: nothing can have been heard.
        case opening
        /// Playing (or waiting for audio).
        case playing
        /// Every sample written has been played.
        case drained
        /// It failed and plays nothing more.
        case failed(ParlaError)
    }

    /// What the driver must do, in order.
    package enum Action: Sendable, Equatable {
        /// Deliver this event for the utterance.
        case emit(SpeechEvent.Kind)
        /// Cork (true) or uncork (false) the stream.
        case cork(Bool)
        /// End the utterance with this terminal event (silencing its stream first).
        case end(SpeechEvent.Kind)
    }

    /// The result of one ``advance(played:stream:now:)``.
    package struct Step: Sendable, Equatable {
        package var actions: [Action]
        /// When to look again, at the latest (nil: the utterance ended).
        package var wakeAfter: Duration?
    }

    /// The text the caller gave (the markup for SSML), which reported ranges index.
    package let input: String
    /// Named points of the text, in text order, with their offsets in ``input``.
    package let marks: [(name: String, inputOffset: Int)]
    /// Samples per second of the stream (``streamOpened(sampleRate:)`` sets the real one).
    package private(set) var sampleRate: Int

    /// How much audio must stay ahead of what the server holds when synthesis restarts at a
    /// new rate, so the server does not run dry while the engine starts again.
    package static let restartMarginSeconds = 0.06

    /// The same in samples of this stream: a word closer than this to what the listener hears
    /// is not cut for a new rate or pitch (the next one is).
    package var restartMargin: Int { Int(Double(sampleRate) * Self.restartMarginSeconds) }

    /// Whose failure ends a playback whose synthesis pass stopped with `error`: when the stream
    /// failed, synthesis stops and reports only a cancellation, and the stream's own error
    /// (`streamFailure`, the server's words) is the utterance's; a pass that failed by itself
    /// reports its error; a pass that was only cancelled (a stop, a restart, a park) ends
    /// nothing (nil).
    package static func failure(passEndedWith error: ParlaError, streamFailure: ParlaError?) -> ParlaError? {
        error.code == .cancelled ? streamFailure : error
    }
    /// Words and sentences synthesized so far, in stream samples, in order.
    package private(set) var words: [WordMark] = []
    package private(set) var sentences: [SentenceMark] = []
    /// How far synthesis may run ahead of what the listener has heard (see ``aheadLimit``).
    package let maxBufferedAhead: Duration
    /// A change of rate or pitch waiting for a word whose audio the server has not had yet.
    package private(set) var pendingChange: ChangeRequest?
    /// Synthesis ran further ahead than ``aheadLimit``: the pass is to stop at the next
    /// sentence (``synthesized(_:passBase:passSentenceStart:samplesAhead:drop:)``).
    package private(set) var parkRequested = false
    /// Where a pass that stopped for being far ahead starts again, once the listener catches up.
    package private(set) var parked: Restart?
    /// The first word, sentence and mark not delivered yet.
    package private(set) var nextWord = 0
    package private(set) var nextSentence = 0
    package private(set) var nextMark = 0
    /// Set when this playback carries on a suspended utterance.
    package let resumedFrom: Resume?
    /// Whether synthesis has produced the whole utterance, and how many samples that is.
    package private(set) var synthesisDone = false
    package private(set) var totalSamples = 0
    /// Whether its `started` (or `resumed`) was delivered.
    package private(set) var started = false
    package private(set) var isCorked = false
    /// Stream samples at which to cork (pause at a word) or end (stop at a word).
    package private(set) var pauseAt: Int?
    package private(set) var stopAt: Int?
    /// When the stream reported it had drained.
    package private(set) var drainedAt: SpeechInstant?
    /// How long after the stream drains it counts as finished even if its played position
    /// stops short of the last sample (the server's clock may): the stream's latency and some.
    package let drainGrace: Duration
    private var cursor = OffsetCursor()
    /// A second cursor for synthesis, which runs ahead of what is heard (one cursor for both
    /// would rescan the text from its start at every switch).
    private var ahead = OffsetCursor()

    /// The longest the driver sleeps while audio plays, so a late server clock is caught soon.
    package static let longestWait = Duration.milliseconds(20)

    package init(
        input: String, marks: [(name: String, inputOffset: Int)], sampleRate: Int = 22050, resumedFrom: Resume? = nil,
        drainGrace: Duration, maxBufferedAhead: Duration = .seconds(30)
    ) {
        self.input = input
        self.marks = marks
        self.sampleRate = sampleRate
        self.resumedFrom = resumedFrom
        self.drainGrace = drainGrace
        self.maxBufferedAhead = maxBufferedAhead
        if let resumedFrom {
            nextMark = marks.firstIndex { $0.inputOffset >= resumedFrom.input } ?? marks.count
        }
    }

    // MARK: Inputs from synthesis

    /// The stream opened at `rate` samples per second: a pause asked for before it opened
    /// corks it.
    package mutating func streamOpened(sampleRate rate: Int) -> [Action] {
        sampleRate = rate
        return isCorked ? [.cork(true)] : []
    }

    /// Records a word synthesized (``synthesized(_:passBase:passSentenceStart:samplesAhead:drop:)`` decides first
    /// whether synthesis stops at it).
    package mutating func record(_ word: WordMark) {
        words.append(word)
    }

    /// Records a sentence synthesized.
    package mutating func record(_ sentence: SentenceMark) {
        sentences.append(sentence)
    }

    /// Synthesis of the whole utterance ended at stream sample `total`: a change of rate or
    /// pitch still waiting for a word has none left to start at.
    package mutating func synthesisFinished(totalSamples total: Int) {
        synthesisDone = true
        totalSamples = total
        pendingChange = nil
    }

    /// Synthesis starts again at stream sample `sample` (a change of rate or pitch): the words
    /// and sentences from there on are forgotten, and the pass that follows supplies them again.
    package mutating func discardMarks(from sample: Int) {
        words.removeAll { $0.startSample >= sample }
        sentences.removeAll { $0.startSample >= sample }
        nextWord = min(nextWord, words.count)
        nextSentence = min(nextSentence, sentences.count)
        synthesisDone = false
    }

    // MARK: Requests

    /// Pauses: at once (`immediate`, or before the stream is open), or at the end of the word
    /// being heard at `played`.
    package mutating func pause(at boundary: SpeechBoundary, played: Int?) -> [Action] {
        if boundary == .immediate || played == nil { return cork() }
        pauseAt = wordBoundary(after: played ?? 0)
        return []
    }

    /// Carries on after a pause.
    package mutating func carryOn() -> [Action] {
        pauseAt = nil
        guard isCorked else { return [] }
        isCorked = false
        return [.cork(false), .emit(.continued)]
    }

    /// Stops: at once, or at the end of the word being heard at `played` (at once when paused,
    /// since no word is being heard).
    package mutating func stop(at boundary: SpeechBoundary, played: Int?) -> [Action] {
        if boundary == .immediate { return [.end(.cancelled(.interrupted))] }
        pauseAt = nil
        if isCorked { return [.end(.cancelled(.interrupted))] }
        stopAt = wordBoundary(after: played ?? 0)
        return []
    }

    // MARK: The clock

    /// Everything due when the listener has heard `played` samples (nil: the stream cannot say
    /// yet) and the stream reports `stream`, at `now`.
    package mutating func advance(played: Int?, stream: StreamState, now: SpeechInstant) -> Step {
        var actions: [Action] = []
        switch stream {
        case .opening:
            return Step(actions: [], wakeAfter: .milliseconds(5))
        case .failed(let error):
            return Step(actions: [.end(.failed(error))], wakeAfter: nil)
        case .playing, .drained:
            break
        }
        guard let played else { return Step(actions: [], wakeAfter: .milliseconds(2)) }
        let drained = stream == .drained
        if !started && (played > 0 || drained) {
            started = true
            if let r = resumedFrom {
                actions.append(.emit(.resumed(from: spoken(r.word, text: nil, sample: 0))))
            } else {
                actions.append(.emit(.started))
            }
        }
        // While corked, no word is announced: the played position can still move on a little
        // as the server's timing catches up with the cork, and the listener must not get a
        // word between `paused` and `continued`. The words it reaches are announced once
        // playback carries on, from the same place.
        if started && !isCorked {
            while nextSentence < sentences.count, sentences[nextSentence].startSample <= played {
                let m = sentences[nextSentence]
                nextSentence += 1
                actions.append(.emit(.willSpeakSentence(spoken(m.range, text: nil, sample: m.startSample))))
            }
            while nextWord < words.count, words[nextWord].startSample <= played {
                let w = words[nextWord]
                nextWord += 1
                // Marks before this word (or inside it) are reached as it starts.
                emitMarks(before: w.range.upperBound, into: &actions)
                var heard = spoken(w.range, text: w.word, sample: w.startSample)
                heard.phonemes = w.phonemes
                actions.append(.emit(.willSpeakWord(heard)))
            }
        }
        if let at = stopAt, played >= at {
            actions.append(.end(.cancelled(.interrupted)))
            return Step(actions: actions, wakeAfter: nil)
        }
        if let at = pauseAt, played >= at {
            actions += cork()
        }
        if drained, drainedAt == nil { drainedAt = now }
        if synthesisDone {
            // Finished once the played position reaches the last sample (within a millisecond), or
            // should the server's clock stop short of it, a grace period after the stream drained.
            if played >= totalSamples - sampleRate / 1000 || (drainedAt.map { now - $0 > drainGrace } ?? false) {
                // Marks after the last word are reached when the audio ends.
                emitMarks(before: .max, into: &actions)
                actions.append(.end(.finished))
                return Step(actions: actions, wakeAfter: nil)
            }
        }
        if isCorked { return Step(actions: actions, wakeAfter: .milliseconds(50)) }
        var due = synthesisDone ? totalSamples : Int.max
        if nextWord < words.count { due = min(due, words[nextWord].startSample) }
        if nextSentence < sentences.count { due = min(due, sentences[nextSentence].startSample) }
        if let at = stopAt { due = min(due, at) }
        if let at = pauseAt { due = min(due, at) }
        guard due != Int.max else { return Step(actions: actions, wakeAfter: .milliseconds(5)) }
        let wait = Duration.samples(max(due - played, 0), atRate: max(sampleRate, 1))
        return Step(actions: actions, wakeAfter: min(wait, Self.longestWait))
    }

    // MARK: Queries

    /// The word the listener hears at `played` (the last that started by then), if any.
    package func word(heardAt played: Int) -> WordMark? {
        words.last { $0.startSample <= played }
    }

    /// Where the word being heard at `played` ends (or `played` itself between words).
    package func wordBoundary(after played: Int) -> Int {
        if let w = word(heardAt: played) { return max(w.endSample, played) }
        return words.first.map { max($0.endSample, played) } ?? played
    }

    /// `range` (scalar offsets in ``input``) located every way a caller may need.
    package mutating func spoken(_ range: Range<Int>, text: String?, sample: Int) -> SpokenRange {
        let lo = cursor.locate(range.lowerBound, in: input)
        let hi = cursor.locate(range.upperBound, in: input)
        return SpokenRange(
            range: lo.index..<hi.index, utf16Range: lo.utf16..<hi.utf16, scalarRange: range,
            text: text ?? String(input[lo.index..<hi.index]), audioSample: sample, sampleRate: sampleRate)
    }

    /// Whether word `w` starts a sentence: sentence-ending punctuation lies between the last
    /// word synthesized so far and it. (The engine's own sentence marks come too late to tell:
    /// it reports a sentence a few words before its end.)
    package mutating func startsSentence(_ w: WordMark) -> Bool {
        guard let previous = words.last, previous.range.upperBound < w.range.lowerBound else { return false }
        let lo = ahead.locate(previous.range.upperBound, in: input).index
        let hi = ahead.locate(w.range.lowerBound, in: input).index
        return input.unicodeScalars[lo..<hi].contains { Self.sentenceEnders.contains($0) }
    }

    /// Full stops, question and exclamation marks of the scripts Parla speaks.
    private static let sentenceEnders: Set<Unicode.Scalar> = [
        ".", "!", "?", "\u{2026}", "\u{037E}", "\u{0589}", "\u{061F}", "\u{06D4}", "\u{0964}", "\u{0965}", "\u{3002}", "\u{FF01}",
        "\u{FF1F}", "\u{FF0E}",
    ]

    // MARK: Private

    private mutating func cork() -> [Action] {
        pauseAt = nil
        guard !isCorked else { return [] }
        isCorked = true
        return [.cork(true), .emit(.paused)]
    }

    /// Delivers the marks that lie before input offset `limit` and have not been delivered.
    private mutating func emitMarks(before limit: Int, into actions: inout [Action]) {
        while nextMark < marks.count, marks[nextMark].inputOffset < limit {
            actions.append(.emit(.mark(marks[nextMark].name)))
            nextMark += 1
        }
    }
}

/// The decisions about synthesis that runs ahead of the listener: how far it may run before
/// it parks and when it goes on, and at which word a change of rate or pitch cuts in. The
/// driver tells the machine what synthesis made and how far ahead the stream is, and offers
/// it the stream's drop (`drop(from, margin)`: whether the audio from stream sample `from` on
/// was dropped, which the server allows only while none of it, nor `margin` samples before
/// it, has been handed over); it carries out the ``SynthesisStep`` it gets back.
extension PlaybackStateMachine {
    /// A change of rate or pitch waiting for a word to start at: when it was asked for
    /// (nanoseconds of the live clock), and the sample the listener heard then.
    package struct ChangeRequest: Sendable, Hashable {
        package var requestedAt: UInt64
        package var heardSample: Int

        package init(requestedAt: UInt64, heardSample: Int) {
            self.requestedAt = requestedAt
            self.heardSample = heardSample
        }
    }

    /// What the driver does after a word was synthesized, or a change of rate or pitch asked.
    package enum SynthesisStep: Sendable, Equatable {
        /// Nothing: the pass goes on.
        case goOn
        /// The audio from the restart's word on was dropped: the pass stops, and a new one
        /// starts there now (with the new rate or pitch); `change` is the change taking effect.
        case restart(Restart, change: ChangeRequest?)
        /// The audio from the word on was dropped: the pass stops, and starts again there
        /// when ``resumeParked(samplesAhead:)`` says.
        case park
    }

    /// How many samples synthesis may run ahead of the listener: ``maxBufferedAhead``, and at
    /// least a second.
    package var aheadLimit: Int { max(sampleRate, maxBufferedAhead.samples(atRate: sampleRate)) }

    /// The pass wrote audio, and the stream now holds `samplesAhead` samples the listener has
    /// not heard: beyond ``aheadLimit``, the pass is to park at its next sentence.
    package mutating func audioWritten(samplesAhead: Int) {
        if samplesAhead > aheadLimit { parkRequested = true }
    }

    /// A new pass starts: nothing is parked.
    package mutating func passStarted() {
        parked = nil
        parkRequested = false
    }

    /// Synthesis made word `w` (stream samples) in a pass whose audio starts at `passBase` and
    /// whose first sentence began at `passSentenceStart`: a waiting change of rate or pitch
    /// cuts in at it, a pass asked to park stops at it, if `drop` lets their audio go;
    /// otherwise it is recorded, and the pass goes on. (`samplesAhead` asks the stream, under
    /// its lock: only when the pass is to park.)
    package mutating func synthesized(
        _ w: WordMark, passBase: Int, passSentenceStart: SentenceStart?, samplesAhead: @autoclosure () -> Int,
        drop: (_ from: Int, _ margin: Int) -> Bool
    ) -> SynthesisStep {
        if let change = pendingChange, drop(w.startSample, restartMargin) {
            pendingChange = nil
            return .restart(restart(droppingFrom: w, passSentenceStart: passSentenceStart), change: change)
        }
        if parkRequested, parks(at: w, passBase: passBase, samplesAhead: samplesAhead()), drop(w.startSample, restartMargin) {
            parked = restart(droppingFrom: w, passSentenceStart: passSentenceStart)
            return .park
        }
        record(w)
        return .goOn
    }

    /// A change of rate or pitch is asked for at `time` (nanoseconds), the listener having
    /// heard `heard` samples (nil: the stream is not open yet). It cuts in at the first word
    /// not yet heard whose audio `drop` lets go; with none, it waits for the next word
    /// synthesized (``synthesized(_:passBase:passSentenceStart:samplesAhead:drop:)``), or is
    /// dropped if synthesis has finished: the rest is at the server already.
    package mutating func changeRequested(
        at time: UInt64, heard: Int?, passSentenceStart: SentenceStart?, drop: (_ from: Int, _ margin: Int) -> Bool
    ) -> SynthesisStep {
        let change = ChangeRequest(requestedAt: time, heardSample: heard ?? 0)
        pendingChange = change
        // (Before the stream opens no word is known and nothing can be dropped: the first word
        // synthesized is cut.)
        for w in words[nextWord...] where drop(w.startSample, restartMargin) {
            pendingChange = nil
            return .restart(restart(droppingFrom: w, passSentenceStart: passSentenceStart), change: change)
        }
        if synthesisDone { pendingChange = nil }
        return .goOn
    }

    /// A parked pass starts again once the listener has heard half of what was ahead
    /// (`samplesAhead` is what is left): where it starts, and the machine forgets it.
    package mutating func resumeParked(samplesAhead: Int) -> Restart? {
        guard let restart = parked, samplesAhead <= aheadLimit / 2 else { return nil }
        parked = nil
        return restart
    }
}

/// Converts increasing scalar offsets into indices and UTF-16 offsets without rescanning the text.
private struct OffsetCursor {
    var scalar = 0
    var index: String.Index?
    var utf16 = 0

    mutating func locate(_ offset: Int, in text: String) -> (index: String.Index, utf16: Int) {
        let scalars = text.unicodeScalars
        if index == nil || offset < scalar {
            scalar = 0
            index = scalars.startIndex
            utf16 = 0
        }
        var i = index ?? scalars.startIndex
        while scalar < offset, i < scalars.endIndex {
            utf16 += scalars[i].utf16.count
            i = scalars.index(after: i)
            scalar += 1
        }
        index = i
        return (i, utf16)
    }
}
