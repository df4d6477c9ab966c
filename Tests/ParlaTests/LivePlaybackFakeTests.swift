import ParlaEngine
import ParlaTesting
import Synchronization
import Testing

@testable import Parla
@testable import ParlaCore

/// Live speech driven by fakes: an engine that speaks each word as 100 samples of tone and 20
/// of silence at 1000 samples a second, a sink whose played position the test sets, and a
/// manual clock. Every expectation is exact; nothing sleeps. The real-daemon tests
/// (`LiveSpeechTests`) prove the same paths end to end.
@Suite("Live playback with a fake engine and sink", .timeLimit(.minutes(1)))
struct LivePlaybackFakeTests {
    /// One harness: live speech over a fake sink, with every event recorded as delivered.
    final class Harness: Sendable {
        let sink: FakeAudioSink
        let engine = FakeSpeechEngine()
        let clock = ManualClock()
        let log = DeliveredEvents()
        let live: LiveSpeech

        init(maxBufferedAhead: Duration = .seconds(10)) throws {
            sink = FakeAudioSink(maxBufferedAhead: maxBufferedAhead)
            let catalog = try VoiceCatalog.default()
            let clock = self.clock
            live = LiveSpeech(output: sink, engine: engine, clock: .manual(now: { clock.now })) {
                u throws(ParlaError) in try SpeechPlan(u, catalog: catalog)
            }
            let log = self.log
            live.observe { e in log.events.withLock { $0.append(e) } }
        }

        /// Sets what the listener of stream `stream` has heard, and lets live speech look.
        func hear(_ samples: Int, on stream: FakeAudioStream) {
            stream.played = samples
            clock.advance(by: .milliseconds(1))
            live.tick()
        }

        /// Events of `id` since the last call, by name and text ("word:two"), and forgets them.
        func take(_ id: UtteranceID) -> [String] {
            log.events.withLock { events in
                let mine = events.filter { $0.utterance == id }
                events.removeAll { $0.utterance == id }
                return mine.map(Self.describe)
            }
        }

        /// The terminal event of `id`, if delivered.
        func terminal(_ id: UtteranceID) -> SpeechEvent? {
            log.events.withLock { $0.first { $0.utterance == id && $0.kind.isTerminal } }
        }

        static func describe(_ e: SpeechEvent) -> String {
            switch e.kind {
            case .willSpeakWord(let r): return "word:\(r.text)@\(r.audioSample)"
            case .willSpeakSentence(let r): return "sentence:\(r.text)"
            case .failed(let error): return "failed:\(error)"
            default:
                if let a = e.announcement { return "\(e.kind.name):\(a.string):\(a.wasSuccessful)" }
                return e.kind.name
            }
        }
    }

    @Test func speechPlaysEveryWordWhenItIsHeardAndFinishesAtTheLastSample() async throws {
        let h = try Harness()
        let id = h.live.submit(Utterance(string: "one two three"), kind: .speech, announcement: nil)
        let stream = await h.sink.finishedStream(0)
        #expect(stream.samples.count == 360, "the engine's audio reached the sink whole")
        #expect(stream.samples.filter { $0 != 0 }.count == 300)
        h.hear(0, on: stream)
        #expect(h.take(id).isEmpty, "nothing before the first sample is heard")
        h.hear(1, on: stream)
        #expect(h.take(id) == ["started", "sentence:one two three", "word:one@0"])
        h.hear(119, on: stream)
        #expect(h.take(id).isEmpty)
        h.hear(120, on: stream)
        #expect(h.take(id) == ["word:two@120"])
        h.hear(240, on: stream)
        #expect(h.take(id) == ["word:three@240"])
        h.hear(358, on: stream)
        #expect(h.take(id).isEmpty)
        h.hear(359, on: stream)
        #expect(h.take(id) == ["finished"])
        #expect(stream.isClosed, "an ended utterance releases its stream")
        #expect(!h.live.isSpeaking)
    }

    @Test func stopAtAWordEndsWhenThatWordEnds() async throws {
        let h = try Harness()
        let id = h.live.submit(Utterance(string: "one two three"), kind: .speech, announcement: nil)
        let waiting = h.live.submit(Utterance(string: "later"), kind: .speech, announcement: nil)
        let stream = await h.sink.finishedStream(0)
        h.hear(150, on: stream)
        #expect(h.take(id) == ["started", "sentence:one two three", "word:one@0", "word:two@120"])
        #expect(h.live.stop(at: .word))
        #expect(h.take(waiting) == ["dropped"], "what waits is dropped at once")
        h.hear(219, on: stream)
        #expect(h.take(id).isEmpty, "the word being heard is finished")
        #expect(!stream.isClosed)
        h.hear(220, on: stream)
        #expect(h.take(id) == ["interrupted"])
        #expect(stream.isClosed)
        #expect(h.sink.streamCount == 1, "nothing else starts")
    }

    @Test func pauseAtAWordCorksWhenThatWordEndsAndContinueUncorks() async throws {
        let h = try Harness()
        let id = h.live.submit(Utterance(string: "one two three"), kind: .speech, announcement: nil)
        let stream = await h.sink.finishedStream(0)
        h.hear(150, on: stream)
        _ = h.take(id)
        #expect(h.live.pause(at: .word))
        h.hear(219, on: stream)
        #expect(!stream.isCorked)
        h.hear(220, on: stream)
        #expect(stream.isCorked)
        #expect(h.take(id) == ["paused"])
        #expect(h.live.isPaused)
        #expect(h.live.resume())
        #expect(!stream.isCorked)
        #expect(h.take(id) == ["continued"])
        h.hear(359, on: stream)
        #expect(h.take(id) == ["word:three@240", "finished"])
    }

    /// A rate change while a word is heard: the audio from the first word the listener is at
    /// least the restart margin (60 ms) before is dropped and made again at the new rate; the
    /// change is stamped with the injected clock, not the system's.
    @Test func aRateChangeCutsAtTheFirstWordBeyondTheMarginOnTheInjectedClock() async throws {
        let h = try Harness()
        let id = h.live.submit(Utterance(string: "one two three four"), kind: .speech, announcement: nil)
        let stream = await h.sink.finishedStream(0)
        h.hear(185, on: stream)
        _ = h.take(id)
        let asked = h.clock.now
        h.live.setProsody { $0.rate = 2 }
        // 185 + 60 > 240: "three" is too close; "four", at 360, is the first word cut.
        let change = try #require(h.live.recentChanges.last)
        #expect(change.requestedAt == asked.nanoseconds && change.heardSample == 185)
        #expect(change.sample == 360 && change.word == 14..<18)
        await h.engine.waitForEndedPasses(2)
        #expect(h.engine.passes == 2, "synthesis made the rest again")
        _ = await h.sink.finishedStream(0)
        #expect(stream.samples.count == 480, "four words of 120 samples, the last one made again")
        h.hear(479, on: stream)
        #expect(h.take(id) == ["word:three@240", "word:four@360", "finished"])
    }

    @Test func anAnnouncementCutsSpeechOffAndReportsItsSuccess() async throws {
        let h = try Harness()
        let speech = h.live.submit(Utterance(string: "one two three"), kind: .speech, announcement: nil)
        let first = await h.sink.finishedStream(0)
        h.hear(150, on: first)
        _ = h.take(speech)
        let alert = h.live.submit(
            Utterance(string: "battery low"), kind: .announcement(priority: .default, queued: false), announcement: "battery low")
        #expect(h.take(speech) == ["interrupted"], "cut off at once")
        #expect(first.isClosed)
        let second = await h.sink.finishedStream(1)
        h.hear(1, on: second)
        #expect(h.take(alert) == ["started", "sentence:battery low", "word:battery@0"])
        h.hear(239, on: second)
        #expect(h.take(alert) == ["word:low@120", "finished:battery low:true"])
    }

    @Test func aQueuedAnnouncementWaitsForSpeechToFinish() async throws {
        let h = try Harness()
        let speech = h.live.submit(Utterance(string: "one"), kind: .speech, announcement: nil)
        let first = await h.sink.finishedStream(0)
        let alert = h.live.submit(Utterance(string: "done"), kind: .announcement(priority: .default, queued: true), announcement: "done")
        h.hear(119, on: first)
        #expect(h.take(speech) == ["started", "sentence:one", "word:one@0", "finished"])
        let second = await h.sink.finishedStream(1)
        h.hear(119, on: second)
        #expect(h.take(alert) == ["started", "sentence:done", "word:done@0", "finished:done:true"])
    }

    @Test func aStreamThatFailsFailsItsUtteranceWithTheServersWordsAndTheNextOneStarts() async throws {
        let h = try Harness()
        let id = h.live.submit(Utterance(string: "one two three"), kind: .speech, announcement: nil)
        let next = h.live.submit(Utterance(string: "next"), kind: .speech, announcement: nil)
        let stream = await h.sink.finishedStream(0)
        h.hear(150, on: stream)
        _ = h.take(id)
        stream.status = .failed(.audioFailure("Connection terminated"))
        h.hear(150, on: stream)
        #expect(h.take(id) == ["failed:\(ParlaError.audioFailure("Connection terminated"))"])
        let second = await h.sink.finishedStream(1)
        h.hear(119, on: second)
        #expect(h.take(next) == ["started", "sentence:next", "word:next@0", "finished"])
    }

    @Test func aStreamThatCannotOpenFailsItsUtterance() async throws {
        let h = try Harness()
        h.sink.failNextOpen(.audioFailure("No such entity"))
        let event = await h.live.submitAndWait(Utterance(string: "one"), kind: .speech, announcement: nil)
        #expect(Harness.describe(event) == "failed:\(ParlaError.audioFailure("No such entity"))")
        #expect(h.sink.streamCount == 0)
    }

    /// Synthesis that runs a second (the least) ahead of the listener stops at the start of the
    /// next sentence and frees the engine; it carries on from that word once the listener has
    /// heard half of what was ahead, and the listener hears every word once, in order, with
    /// the audio an uninterrupted synthesis makes.
    @Test func synthesisFarAheadStopsAtASentenceAndCarriesOnWhenTheListenerCatchesUp() async throws {
        let h = try Harness(maxBufferedAhead: .zero)
        let sentences = ["a", "b", "c", "d"].map { l in (1...5).map { "\(l)\($0)" }.joined(separator: " ") + "." }
        let id = h.live.submit(Utterance(string: sentences.joined(separator: " ")), kind: .speech, announcement: nil)
        await h.engine.waitForEndedPasses(1)
        let stream = try #require(h.sink.stream(0))
        #expect(stream.samples.count == 1200, "parked at c1, the first word past 1000 samples ahead that starts a sentence")
        #expect(h.engine.running == 0, "the engine is free")
        var heard: [String] = []
        h.hear(1, on: stream)
        h.hear(699, on: stream)
        #expect(h.engine.passes == 1, "501 samples ahead: still parked")
        h.hear(700, on: stream)
        await h.engine.waitForEndedPasses(2)
        #expect(h.engine.passes == 2)
        #expect(stream.samples.count == 1800, "parked again at d1")
        heard += h.take(id)
        h.hear(1300, on: stream)
        _ = await h.sink.finishedStream(0)
        #expect(h.engine.passes == 3)
        h.hear(2399, on: stream)
        heard += h.take(id)
        let words = heard.filter { $0.hasPrefix("word:") }
        let expected = ["a", "b", "c", "d"].flatMap { l in (1...5).map { "\(l)\($0)" } }.enumerated().map { "word:\($1)@\($0 * 120)" }
        #expect(words == expected)
        #expect(heard.filter { $0.hasPrefix("sentence:") } == sentences.map { "sentence:\($0)" })
        #expect(heard.first == "started" && heard.last == "finished")
        #expect(
            stream.samples
                == Array(repeating: (Array(repeating: Int16(1000), count: 100) + Array(repeating: 0, count: 20)), count: 20).flatMap { $0 })
    }

    @Test func aCancelledWaitWithdrawsItsUtterance() async throws {
        let h = try Harness()
        let playing = h.live.submit(Utterance(string: "one two three"), kind: .speech, announcement: nil)
        let stream = await h.sink.finishedStream(0)
        // Cancelled before or after it is submitted: either way it is withdrawn, never started.
        let waiter = Task { await h.live.submitAndWait(Utterance(string: "never"), kind: .speech, announcement: nil) }
        waiter.cancel()
        let event = await waiter.value
        #expect(Harness.describe(event) == "dropped")
        h.hear(359, on: stream)
        #expect(h.terminal(playing).map(Harness.describe) == "finished", "what was speaking is untouched")
        #expect(h.sink.streamCount == 1, "the withdrawn utterance never opened a stream")
    }

}

/// Every event delivered, in order.
final class DeliveredEvents: Sendable {
    let events = Mutex<[SpeechEvent]>([])
}
