internal import CPulseAudio
import ParlaCore
import ParlaIO
import ParlaPulseAudio
#if canImport(Glibc)
    import Glibc
#endif

/// Records a PulseAudio source (typically a sink's monitor, `SINK.monitor`) and stamps every
/// sample with the CLOCK_MONOTONIC time it arrived, so tests and benchmarks can prove that sound
/// really reached the server, and when.
///
/// Unchecked: its `var`s are read and written only with its main loop's lock held (by the
/// caller, or by libpulse's read callback on the main loop's thread).
public final class PulseAudioRecorder: @unchecked Sendable {
    /// A block of recorded samples; the last sample arrived at `arrivalNanoseconds`.
    public struct Block: Sendable {
        /// The samples (16-bit mono).
        public var samples: [Int16]
        /// CLOCK_MONOTONIC nanoseconds when the block was read.
        public var arrivalNanoseconds: UInt64
    }

    private let output: PulseAudioOutput
    private var stream: OpaquePointer?
    /// Samples per second of the recording.
    public let sampleRate: Int
    private var blocks: [Block] = []
    private var failure: ParlaError?

    /// Starts recording `source` (e.g. `parla_test.monitor`) at `sampleRate`, in blocks of
    /// about `blockDuration`.
    public init(source: String, sampleRate: Int = 22050, blockDuration: Duration = .milliseconds(2), server: String? = nil)
        throws(ParlaError)
    {
        output = PulseAudioOutput(options: AudioOutputOptions(server: server, applicationName: "Parla monitor"))
        self.sampleRate = sampleRate
        try output.locked { () throws(ParlaError) in
            let ctx = try output.readyContext()
            var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(sampleRate), channels: 1)
            guard let s = pa_stream_new(ctx, "monitor", &spec, nil) else {
                throw .audioFailure(output.errorText(pa_context_errno(ctx)))
            }
            stream = s
            let me = Unmanaged.passUnretained(self).toOpaque()
            pa_stream_set_state_callback(
                s,
                { _, userdata in
                    guard let userdata else { return }
                    let me = Unmanaged<PulseAudioRecorder>.fromOpaque(userdata).takeUnretainedValue()
                    pa_threaded_mainloop_signal(me.output.mainloop, 0)
                }, me)
            pa_stream_set_read_callback(
                s,
                { s, _, userdata in
                    guard let s, let userdata else { return }
                    let me = Unmanaged<PulseAudioRecorder>.fromOpaque(userdata).takeUnretainedValue()
                    me.read(s)
                }, me)
            let ms = blockDuration.inMilliseconds
            var attr = pa_buffer_attr(
                maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
                fragsize: UInt32(max(1, ms * Double(sampleRate) / 1000)) * 2)
            let flags = pa_stream_flags_t(rawValue: PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_DONT_MOVE.rawValue)
            guard pa_stream_connect_record(s, source, &attr, flags) == 0 else {
                throw .audioFailure(output.errorText(pa_context_errno(ctx)))
            }
            while true {
                let state = pa_stream_get_state(s)
                if state == PA_STREAM_READY { break }
                if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
                    throw .audioDeviceNotFound(source)
                }
                pa_threaded_mainloop_wait(output.mainloop)
            }
        }
    }

    deinit { stop() }

    /// Lock held (callback).
    private func read(_ s: OpaquePointer) {
        while pa_stream_readable_size(s) > 0 {
            var data: UnsafeRawPointer?
            var bytes = 0
            guard pa_stream_peek(s, &data, &bytes) == 0 else { return }
            if bytes == 0 { return }
            let now = monotonicNanoseconds()
            if let data {
                let count = bytes / 2
                let samples = Array(UnsafeBufferPointer(start: data.assumingMemoryBound(to: Int16.self), count: count))
                blocks.append(Block(samples: samples, arrivalNanoseconds: now))
            } else {
                blocks.append(Block(samples: Array(repeating: 0, count: bytes / 2), arrivalNanoseconds: now))
            }
            pa_stream_drop(s)
        }
    }

    /// Stops recording (idempotent).
    public func stop() {
        output.lock()
        defer { output.unlock() }
        guard let s = stream else { return }
        stream = nil
        pa_stream_set_read_callback(s, nil, nil)
        pa_stream_set_state_callback(s, nil, nil)
        pa_stream_disconnect(s)
        pa_stream_unref(s)
    }

    /// Samples recorded so far.
    public var recordedSampleCount: Int {
        output.lock()
        defer { output.unlock() }
        return blocks.reduce(0) { $0 + $1.samples.count }
    }

    /// Waits until the source delivers audio as it is rendered, then forgets what was recorded.
    ///
    /// A newly loaded `module-null-sink` renders its first two seconds in one block, before it
    /// follows the latency its clients ask for: its monitor delivers nothing during that block,
    /// and audio played then can miss the monitor and see its played position stall. Once
    /// 100 ms of samples have arrived, that block is over.
    public func settle(timeout: Duration = .seconds(15)) async throws {
        let start = ContinuousClock.now
        while recordedSampleCount < sampleRate / 10 && ContinuousClock.now - start < timeout {
            try await Task.sleep(for: .milliseconds(20))
        }
        reset()
    }

    /// Forgets everything recorded so far.
    public func reset() {
        output.lock()
        defer { output.unlock() }
        blocks = []
    }

    /// Everything recorded so far.
    public func recorded() -> [Block] {
        output.lock()
        defer { output.unlock() }
        return blocks
    }

    /// Everything recorded so far, each block stamped with the time its last sample reached the
    /// source (see ``loudSampleTimes(threshold:after:)``) instead of when it was read: a reader
    /// that woke late (a busy machine) reads seconds of audio at once, and by arrival all of it
    /// would look that late. Times never decrease.
    public func clockedBlocks() -> [Block] {
        let blocks = recorded()
        let origins = sampleClockOrigins(blocks)
        var clocked: [Block] = []
        clocked.reserveCapacity(blocks.count)
        var end = 0
        var previous: UInt64 = 0
        for (k, block) in blocks.enumerated() {
            end += block.samples.count
            let t = max(UInt64(max(0, origins[k] + Int64(end) * 1_000_000_000 / Int64(sampleRate))), previous)
            previous = t
            clocked.append(Block(samples: block.samples, arrivalNanoseconds: t))
        }
        return clocked
    }

    /// The time every sample whose magnitude is at least `threshold` reached the source, in order.
    ///
    /// A monitor delivers an unbroken stream of samples, so within a stretch of it sample `i`
    /// reached it at `t0 + i / rate`. For each block, `t0` is estimated from the blocks that
    /// arrived within 250 ms of it: the one that arrived soonest after its last sample (the
    /// smallest `arrival − end / rate`). A reader thread that was late to wake (a busy machine)
    /// therefore does not make samples look late, and audio the server re-renders after a
    /// rewind (cork, stream removal) shifts the estimate only locally. Times never decrease.
    public func loudSampleTimes(threshold: Int16 = 300, after: UInt64 = 0) -> [UInt64] {
        let blocks = recorded()
        let origins = sampleClockOrigins(blocks)
        var times: [UInt64] = []
        var index = 0
        var previous: UInt64 = 0
        for (k, block) in blocks.enumerated() {
            for s in block.samples {
                if s.magnitude >= threshold.magnitude {
                    // Never before an earlier sample (the estimate may step back between blocks).
                    let t = max(UInt64(max(0, origins[k] + Int64(index) * 1_000_000_000 / Int64(sampleRate))), previous)
                    previous = t
                    if t >= after { times.append(t) }
                }
                index += 1
            }
        }
        return times
    }

    /// For each block, the estimated time sample 0 of the recording reached the source: the
    /// smallest `arrival − end / rate` among the blocks that arrived within 250 ms of it.
    private func sampleClockOrigins(_ blocks: [Block]) -> [Int64] {
        var offsets: [Int64] = []
        offsets.reserveCapacity(blocks.count)
        var end = 0
        for block in blocks {
            end += block.samples.count
            offsets.append(Int64(block.arrivalNanoseconds) - Int64(end) * 1_000_000_000 / Int64(sampleRate))
        }
        var origins: [Int64] = []
        origins.reserveCapacity(blocks.count)
        var lo = 0, hi = 0
        for (k, block) in blocks.enumerated() {
            let arrival = block.arrivalNanoseconds
            while blocks[lo].arrivalNanoseconds + 250_000_000 < arrival { lo += 1 }
            while hi + 1 < blocks.count && blocks[hi + 1].arrivalNanoseconds <= arrival + 250_000_000 { hi += 1 }
            origins.append(offsets[lo...max(hi, k)].min() ?? offsets[k])
        }
        return origins
    }

    /// How late each word event came (ms; negative: early) against the moment its own sound
    /// reached the source. `synthesized` is the utterance's audio (at `sampleRate`, as
    /// ``/Parla/SpeechSynthesizer/write(_:toBufferCallback:)`` makes it) and `words` each word
    /// event's delivery time and audio sample. A word's onset is its first loud sample
    /// (`threshold`); the n-th loud sample synthesized is taken to be the n-th loud sample
    /// recorded after `after`, scaled by their counts (a server may resample), so silence the
    /// server plays when it runs dry moves the words after it and their onsets alike. `leadIn`:
    /// the synthesized samples before the stream's first (live speech skips the engine's
    /// silence before its first sound, and counts its words' samples from there). Words with no
    /// loud sample after their start are left out. Empty if nothing loud was recorded.
    public func wordDrift(
        words: [(time: UInt64, sample: Int)], synthesized: [Int16], sampleRate: Int, after: UInt64, leadIn: Int = 0,
        threshold: Int16 = 300
    ) -> [Double] {
        let made = synthesized.indices.filter { synthesized[$0].magnitude >= threshold.magnitude }
        let heard = loudSampleTimes(threshold: threshold, after: after)
        guard !made.isEmpty, !heard.isEmpty, sampleRate > 0 else { return [] }
        let ratio = Double(heard.count) / Double(made.count)
        var drift: [Double] = []
        for word in words {
            let start = word.sample + leadIn
            // Its first loud sample (a binary search: `made` is sorted).
            var lo = 0, hi = made.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if made[mid] < start { lo = mid + 1 } else { hi = mid }
            }
            guard lo < made.count else { continue }
            let arrived = heard[min(heard.count - 1, Int((Double(lo) * ratio).rounded()))]
            let due = Double(arrived) - Double(made[lo] - start) * 1e9 / Double(sampleRate)
            drift.append((Double(word.time) - due) / 1e6)
        }
        return drift
    }
}
