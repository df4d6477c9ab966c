import ParlaTestSupport
import Testing

@testable import ParlaCore

/// Live playback's decisions, driven sample by sample with a manual clock: which event is due
/// at which played sample, where a pause or a stop at a word lands, when an utterance counts as
/// finished. Exact: no sound server, no sleeps, no tolerances.
@Suite("Playback state machine")
struct PlaybackStateMachineTests {
    typealias Action = PlaybackStateMachine.Action

    /// "Hello there. General Kenobi!" at 1000 samples a second (a sample is a millisecond),
    /// with a mark before "there" and one after the last word.
    static let text = "Hello there. General Kenobi!"

    static func word(_ range: Range<Int>, _ start: Int, _ end: Int) -> WordMark {
        let scalars = Array(text.unicodeScalars)
        var word = ""
        word.unicodeScalars.append(contentsOf: scalars[range])
        return WordMark(range: range, word: word, startSample: start, endSample: end, segment: 0, isEstimated: false)
    }

    static let words = [word(0..<5, 100, 400), word(6..<11, 450, 800), word(13..<20, 1000, 1400), word(21..<27, 1450, 1900)]
    static let sentences = [
        SentenceMark(range: 0..<12, startSample: 100, endSample: 800),
        SentenceMark(range: 13..<28, startSample: 1000, endSample: 1900),
    ]
    static let grace = Duration.milliseconds(130)
    static let t0 = SpeechInstant(nanoseconds: 1_000_000_000)

    static func machine(
        resumedFrom: PlaybackStateMachine.Resume? = nil, synthesized: Bool = true, words: [WordMark] = words,
        sentences: [SentenceMark] = sentences, maxBufferedAhead: Duration = .seconds(30)
    ) -> PlaybackStateMachine {
        var m = PlaybackStateMachine(
            input: text, marks: [("before-there", 6), ("after-all", 28)], sampleRate: 1000, resumedFrom: resumedFrom, drainGrace: grace,
            maxBufferedAhead: maxBufferedAhead)
        for w in words { m.record(w) }
        for sentence in sentences { m.record(sentence) }
        if synthesized { m.synthesisFinished(totalSamples: 2000) }
        return m
    }

    /// The events among `actions`, by name and text ("word:there", "mark:after-all").
    static func names(_ actions: [Action]) -> [String] {
        actions.map { action in
            switch action {
            case .emit(.willSpeakWord(let r)): return "word:\(r.text)"
            case .emit(.willSpeakSentence(let r)): return "sentence:\(r.text)"
            case .emit(.resumed(let r)): return "resumed:\(r.text)"
            case .emit(.mark(let name)): return "mark:\(name)"
            case .emit(let kind): return kind.name
            case .cork(let on): return on ? "cork" : "uncork"
            case .end(let kind): return "end:\(kind.name)"
            }
        }
    }

    @Test func eachEventIsDueAtTheSampleWhereItsAudioStarts() {
        var m = Self.machine()
        var step = m.advance(played: 0, stream: .playing, now: Self.t0)
        #expect(step.actions.isEmpty, "nothing is heard before the first sample plays")
        #expect(step.wakeAfter == .milliseconds(20), "the driver looks again within 20 ms while audio plays")
        step = m.advance(played: 1, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["started"])
        step = m.advance(played: 99, stream: .playing, now: Self.t0)
        #expect(step.actions.isEmpty)
        #expect(step.wakeAfter == .milliseconds(1), "the first word is due one sample later")
        step = m.advance(played: 100, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["sentence:Hello there.", "word:Hello"])
        step = m.advance(played: 449, stream: .playing, now: Self.t0)
        #expect(step.actions.isEmpty)
        step = m.advance(played: 450, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["mark:before-there", "word:there"], "a mark comes just before the word after it")
        // A late clock delivers everything it passed, in order, once.
        step = m.advance(played: 1460, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["sentence:General Kenobi!", "word:General", "word:Kenobi"])
        step = m.advance(played: 1460, stream: .playing, now: Self.t0)
        #expect(step.actions.isEmpty)
        #expect(step.wakeAfter == .milliseconds(20))
    }

    @Test func rangesAreInTheCallersIndexSpace() {
        let text = "Καλή 😀 μέρα"
        var m = PlaybackStateMachine(input: text, marks: [], sampleRate: 1000, drainGrace: Self.grace)
        m.record(WordMark(range: 7..<11, word: "μέρα", startSample: 10, endSample: 20, segment: 0, isEstimated: false))
        let step = m.advance(played: 10, stream: .playing, now: Self.t0)
        guard case .emit(.willSpeakWord(let r)) = step.actions.last else {
            Issue.record("no word in \(step.actions)")
            return
        }
        #expect(String(text[r.range]) == "μέρα")
        #expect(r.scalarRange == 7..<11)
        #expect(r.utf16Range == 8..<12, "the emoji before it is two UTF-16 units")
        #expect(r.audioSample == 10 && r.sampleRate == 1000)
    }

    @Test func aPauseAtAWordCorksWhereThatWordEnds() {
        var m = Self.machine()
        _ = m.advance(played: 200, stream: .playing, now: Self.t0)
        #expect(m.pause(at: .word, played: 200).isEmpty, "the word being heard is finished first")
        #expect(m.pauseAt == 400)
        var step = m.advance(played: 399, stream: .playing, now: Self.t0)
        #expect(step.actions.isEmpty)
        #expect(step.wakeAfter == .milliseconds(1))
        step = m.advance(played: 400, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["cork", "paused"])
        #expect(step.wakeAfter == .milliseconds(50), "a corked stream is looked at less often")
        #expect(m.pause(at: .immediate, played: 400).isEmpty, "pausing twice does nothing")
        #expect(Self.names(m.carryOn()) == ["uncork", "continued"])
        #expect(m.carryOn().isEmpty, "carrying on twice does nothing")
        // Between words, a pause at a word takes effect where the listener is.
        #expect(m.pause(at: .word, played: 420).isEmpty)
        #expect(m.pauseAt == 420)
        #expect(Self.names(m.pause(at: .immediate, played: 420)) == ["cork", "paused"])
        #expect(m.pauseAt == nil)
    }

    @Test func aPauseBeforeTheStreamIsOpenCorksAtOnce() {
        var m = Self.machine()
        #expect(Self.names(m.pause(at: .word, played: nil)) == ["cork", "paused"])
        #expect(m.isCorked)
    }

    @Test func aStopAtAWordEndsWhereThatWordEnds() {
        var m = Self.machine()
        _ = m.advance(played: 500, stream: .playing, now: Self.t0)
        #expect(m.stop(at: .word, played: 500).isEmpty)
        var step = m.advance(played: 799, stream: .playing, now: Self.t0)
        #expect(step.actions.isEmpty)
        #expect(step.wakeAfter == .milliseconds(1))
        step = m.advance(played: 800, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["end:interrupted"])
        #expect(step.wakeAfter == nil)
    }

    @Test func aStopWhilePausedOrImmediateEndsAtOnce() {
        var m = Self.machine()
        _ = m.advance(played: 500, stream: .playing, now: Self.t0)
        #expect(Self.names(m.stop(at: .immediate, played: 500)) == ["end:interrupted"])
        var paused = Self.machine()
        _ = paused.pause(at: .immediate, played: 500)
        #expect(Self.names(paused.stop(at: .word, played: 500)) == ["end:interrupted"], "a paused utterance has no word to finish")
    }

    @Test func itFinishesAtTheLastSampleWithTheMarksAfterTheLastWord() {
        var m = Self.machine()
        _ = m.advance(played: 1, stream: .playing, now: Self.t0)
        var step = m.advance(played: 1998, stream: .playing, now: Self.t0)
        #expect(!Self.names(step.actions).contains("end:finished"))
        #expect(step.wakeAfter == .milliseconds(2))
        step = m.advance(played: 1999, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["mark:after-all", "end:finished"], "within a millisecond of the end counts")
        #expect(step.wakeAfter == nil)
    }

    @Test func itWaitsForSynthesisBeforeFinishing() {
        var m = Self.machine(synthesized: false)
        var step = m.advance(played: 1999, stream: .playing, now: Self.t0)
        #expect(!Self.names(step.actions).contains("end:finished"))
        #expect(step.wakeAfter == .milliseconds(5), "with nothing due, it looks again soon for new audio")
        m.synthesisFinished(totalSamples: 2000)
        step = m.advance(played: 2000, stream: .drained, now: Self.t0)
        #expect(Self.names(step.actions) == ["mark:after-all", "end:finished"])
    }

    @Test func aServerClockThatStopsShortFinishesAfterTheGrace() {
        var m = Self.machine()
        _ = m.advance(played: 1500, stream: .playing, now: Self.t0)
        var step = m.advance(played: 1500, stream: .drained, now: Self.t0)
        #expect(step.actions.isEmpty)
        step = m.advance(played: 1500, stream: .drained, now: Self.t0 + Self.grace)
        #expect(step.actions.isEmpty, "not before the grace has passed")
        step = m.advance(played: 1500, stream: .drained, now: Self.t0 + Self.grace + .nanoseconds(1))
        #expect(Self.names(step.actions) == ["mark:after-all", "end:finished"])
    }

    @Test func aStreamThatDrainsWithNothingPlayedStillStarts() {
        var m = PlaybackStateMachine(input: "", marks: [], sampleRate: 1000, drainGrace: Self.grace)
        m.synthesisFinished(totalSamples: 0)
        let step = m.advance(played: 0, stream: .drained, now: Self.t0)
        #expect(Self.names(step.actions) == ["started", "end:finished"])
    }

    @Test func aFailedStreamEndsTheUtteranceWithItsError() {
        var m = Self.machine()
        _ = m.advance(played: 500, stream: .playing, now: Self.t0)
        let step = m.advance(played: 500, stream: .failed(.audioFailure("connection to the server was lost")), now: Self.t0)
        #expect(step.actions == [.end(.failed(.audioFailure("connection to the server was lost")))])
        #expect(step.wakeAfter == nil)
    }

    @Test func anUnopenedOrUnclockedStreamIsLookedAtSoon() {
        var m = Self.machine()
        #expect(m.advance(played: nil, stream: .opening, now: Self.t0) == .init(actions: [], wakeAfter: .milliseconds(5)))
        #expect(m.advance(played: nil, stream: .playing, now: Self.t0) == .init(actions: [], wakeAfter: .milliseconds(2)))
    }

    @Test func aResumedPlaybackSaysWhereItCarriesOn() {
        var m = Self.machine(resumedFrom: .init(input: 13, text: 13, word: 13..<20), words: Array(Self.words[2...]), sentences: [Self.sentences[1]])
        var step = m.advance(played: 1, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["resumed:General"], "no second started")
        step = m.advance(played: 1999, stream: .playing, now: Self.t0)
        #expect(
            Self.names(step.actions) == ["sentence:General Kenobi!", "word:General", "word:Kenobi", "mark:after-all", "end:finished"],
            "the mark before the resume point is not delivered again")
    }

    @Test func aChangeOfRateForgetsTheMarksFromWhereSynthesisRestarts() {
        var m = Self.machine()
        _ = m.advance(played: 100, stream: .playing, now: Self.t0)
        m.discardMarks(from: 450)
        #expect(m.words.map(\.word) == ["Hello"])
        #expect(m.sentences.count == 1)
        #expect(!m.synthesisDone, "the new pass has yet to finish")
        m.record(Self.word(6..<11, 450, 700))
        let step = m.advance(played: 450, stream: .playing, now: Self.t0)
        #expect(Self.names(step.actions) == ["mark:before-there", "word:there"])
    }

    @Test func aWordStartsASentenceWhenAFullStopComesBeforeIt() {
        let text = "Hi there. Ça va? Oui… 好。 Yes; no"
        var m = PlaybackStateMachine(input: text, marks: [], sampleRate: 1000, drainGrace: Self.grace)
        let scalars = Array(text.unicodeScalars)
        // Words as the engine gives them: no punctuation in their ranges.
        var ranges: [Range<Int>] = []
        var start: Int?
        for (i, c) in scalars.enumerated() {
            let isLetter = c.properties.isAlphabetic
            if isLetter, start == nil { start = i }
            if !isLetter, let b = start {
                ranges.append(b..<i)
                start = nil
            }
        }
        if let b = start { ranges.append(b..<scalars.count) }
        var starts: [Bool] = []
        for (i, r) in ranges.enumerated() {
            let w = WordMark(range: r, word: "", startSample: i * 100, endSample: i * 100 + 90, segment: 0, isEstimated: false)
            starts.append(m.startsSentence(w))
            m.record(w)
        }
        // Hi there | Ça va | Oui | 好 | Yes no: the first word has no word before it to tell.
        #expect(starts == [false, false, true, false, true, true, true, false])
    }

    /// A driver that sleeps exactly as long as the machine asks, against a server whose played
    /// position follows the clock: every word is delivered at the very sample where it starts
    /// (no drift), every one once and in order, and the end at the last sample.
    @Test func aDriverThatSleepsAsToldDeliversEveryWordWithNoDrift() {
        var rng = SeededGenerator(seed: 0x5EED)
        for _ in 0..<50 {
            let rate = [8000, 16000, 22050, 44100, 48000][Int(rng.next() % 5)]
            var words: [WordMark] = []
            var sample = Int(rng.next() % 2000)
            for i in 0..<Int(1 + rng.next() % 40) {
                let length = Int(1 + rng.next() % 9000)
                words.append(
                    WordMark(
                        range: i..<i + 1, word: "w\(i)", startSample: sample, endSample: sample + length, segment: 0, isEstimated: false))
                sample += length + Int(rng.next() % 3000)
            }
            let text = String(repeating: "x", count: words.count)
            var m = PlaybackStateMachine(input: text, marks: [], sampleRate: rate, drainGrace: Self.grace)
            for w in words { m.record(w) }
            m.synthesisFinished(totalSamples: sample)
            var now = Self.t0
            var heard: [(word: Int, at: Int)] = []
            var finishedAt: Int?
            for _ in 0..<1_000_000 {
                // The server's clock: samples played since t0, rounded down.
                let played = Int((now.nanoseconds - Self.t0.nanoseconds) * UInt64(rate) / 1_000_000_000)
                let step = m.advance(played: played, stream: .playing, now: now)
                for case .emit(.willSpeakWord(let r)) in step.actions { heard.append((r.scalarRange.lowerBound, played)) }
                if step.actions.contains(.end(.finished)) { finishedAt = played }
                guard let wait = step.wakeAfter else { break }
                now = now + wait
            }
            #expect(heard.map(\.word) == Array(words.indices), "every word once, in order")
            for (w, at) in heard where at != words[w].startSample {
                Issue.record("word \(w) due at sample \(words[w].startSample) was delivered at \(at) (rate \(rate))")
            }
            #expect(
                finishedAt.map { $0 >= sample - rate / 1000 && $0 <= sample } == true,
                "finished at sample \(String(describing: finishedAt)) of \(sample)")
        }
    }
}
