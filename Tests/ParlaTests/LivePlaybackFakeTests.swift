import ParlaESpeak
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
        let sink: FakeSink
        let engine = FakeEngine()
        let clock = ManualClock()
        let log = DeliveredEvents()
        let live: LiveSpeech

        init(maxBufferedAhead: Duration = .seconds(10)) throws {
            sink = FakeSink(maxBufferedAhead: maxBufferedAhead)
            let catalog = try VoiceCatalog.default()
            let clock = self.clock
            live = LiveSpeech(output: sink, engine: engine, clock: .manual(now: { clock.now })) {
                u throws(ParlaError) in try SpeechPlan(u, catalog: catalog)
            }
            let log = self.log
            live.observe { e in log.events.withLock { $0.append(e) } }
        }

        /// Sets what the listener of stream `stream` has heard, and lets live speech look.
        func hear(_ samples: Int, on stream: FakeStream) {
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

/// A clock that moves only when told.
final class ManualClock: Sendable {
    private let instant = Mutex(SpeechInstant(nanoseconds: 1_000_000_000))
    var now: SpeechInstant { instant.withLock { $0 } }
    func advance(by d: Duration) { instant.withLock { $0 = $0 + d } }
}

/// Every event delivered, in order.
final class DeliveredEvents: Sendable {
    let events = Mutex<[SpeechEvent]>([])
}

/// An engine that speaks each whitespace-separated word of the plan's text (from where its
/// first run starts) as 100 samples of tone and 20 of silence, at 1000 samples a second.
/// A word ending in "." ends a sentence, reported as the real engine does: when the next one
/// starts, and the last at the end. It counts its passes.
final class FakeEngine: SpeechEngine {
    static let rate = 1000
    private struct Counts {
        var passes = 0
        var running = 0
        var ended = 0
        var waiters: [(ended: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let counts = Mutex(Counts())

    /// Passes started, and how many are running now.
    var passes: Int { counts.withLock { $0.passes } }
    var running: Int { counts.withLock { $0.running } }

    /// Returns once `n` passes have ended (finished or stopped).
    func waitForEndedPasses(_ n: Int) async {
        await withCheckedContinuation { c in
            counts.withLock { s in
                if s.ended >= n { c.resume() } else { s.waiters.append((n, c)) }
            }
        }
    }

    /// Its audio starts with a tone: there is no leading silence to skip.
    func synthesize(
        _ plan: SpeechPlan, stop: StopFlag, skipsLeadingSilence: Bool, started: @Sendable (Int) throws(ParlaError) -> Void,
        emit: @escaping @Sendable (SynthesisEvent) -> Void
    ) async throws(ParlaError) -> Int {
        counts.withLock {
            $0.passes += 1
            $0.running += 1
        }
        defer {
            counts.withLock { s in
                s.running -= 1
                s.ended += 1
                let ended = s.ended
                s.waiters.removeAll { w in
                    guard w.ended <= ended else { return false }
                    w.continuation.resume()
                    return true
                }
            }
        }
        try started(Self.rate)
        let scalars = Array(plan.text.unicodeScalars)
        let from = plan.runs.first?.range.lowerBound ?? 0
        var words: [Range<Int>] = []
        var start: Int?
        for (i, s) in scalars.enumerated() where i >= from {
            if s.properties.isWhitespace {
                if let b = start { words.append(b..<i) }
                start = nil
            } else if start == nil {
                start = i
            }
        }
        if let b = start { words.append(b..<scalars.count) }
        var sample = 0
        var sentence: (input: Int, sample: Int)?
        for token in words {
            guard !stop.isRaised else { throw .cancelled }
            // A word's range leaves its full stop out, as the real engine's do.
            let endsSentence = scalars[token.upperBound - 1] == "." && token.count > 1
            let range = endsSentence ? token.lowerBound..<token.upperBound - 1 : token
            var word = ""
            word.unicodeScalars.append(contentsOf: scalars[range])
            emit(.word(WordMark(range: range, word: word, startSample: sample, endSample: sample + 100, segment: 0, isEstimated: false)))
            emit(
                .audio(
                    PCMBuffer(
                        samples: Array(repeating: 1000, count: 100) + Array(repeating: 0, count: 20), startSample: sample,
                        sampleRate: Self.rate)))
            if sentence == nil { sentence = (range.lowerBound, sample) }
            sample += 120
            if let s = sentence, endsSentence || token == words.last {
                // Reported when the next sentence starts: before its first word.
                emit(.sentence(SentenceMark(range: s.input..<token.upperBound, startSample: s.sample, endSample: sample - 20)))
                sentence = nil
            }
        }
        guard !stop.isRaised else { throw .cancelled }
        return sample
    }
}

/// A sink that keeps what it is given and plays exactly what the test says was heard.
final class FakeSink: AudioSink {
    private struct State {
        var streams: [FakeStream] = []
        var failure: ParlaError?
        var waiters: [(index: Int, continuation: CheckedContinuation<FakeStream, Never>)] = []
    }
    private let state = Mutex(State())

    let maxBufferedAhead: Duration
    init(maxBufferedAhead: Duration) { self.maxBufferedAhead = maxBufferedAhead }
    var targetLatency: Duration { .milliseconds(30) }
    var streamCount: Int { state.withLock { $0.streams.count } }

    func connect() throws(ParlaError) {}

    /// The next stream fails to open with `error`.
    func failNextOpen(_ error: ParlaError) { state.withLock { $0.failure = error } }

    func makeStream(sampleRate: Int, name: String) throws(ParlaError) -> any AudioStream {
        let failure = state.withLock { s -> ParlaError? in
            defer { s.failure = nil }
            return s.failure
        }
        if let failure { throw failure }
        let stream = FakeStream(sampleRate: sampleRate) { [weak self] in self?.inputFinished() }
        state.withLock { $0.streams.append(stream) }
        return stream
    }

    /// Stream `index`, if opened.
    func stream(_ index: Int) -> FakeStream? { state.withLock { index < $0.streams.count ? $0.streams[index] : nil } }

    /// Stream `index` once it exists and its whole input has been written.
    func finishedStream(_ index: Int) async -> FakeStream {
        await withCheckedContinuation { c in
            state.withLock { s in
                if index < s.streams.count, s.streams[index].isInputFinished {
                    c.resume(returning: s.streams[index])
                } else {
                    s.waiters.append((index, c))
                }
            }
        }
    }

    private func inputFinished() {
        state.withLock { s in
            let streams = s.streams
            s.waiters.removeAll { w in
                guard w.index < streams.count, streams[w.index].isInputFinished else { return false }
                w.continuation.resume(returning: streams[w.index])
                return true
            }
        }
    }
}

/// A stream whose played position and status the test sets.
final class FakeStream: AudioStream {
    private struct State {
        var samples: [Int16] = []
        var inputFinished = false
        var played: Int? = 0
        var status: PlaybackStream.Status = .active
        var corked = false
        var closed = false
    }
    private let state = Mutex(State())
    private let onInputFinished: @Sendable () -> Void
    let sampleRate: Int

    init(sampleRate: Int, onInputFinished: @escaping @Sendable () -> Void) {
        self.sampleRate = sampleRate
        self.onInputFinished = onInputFinished
    }

    var samples: [Int16] { state.withLock { $0.samples } }
    var isInputFinished: Bool { state.withLock { $0.inputFinished } }
    var isCorked: Bool { state.withLock { $0.corked } }
    var isClosed: Bool { state.withLock { $0.closed } }
    var played: Int? {
        get { state.withLock { $0.played } }
        set { state.withLock { $0.played = newValue } }
    }
    var status: PlaybackStream.Status {
        get { state.withLock { $0.status } }
        set { state.withLock { $0.status = newValue } }
    }

    var currentStatus: PlaybackStream.Status { status }

    func write(_ samples: [Int16]) throws(ParlaError) { state.withLock { $0.samples += samples } }

    func finishInput() {
        state.withLock { $0.inputFinished = true }
        onInputFinished()
    }

    func playedSamples() -> Int? { played }
    func samplesAhead() -> Int {
        state.withLock { s in
            guard s.status == .active else { return 0 }
            return max(0, s.samples.count - (s.played ?? 0))
        }
    }

    /// Drops what was written from `sample` on, unless the listener is within `margin` of it.
    func discard(from sample: Int, margin: Int) -> Bool {
        state.withLock { s in
            guard (s.played ?? 0) + margin <= sample else { return false }
            if sample < s.samples.count { s.samples.removeLast(s.samples.count - sample) }
            s.inputFinished = false
            return true
        }
    }
    func setVolume(_ volume: Double) {}
    func setCorked(_ corked: Bool) { state.withLock { $0.corked = corked } }

    func close() {
        state.withLock {
            $0.closed = true
            $0.status = .closed
        }
    }
}
