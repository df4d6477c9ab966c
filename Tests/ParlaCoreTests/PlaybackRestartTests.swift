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
        var m = Fixture.machine(synthesized: false)
        m.sentences = [Fixture.sentences[0]]
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
        var m = Fixture.machine(synthesized: false)
        m.sentences = [Fixture.sentences[0]]
        #expect(
            m.restart(droppingFrom: Self.kenobi, passSentenceStart: nil)
                == Restart(word: Self.kenobi, sentenceStart: SentenceStart(input: 13, sample: 1000), sentenceReported: false))
        // At the first word of a sentence, the cut starts it.
        var n = Fixture.machine(synthesized: false)
        n.sentences = [Fixture.sentences[0]]
        #expect(
            n.restart(droppingFrom: Self.general, passSentenceStart: nil)
                == Restart(word: Self.general, sentenceStart: nil, sentenceReported: false))
        // With no sentence mark at all, the first sentence holds everything before the cut.
        var o = Fixture.machine(synthesized: false)
        o.sentences = []
        #expect(
            o.restart(droppingFrom: Self.there, passSentenceStart: nil)
                == Restart(word: Self.there, sentenceStart: SentenceStart(input: 0, sample: 100), sentenceReported: false))
        #expect(o.words.map(\.word) == ["Hello"])
    }

    @Test func aPassParksAtASentenceOrWhenFarAhead() {
        var m = Fixture.machine(synthesized: false)
        func parks(_ w: WordMark, base: Int = 0, ahead: Int) -> Bool {
            m.parks(at: w, passBase: base, samplesAhead: ahead, aheadLimit: 100)
        }
        m.words = [Self.hello, Self.there]
        #expect(parks(Self.general, ahead: 0), "a full stop lies before it")
        m.words = [Self.hello]
        #expect(!parks(Self.there, ahead: 200), "inside a sentence, at twice the limit")
        #expect(parks(Self.there, ahead: 201), "inside a sentence, beyond twice the limit")
        #expect(!parks(Self.there, base: 450, ahead: 10_000), "never at the pass's first word")
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

/// The decisions live speech takes from the machine: the restart margin and whose failure ends
/// a playback.
@Suite struct PlaybackDecisionTests {
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
