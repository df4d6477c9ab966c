import ParlaCore
import ParlaEngine
import ParlaPulseAudio

/// What live speech needs of a speech engine: espeak-ng (``SynthesisEngine``), or a test's fake
/// that produces scripted audio and marks.
package protocol SpeechEngine: Sendable {
    /// Speaks `plan`, passing audio and timed marks to `emit` as they are produced; returns
    /// the number of samples produced. Loads the engine first if it has not been, and tells
    /// `started` its output sample rate before the first event; what `started` throws ends
    /// synthesis with that error. With `skipsLeadingSilence`, the engine's silence before the
    /// first sound is not passed on (``ParlaCore/TimelineBuilder/skipsLeadingSilence``).
    /// - Throws: ``ParlaCore/ParlaError/cancelled`` once `stop` is raised.
    func synthesize(
        _ plan: SpeechPlan, stop: StopFlag, skipsLeadingSilence: Bool, started: @Sendable (Int) throws(ParlaError) -> Void,
        emit: @escaping @Sendable (SynthesisEvent) -> Void
    ) async throws(ParlaError) -> Int
    /// The sample rate `started` will most likely be told, known before it is: live speech
    /// opens its stream at this rate while the engine loads. Nil: no guess (the stream opens
    /// once the engine has started).
    var likelySampleRate: Int? { get }
    /// Where a task that has nothing left to do but speak runs best: the engine's own thread.
    /// Nil: the cooperative pool.
    var preferredTaskExecutor: (any TaskExecutor)? { get }
}

extension SpeechEngine {
    package var likelySampleRate: Int? { nil }
    package var preferredTaskExecutor: (any TaskExecutor)? { nil }
}

extension SynthesisEngine: SpeechEngine {
    /// espeak-ng's own voices all speak at 22,050 Hz.
    package nonisolated var likelySampleRate: Int? { 22050 }
    package nonisolated var preferredTaskExecutor: (any TaskExecutor)? { taskExecutor }
}

/// What live speech needs of a sound server: PulseAudio or PipeWire's pulse server
/// (``PulseAudioOutput``), or a test's fake whose played position the test sets.
package protocol AudioSink: Sendable {
    /// Connects to the server if not connected yet (blocking; call it off the cooperative pool).
    func connect() throws(ParlaError)
    /// Opens a stream for one utterance (blocking, like ``connect()``).
    func makeStream(sampleRate: Int, name: String) throws(ParlaError) -> any AudioStream
    /// How far ahead of the listener synthesis may write.
    var maxBufferedAhead: Duration { get }
    /// The latency the streams ask for.
    var targetLatency: Duration { get }
}

/// One utterance's stream: audio goes in, and the played position says what the listener has
/// heard. ``PlaybackStream`` is the real one.
package protocol AudioStream: AnyObject, Sendable {
    /// Samples per second.
    var sampleRate: Int { get }
    /// What the stream is doing.
    var currentStatus: PlaybackStream.Status { get }
    /// Queues samples for playback.
    func write(_ samples: [Int16]) throws(ParlaError)
    /// No more samples will come: the stream drains what it holds.
    func finishInput()
    /// Samples the listener has heard, nil while the server cannot say.
    func playedSamples() -> Int?
    /// Samples written but not yet heard (0 once the stream stops playing).
    func samplesAhead() -> Int
    /// Drops the audio from stream sample `sample` on, if the server has not been given it
    /// and `margin` samples before it; false if too late.
    func discard(from sample: Int, margin: Int) -> Bool
    /// Sets the gain of what is not yet sent (linear, 0 to 1).
    func setVolume(_ volume: Double)
    /// Pauses (true) or resumes (false) playback where it is.
    func setCorked(_ corked: Bool)
    /// Stops at once and releases the stream.
    func close()
    /// How it has played so far (underflows, the buffer it keeps).
    var report: PlaybackReport { get }
}

extension AudioStream {
    /// A stream that cannot say: no underflow, no buffer.
    package var report: PlaybackReport { PlaybackReport(underflows: 0, latency: .zero) }
}

extension PlaybackStream: AudioStream {}

extension PulseAudioOutput: AudioSink {
    package func makeStream(sampleRate: Int, name: String) throws(ParlaError) -> any AudioStream {
        try openStream(sampleRate: sampleRate, name: name)
    }

    package var maxBufferedAhead: Duration { options.maxBufferedAhead }

    package var targetLatency: Duration { options.targetLatency }
}
