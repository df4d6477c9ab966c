import Testing

@testable import ParlaCore

/// Where live speech stops and starts its synthesis again, decided by the playback state
/// machine alone: the resume point after an interruption, the restart at a word after a rate
/// change or backpressure, where a pass parks, and the sentence marks of a pass that starts
/// inside the text. Driven exactly with the fixture of ``PlaybackStateMachineTests``:
/// "Hello there. General Kenobi!" at 1000 samples a second.
@Suite("Playback state machine: restarts")
struct PlaybackRestartTests {
    typealias Fixture = PlaybackStateMachineTests
    typealias SentenceStart = PlaybackStateMachine.SentenceStart
    typealias Restart = PlaybackStateMachine.Restart

    static var hello: WordMark { Fixture.words[0] }
    static var there: WordMark { Fixture.words[1] }
    static var general: WordMark { Fixture.words[2] }
    static var kenobi: WordMark { Fixture.words[3] }

    @Test func theResumePointIsTheSentenceOrTheWordBeingHeard() {
        var m = Fixture.machine()
        #expect(m.resumePoint(at: .sentence, source: nil) == nil, "nothing heard, nothing resumed from")
        _ = m.advance(played: 1500, stream: .playing, now: Fixture.t0)  // hearing "Kenobi"
        #expect(m.resumePoint(at: .sentence, source: nil) == .init(input: 13, text: 13, word: 13..<20))
        #expect(m.resumePoint(at: .word, source: nil) == .init(input: 21, text: 21, word: 21..<27))
        let earlier = Fixture.machine(resumedFrom: .init(input: 6, text: 6, word: 6..<11))
        #expect(earlier.resumePoint(at: .word, source: nil) == .init(input: 6, text: 6, word: 6..<11), "the previous resume point")
    }

    /// The engine reports a sentence a few words before its end: while "General Kenobi!" has
    /// no mark yet, its start is where the last known sentence ended.
    @Test func aSentenceWithoutItsMarkYetStartsWhereTheLastOneEnded() {
        var m = Fixture.machine(synthesized: false, sentences: [Fixture.sentences[0]])
        _ = m.advance(played: 1500, stream: .playing, now: Fixture.t0)
        #expect(m.resumePoint(at: .sentence, source: nil) == .init(input: 13, text: 13, word: 13..<20))
    }

    @Test func aRestartInsideAReportedSentenceDoesNotReportItAgain() {
        var m = Fixture.machine(synthesized: false)
        let r = m.restart(droppingFrom: Self.kenobi, passSentenceStart: nil)
        #expect(r == Restart(word: Self.kenobi, sentenceStart: nil, sentenceReported: true))
        #expect(m.words.map(\.word) == ["Hello", "there", "General"], "the marks from the cut on are dropped")
    }

    @Test func aRestartInsideAnUnreportedSentenceStartsItAtItsFirstWord() {
        var m = Fixture.machine(synthesized: false, sentences: [Fixture.sentences[0]])
        #expect(
            m.restart(droppingFrom: Self.kenobi, passSentenceStart: nil)
                == Restart(word: Self.kenobi, sentenceStart: SentenceStart(input: 13, sample: 1000), sentenceReported: false))
        // At the first word of a sentence, the cut starts it.
        var n = Fixture.machine(synthesized: false, sentences: [Fixture.sentences[0]])
        #expect(
            n.restart(droppingFrom: Self.general, passSentenceStart: nil)
                == Restart(word: Self.general, sentenceStart: nil, sentenceReported: false))
        // With no sentence mark at all, the first sentence holds everything before the cut.
        var o = Fixture.machine(synthesized: false, sentences: [])
        #expect(
            o.restart(droppingFrom: Self.there, passSentenceStart: nil)
                == Restart(word: Self.there, sentenceStart: SentenceStart(input: 0, sample: 100), sentenceReported: false))
        #expect(o.words.map(\.word) == ["Hello"])
    }

    @Test func aPassParksAtASentenceOrWhenFarAhead() {
        // A second ahead at most (1000 samples at 1000 a second).
        var m = Fixture.machine(synthesized: false, words: [Self.hello, Self.there], maxBufferedAhead: .milliseconds(500))
        #expect(m.aheadLimit == 1000, "at least a second, however small the server's buffer")
        let atSentence = m.parks(at: Self.general, passBase: 0, samplesAhead: 0)
        #expect(atSentence, "a full stop lies before it")
        var n = Fixture.machine(synthesized: false, words: [Self.hello], maxBufferedAhead: .milliseconds(500))
        func parks(at w: WordMark, base: Int = 0, ahead: Int) -> Bool { n.parks(at: w, passBase: base, samplesAhead: ahead) }
        #expect(!parks(at: Self.there, ahead: 2000), "inside a sentence, at twice the limit")
        #expect(parks(at: Self.there, ahead: 2001), "inside a sentence, beyond twice the limit")
        #expect(!parks(at: Self.there, base: 450, ahead: 10_000), "never at the pass's first word")
    }

    @Test func aPassThatStartsInsideTheTextHasItsFirstSentenceStartWhereItBegan() {
        let engineMark = SentenceMark(range: 21..<28, startSample: 1450, endSample: 1900)
        let next = SentenceMark(range: 29..<40, startSample: 2000, endSample: 2500)
        // From the start of the text: the marks pass as they are.
        var whole = PassSentences(base: 0, input: 0, sentenceStart: nil)
        #expect(whole.accept(Fixture.sentences[0]) == Fixture.sentences[0])
        // Cut at "Kenobi" inside an unreported sentence: it starts at "General".
        var cut = PassSentences(base: 1450, input: 21, sentenceStart: SentenceStart(input: 13, sample: 1000))
        #expect(cut.accept(engineMark) == SentenceMark(range: 13..<28, startSample: 1000, endSample: 1900))
        #expect(cut.accept(next) == next, "only the first sentence is fixed")
        // Cut at a word that starts its sentence: the sentence starts at the cut.
        var atStart = PassSentences(base: 1440, input: 21, sentenceStart: nil)
        #expect(atStart.accept(engineMark) == SentenceMark(range: 21..<28, startSample: 1450, endSample: 1900))
        // The sentence was reported whole before the cut: its mark is dropped, once.
        var reported = PassSentences(base: 1450, input: 21, sentenceStart: nil, skipsFirst: true)
        #expect(reported.accept(engineMark) == nil)
        #expect(reported.accept(next) == next)
    }
}

/// The decisions live speech takes from the machine: how far synthesis runs ahead and when it
/// goes on, where a change of rate or pitch cuts in and its margin, and whose failure ends a
/// playback. The stream's drop is a closure that records what it was asked.
@Suite struct PlaybackDecisionTests {
    typealias Fixture = PlaybackStateMachineTests
    typealias Restart = PlaybackStateMachine.Restart
    typealias Change = PlaybackStateMachine.ChangeRequest
    /// The fixture's words by name.
    typealias Words = PlaybackRestartTests

    /// A drop that lets the audio go from sample `from` on, and records what it was asked.
    final class Drop {
        var asked: [Int] = []
        let from: Int
        init(from: Int) { self.from = from }
        func callAsFunction(_ sample: Int, _ margin: Int) -> Bool {
            #expect(margin == 60, "the restart margin of a 1000 Hz stream")
            asked.append(sample)
            return sample >= from
        }
    }

    @Test func synthesisFarAheadParksAtTheNextSentenceAndGoesOnAtHalfTheLimit() {
        var m = Fixture.machine(
            synthesized: false, words: [Words.hello], sentences: [Fixture.sentences[0]], maxBufferedAhead: .milliseconds(500))
        m.audioWritten(samplesAhead: 1000)
        #expect(!m.parkRequested, "at the limit, it runs on")
        m.audioWritten(samplesAhead: 1001)
        #expect(m.parkRequested, "beyond it, the pass is to park")
        let drop = Drop(from: 0)
        var step = m.synthesized(Words.there, passBase: 0, passSentenceStart: nil, samplesAhead: 1001, drop: drop.callAsFunction)
        #expect(step == .goOn && drop.asked.isEmpty, "inside a sentence, not twice the limit ahead: it goes on")
        #expect(m.words.last == Words.there)
        step = m.synthesized(Words.general, passBase: 0, passSentenceStart: nil, samplesAhead: 1200, drop: drop.callAsFunction)
        #expect(step == .park)
        #expect(drop.asked == [1000])
        #expect(m.parked == Restart(word: Words.general, sentenceStart: nil, sentenceReported: false))
        #expect(m.words.last == Words.there, "the word it parked at is made again later")
        #expect(m.resumeParked(samplesAhead: 501) == nil, "more than half the limit still ahead")
        #expect(m.resumeParked(samplesAhead: 500) == Restart(word: Words.general, sentenceStart: nil, sentenceReported: false))
        #expect(m.parked == nil && m.resumeParked(samplesAhead: 0) == nil, "once")
        m.passStarted()
        #expect(!m.parkRequested, "the new pass runs until it is far ahead again")
    }

    @Test func aPassWhoseAudioTheServerHasHadDoesNotPark() {
        var m = Fixture.machine(synthesized: false, words: [Words.hello, Words.there], sentences: [], maxBufferedAhead: .milliseconds(500))
        m.audioWritten(samplesAhead: 5000)
        let drop = Drop(from: .max)
        let step = m.synthesized(Words.general, passBase: 0, passSentenceStart: nil, samplesAhead: 5000, drop: drop.callAsFunction)
        #expect(step == .goOn && drop.asked == [1000])
        #expect(m.parked == nil && m.words.last == Words.general, "kept, and recorded")
    }

    @Test func aChangeOfRateCutsAtTheFirstUnheardWordTheServerHasNotHad() {
        var m = Fixture.machine(synthesized: false, sentences: [Fixture.sentences[0]])
        _ = m.advance(played: 500, stream: .playing, now: Fixture.t0)  // "Hello" and "there" heard
        let drop = Drop(from: 1450)  // the server has had "General"
        let step = m.changeRequested(at: 7, heard: 500, passSentenceStart: nil, drop: drop.callAsFunction)
        #expect(drop.asked == [1000, 1450], "the words heard are not tried")
        #expect(
            step
                == .restart(
                    Restart(word: Words.kenobi, sentenceStart: .init(input: 13, sample: 1000), sentenceReported: false),
                    change: Change(requestedAt: 7, heardSample: 500)))
        #expect(m.pendingChange == nil)
        #expect(m.words.map(\.word) == ["Hello", "there", "General"])
    }

    @Test func aChangeWithNoWordToCutWaitsForTheNextWordMadeOrLapses() {
        var m = Fixture.machine(synthesized: false, words: [Words.hello], sentences: [])
        _ = m.advance(played: 200, stream: .playing, now: Fixture.t0)
        let none = Drop(from: .max)
        #expect(m.changeRequested(at: 5, heard: 200, passSentenceStart: nil, drop: none.callAsFunction) == .goOn)
        #expect(m.pendingChange == Change(requestedAt: 5, heardSample: 200), "it waits")
        #expect(m.synthesized(Words.there, passBase: 0, passSentenceStart: nil, samplesAhead: 0, drop: none.callAsFunction) == .goOn)
        #expect(m.pendingChange != nil && m.words.last == Words.there, "still too late for that word")
        let later = Drop(from: 1000)
        let step = m.synthesized(Words.general, passBase: 0, passSentenceStart: nil, samplesAhead: 0, drop: later.callAsFunction)
        guard case .restart(let r, let change) = step else {
            Issue.record("no restart: \(step)")
            return
        }
        #expect(r.word == Words.general && change == Change(requestedAt: 5, heardSample: 200) && m.pendingChange == nil)

        // Before the stream opens nothing was written: the first word made is cut.
        var unopened = Fixture.machine(synthesized: false, words: [], sentences: [])
        let all = Drop(from: 0)
        #expect(unopened.changeRequested(at: 9, heard: nil, passSentenceStart: nil, drop: all.callAsFunction) == .goOn)
        #expect(all.asked.isEmpty && unopened.pendingChange == Change(requestedAt: 9, heardSample: 0))

        // Synthesis has finished and the server has everything: nothing is left to change.
        var done = Fixture.machine()
        _ = done.advance(played: 500, stream: .playing, now: Fixture.t0)
        #expect(done.changeRequested(at: 11, heard: 500, passSentenceStart: nil, drop: none.callAsFunction) == .goOn)
        #expect(done.pendingChange == nil)
        unopened.synthesisFinished(totalSamples: 0)
        #expect(unopened.pendingChange == nil, "synthesis that ends leaves no change waiting")
    }

    @Test func aPauseAskedBeforeTheStreamOpenedCorksItAsItOpens() {
        var m = Fixture.machine()
        #expect(m.streamOpened(sampleRate: 1000) == [])
        _ = m.pause(at: .word, played: nil)
        #expect(m.streamOpened(sampleRate: 22050) == [.cork(true)])
        #expect(m.sampleRate == 22050 && m.restartMargin == 1323)
    }

    @Test func aWordWithin60MsOfTheListenerIsNotCut() {
        let m = PlaybackStateMachine(input: "x", marks: [], sampleRate: 22050, drainGrace: .milliseconds(100))
        #expect(m.restartMargin == 1323)
        let slow = PlaybackStateMachine(input: "x", marks: [], sampleRate: 1000, drainGrace: .milliseconds(100))
        #expect(slow.restartMargin == 60)
    }

    @Test func theStreamsFailureIsTheUtterancesWhenItStoppedSynthesis() {
        let lost = ParlaError.audioServerLost(reason: "Connection terminated")
        let engine = ParlaError.engineCrashed("espeak-ng", reason: "espeak-ng crashed")
        #expect(PlaybackStateMachine.failure(passEndedWith: .cancelled, streamFailure: lost) == lost)
        #expect(PlaybackStateMachine.failure(passEndedWith: .cancelled, streamFailure: nil) == nil, "a stop ends nothing here")
        #expect(PlaybackStateMachine.failure(passEndedWith: engine, streamFailure: nil) == engine)
        #expect(PlaybackStateMachine.failure(passEndedWith: engine, streamFailure: lost) == engine, "the pass failed by itself first")
    }
}
