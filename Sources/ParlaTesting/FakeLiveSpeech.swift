import Parla
import ParlaCore
import ParlaPulseAudio
import Synchronization

/// A clock that moves only when told: the time of every live event a ``SpeechTestRig``
/// delivers.
public final class ManualClock: Sendable {
    private let instant = Mutex(SpeechInstant(nanoseconds: 1_000_000_000))

    /// A clock at one second past its origin.
    public init() {}

    /// The time now.
    public var now: SpeechInstant { instant.withLock { $0 } }

    /// Moves the time on by `duration`.
    public func advance(by duration: Duration) { instant.withLock { $0 = $0 + duration } }
}

/// A speech engine for tests: it speaks each whitespace-separated word of an utterance as 100
/// samples of tone and 20 of silence, at 1,000 samples a second, so a word lasts exactly
/// 120 ms and starts at sample `120 × n`. A word ending in "." ends a sentence, reported as
/// the real engine does: when the next one starts, and the last at the end.
public final class FakeSpeechEngine: SpeechEngine {
    /// Its samples per second.
    public static let sampleRate = 1000
    /// Samples of tone, then of silence, per word.
    public static let toneSamples = 100
    public static let silenceSamples = 20

    private struct Counts {
        var passes = 0
        var running = 0
        var ended = 0
        var waiters: [(ended: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let counts = Mutex(Counts())

    /// An engine that has spoken nothing yet.
    public init() {}

    /// Synthesis passes started (an utterance takes one, and one more each time it goes on
    /// after running ahead of the listener or after a live rate change).
    public var passes: Int { counts.withLock { $0.passes } }
    /// Passes running now.
    public var running: Int { counts.withLock { $0.running } }

    /// Returns once `n` passes have ended (finished or stopped).
    public func waitForEndedPasses(_ n: Int) async {
        await withCheckedContinuation { c in
            counts.withLock { s in
                if s.ended >= n { c.resume() } else { s.waiters.append((n, c)) }
            }
        }
    }

    /// Its audio starts with a tone: there is no leading silence to skip.
    package func synthesize(
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
        try started(Self.sampleRate)
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
        let length = Self.toneSamples + Self.silenceSamples
        var sample = 0
        var sentence: (input: Int, sample: Int)?
        for token in words {
            guard !stop.isRaised else { throw .cancelled }
            // A word's range leaves its full stop out, as the real engine's do.
            let endsSentence = scalars[token.upperBound - 1] == "." && token.count > 1
            let range = endsSentence ? token.lowerBound..<token.upperBound - 1 : token
            var word = ""
            word.unicodeScalars.append(contentsOf: scalars[range])
            emit(
                .word(
                    WordMark(
                        range: range, word: word, startSample: sample, endSample: sample + Self.toneSamples, segment: 0,
                        isEstimated: false)))
            let audio = Array(repeating: Int16(1000), count: Self.toneSamples) + Array(repeating: 0, count: Self.silenceSamples)
            emit(.audio(PCMBuffer(samples: audio, startSample: sample, sampleRate: Self.sampleRate)))
            if sentence == nil { sentence = (range.lowerBound, sample) }
            sample += length
            if let s = sentence, endsSentence || token == words.last {
                // Reported when the next sentence starts: before its first word.
                emit(
                    .sentence(
                        SentenceMark(range: s.input..<token.upperBound, startSample: s.sample, endSample: sample - Self.silenceSamples)))
                sentence = nil
            }
        }
        guard !stop.isRaised else { throw .cancelled }
        return sample
    }
}

/// A sound server for tests: it keeps the audio each utterance's stream is given, and plays
/// exactly as much of it as the test says the listener has heard.
public final class FakeAudioSink: AudioSink {
    private struct State {
        var streams: [FakeAudioStream] = []
        var failure: ParlaError?
        var waiters: [(index: Int, continuation: CheckedContinuation<FakeAudioStream, Never>)] = []
    }
    private let state = Mutex(State())

    /// How far synthesis may run ahead of the listener.
    public let maxBufferedAhead: Duration
    /// A sink whose synthesis may run `maxBufferedAhead` ahead of the listener.
    public init(maxBufferedAhead: Duration = .seconds(10)) { self.maxBufferedAhead = maxBufferedAhead }
    package var targetLatency: Duration { .milliseconds(30) }

    /// Every stream opened so far, one per utterance played (and one more per resumption).
    public var streams: [FakeAudioStream] { state.withLock { $0.streams } }
    /// How many streams were opened.
    public var streamCount: Int { state.withLock { $0.streams.count } }

    package func connect() throws(ParlaError) {}

    /// The next stream fails to open with `error`, as a sound server that refuses it would.
    public func failNextOpen(_ error: ParlaError) { state.withLock { $0.failure = error } }

    package func makeStream(sampleRate: Int, name: String) throws(ParlaError) -> any AudioStream {
        let failure = state.withLock { s -> ParlaError? in
            defer { s.failure = nil }
            return s.failure
        }
        if let failure { throw failure }
        let stream = FakeAudioStream(sampleRate: sampleRate) { [weak self] in self?.inputFinished() }
        state.withLock { $0.streams.append(stream) }
        return stream
    }

    /// Stream `index`, if opened.
    public func stream(_ index: Int) -> FakeAudioStream? { state.withLock { index < $0.streams.count ? $0.streams[index] : nil } }

    /// Stream `index` once it exists and its whole input has been written.
    public func finishedStream(_ index: Int) async -> FakeAudioStream {
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

/// One utterance's stream in a ``FakeAudioSink``: the samples written to it, and a played
/// position the test sets.
public final class FakeAudioStream: AudioStream {
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
    /// Samples per second.
    public let sampleRate: Int

    init(sampleRate: Int, onInputFinished: @escaping @Sendable () -> Void) {
        self.sampleRate = sampleRate
        self.onInputFinished = onInputFinished
    }

    /// The samples written so far.
    public var samples: [Int16] { state.withLock { $0.samples } }
    /// Whether the utterance has written all its audio.
    public var isInputFinished: Bool { state.withLock { $0.inputFinished } }
    /// Whether playback is paused.
    public var isCorked: Bool { state.withLock { $0.corked } }
    /// Whether the stream was released.
    public var isClosed: Bool { state.withLock { $0.closed } }
    /// How many samples the listener has heard (nil: the server cannot say now).
    public var played: Int? {
        get { state.withLock { $0.played } }
        set { state.withLock { $0.played = newValue } }
    }
    /// What the stream is doing; a test sets `.failed` to play a server that goes away.
    package var status: PlaybackStream.Status {
        get { state.withLock { $0.status } }
        set { state.withLock { $0.status = newValue } }
    }

    package var currentStatus: PlaybackStream.Status { status }

    package func write(_ samples: [Int16]) throws(ParlaError) { state.withLock { $0.samples += samples } }

    package func finishInput() {
        state.withLock { $0.inputFinished = true }
        onInputFinished()
    }

    package func playedSamples() -> Int? { played }
    package func samplesAhead() -> Int {
        state.withLock { s in
            guard s.status == .active else { return 0 }
            return max(0, s.samples.count - (s.played ?? 0))
        }
    }

    /// Drops what was written from `sample` on, unless the listener is within `margin` of it.
    package func discard(from sample: Int, margin: Int) -> Bool {
        state.withLock { s in
            guard (s.played ?? 0) + margin <= sample else { return false }
            if sample < s.samples.count { s.samples.removeLast(s.samples.count - sample) }
            s.inputFinished = false
            return true
        }
    }
    package func setVolume(_ volume: Double) {}
    package func setCorked(_ corked: Bool) { state.withLock { $0.corked = corked } }

    package func close() {
        state.withLock {
            $0.closed = true
            $0.status = .closed
        }
    }
}

/// A ``SpeechSynthesizer`` for an app's tests, whose live speech runs on fakes the test drives:
/// the words are spoken by ``FakeSpeechEngine`` (each exactly 120 ms), played by
/// ``FakeAudioSink``, and heard only when the test says so, on a ``ManualClock``. Every event
/// is exact (its time is the manual clock's, its position the sample the test has reached),
/// so a test of an app's speech logic (what it says, what interrupts what, what it does when a
/// word is heard or an announcement is cut off) gives the same events on any machine, with no
/// sound server.
///
/// ```swift
/// let rig = try SpeechTestRig()
/// rig.synthesizer.speak("Battery low.")
/// await rig.listenUntilIdle()
/// #expect(rig.heardWords == ["Battery", "low"])
/// ```
///
/// Files (`write(_:to:)`) still use the real engine.
public final class SpeechTestRig: Sendable {
    /// The synthesizer to give the code under test.
    public let synthesizer: SpeechSynthesizer
    public let engine = FakeSpeechEngine()
    public let sink: FakeAudioSink
    public let clock = ManualClock()
    private let delivered = DeliveredEvents()

    /// The events delivered so far (a class, so the observer closure can hold it).
    private final class DeliveredEvents: Sendable {
        let events = Mutex<[SpeechEvent]>([])
    }

    /// A rig whose synthesizer chooses voices from `catalog` (default: Parla's), and lets
    /// synthesis run `maxBufferedAhead` ahead of the listener.
    /// - Throws: what loading the catalog throws.
    public init(catalog: VoiceCatalog? = nil, maxBufferedAhead: Duration = .seconds(10)) throws(ParlaError) {
        let chosen: VoiceCatalog
        if let catalog { chosen = catalog } else { chosen = try VoiceCatalog.default() }
        sink = FakeAudioSink(maxBufferedAhead: maxBufferedAhead)
        synthesizer = SpeechSynthesizer(catalog: chosen)
        let clock = self.clock
        let delivered = self.delivered
        synthesizer.useLiveDrivers(output: sink, engine: engine, now: { clock.now }) { event in
            delivered.events.withLock { $0.append(event) }
        }
    }

    /// Every live event delivered so far, in order (each also reaches the synthesizer's
    /// `events()` subscribers).
    public var events: [SpeechEvent] { delivered.events.withLock { $0 } }

    /// The words the listener has heard so far, in order, as their word events gave them.
    public var heardWords: [String] {
        events.compactMap { e in
            if case .willSpeakWord(let range) = e.kind { return range.text }
            return nil
        }
    }

    /// Lets the listener hear `duration` more of what is playing (1,000 samples a second, in
    /// steps of one sample), delivering each event when its sample is reached. Paused speech
    /// is not heard while the clock moves on. Returns early once nothing is speaking.
    public func listen(for duration: Duration) async {
        var steps = Int(duration / .milliseconds(1))
        while steps > 0 {
            guard let stream = await playingStream() else { return }
            if !stream.isCorked, let played = stream.played, played < stream.samples.count {
                stream.played = played + 1
            }
            clock.advance(by: .milliseconds(1))
            synthesizer.tickLiveSpeech()
            steps -= 1
        }
    }

    /// Lets the listener hear everything queued to its end (at most `limit` of audio), and
    /// returns once nothing is speaking.
    public func listenUntilIdle(limit: Duration = .seconds(3600)) async {
        var left = limit
        while synthesizer.isSpeaking, left > .zero {
            await listen(for: .milliseconds(120))
            left -= .milliseconds(120)
        }
    }

    /// The stream now playing, once its audio is written (or synthesis waits for the listener);
    /// nil once nothing is speaking.
    private func playingStream() async -> FakeAudioStream? {
        while true {
            if let stream = sink.streams.last, !stream.isClosed, engine.running == 0 { return stream }
            if !synthesizer.isSpeaking {
                // An utterance that ended before a stream was opened (failed, dropped).
                synthesizer.tickLiveSpeech()
                if !synthesizer.isSpeaking { return nil }
            }
            await Task.yield()
            try? await Task.sleep(for: .milliseconds(1))
        }
    }
}
