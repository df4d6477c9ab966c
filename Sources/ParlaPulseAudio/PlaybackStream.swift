internal import CPulseAudio
internal import CPulseAudioLazy
import ParlaCore
import ParlaIO
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// One utterance's playback stream: audio goes in with ``write(_:)``, and
/// ``playedSamples()`` says how far the listener has heard.
///
/// Unchecked: its `var`s are read and written only with its output's main-loop lock held,
/// by the calling thread or by libpulse's callbacks on the main loop's thread.
package final class PlaybackStream: @unchecked Sendable {
    /// What the stream is doing.
    package enum Status: Sendable, Equatable {
        /// Connecting or playing.
        case active
        /// Every sample written has been played (after ``finishInput()``).
        case drained
        /// The stream failed (server gone, device missing); it plays nothing more.
        case failed(ParlaError)
        /// ``close()`` was called.
        case closed
    }

    private let output: PulseAudioOutput
    private var stream: OpaquePointer?
    /// Samples per second.
    package let sampleRate: Int
    private var pending: [Int16] = []
    private var pendingOffset = 0
    private var inputFinished = false
    private var drainRequested = false
    private var drainOperation: OpaquePointer?
    /// The timing request made after the first write. Kept, and cancelled in `detach()`, as the
    /// drain is: its reply can arrive after the stream was closed and released (the server
    /// answers it before the stream's deletion), and its callback would then read a freed
    /// stream (the live suite's stress test crashed the test process that way in 1 of 2 runs).
    private var timingOperation: OpaquePointer?
    private var status: Status = .active
    private var isCorked = false
    /// The live volume applied to samples as they are handed to the server (0 to 2, see
    /// ``SampleGain``).
    private var gain = 1.0
    /// Samples handed to the server so far.
    private var sentSamples = 0
    /// Whether the server has reported its timing since the first samples were handed over.
    /// Until then the stream's clock is libpulse's interpolation from the report it had at
    /// creation, which runs on as if playing with nothing written: after a second's wait (a
    /// Piper voice loading) it said a second had played the moment the first audio went out,
    /// and the whole utterance was "heard" at once (on PipeWire, in a new session, its stream
    /// was closed before a sample was heard). Nothing counts as played before that report.
    private var timedSinceFirstWrite = false
    /// When the first samples were handed to the server: nothing can have been heard for longer
    /// than the time since. PipeWire's pulse server sometimes answers the timing request sent
    /// with the first audio with the clock that ran while nothing was written (1 of 13 runs of
    /// aStreamCountsPlayedAudioFromItsFirstSamples: 22,036 of 22,050 samples "played" the
    /// moment they were written, a second after the stream was made); the played position is
    /// kept within that time, so the events follow the listener however the clock runs.
    private var firstWriteAt: UInt64 = 0
    /// The highest played position reported: the clock is read unclamped (its own
    /// monotonic clamp kept the interpolation's overshoot as a floor, and held every later
    /// event back by the wait), so what is reported is kept from going back here.
    private var playedHighWater = 0
    /// Number of times the server ran out of audio while playing.
    package private(set) var underflows = 0
    /// The buffer the stream asks the server to keep (`tlength`, bytes): the output's target
    /// latency at first, doubled after each underflow up to ``latencyCapBytes``, as PulseAudio's
    /// own clients grow theirs. Under CPU contention PipeWire's pulse server ran dry with 30 ms
    /// (about 22 ms of ring at 22,050 Hz) and played silence, and the rest came late. Stop and
    /// pause stay immediate: closing drops the buffer, and corking stops it where it is.
    private var latencyBytes: UInt32 = 0
    /// The most the buffer grows to: 8 times the target latency, at most 250 ms (but never
    /// below the target).
    private var latencyCapBytes: UInt32 = 0
    /// When the stream was asked for, whether the server has made it, and when its played
    /// position last moved: a server that leaves it waiting fails it (``checkProgress()``).
    private let createdAt = monotonicNanoseconds()
    private var isReady = false
    private var lastPlayed = -1
    private var lastProgressAt: UInt64 = 0
    /// Whether the output's ducker counts this stream as playing.
    private var countedForDucking = false

    /// Lock held by the caller.
    init(output: PulseAudioOutput, context: OpaquePointer, sampleRate: Int, name: String) throws(ParlaError) {
        self.output = output
        self.sampleRate = sampleRate
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(sampleRate), channels: 1)
        let props = pa_proplist_new()
        defer { pa_proplist_free(props) }
        pa_proplist_sets(props, "media.role", output.options.role)
        pa_proplist_sets(props, "media.name", name)
        pa_proplist_sets(props, "application.name", output.options.applicationName)
        guard let s = pa_stream_new_with_proplist(context, name, &spec, nil, props) else {
            throw .audioFailure(output.errorText(pa_context_errno(context)))
        }
        stream = s
        // Keep self alive while libpulse may call back; balanced in detach().
        let me = Unmanaged.passRetained(self).toOpaque()
        pa_stream_set_state_callback(
            s,
            { _, userdata in
                guard let userdata else { return }
                Unmanaged<PlaybackStream>.fromOpaque(userdata).takeUnretainedValue().stateChanged()
            }, me)
        pa_stream_set_write_callback(
            s,
            { _, _, userdata in
                guard let userdata else { return }
                Unmanaged<PlaybackStream>.fromOpaque(userdata).takeUnretainedValue().pump()
            }, me)
        pa_stream_set_underflow_callback(
            s,
            { _, userdata in
                guard let userdata else { return }
                Unmanaged<PlaybackStream>.fromOpaque(userdata).takeUnretainedValue().underflowed()
            }, me)
        // 5 ms to 10 s: outside that a latency is a mistake, and would not fit the server's field.
        let latency =
            output.options.targetLatency.inSeconds
        latencyBytes = UInt32(clamping: Int(min(max(latency.isNaN ? 0 : latency, 0.005), 10) * Double(sampleRate)) * 2)
        latencyCapBytes = max(latencyBytes, min(latencyBytes &* 8, UInt32(clamping: sampleRate / 4 * 2)))
        var attr = pa_buffer_attr(
            maxlength: UInt32.max, tlength: latencyBytes, prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
        let flags = pa_stream_flags_t(
            rawValue:
                PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue
                | PA_STREAM_NOT_MONOTONIC.rawValue)
        if pa_stream_connect_playback(s, output.options.device, &attr, flags, nil, nil) < 0 {
            let reason = output.errorText(pa_context_errno(context))
            detach()
            throw .audioFailure(reason)
        }
        if let ducker = output.ducker {
            countedForDucking = true
            ducker.streamStarted(context: context)
        }
    }

    /// Lock held (callback).
    private func stateChanged() {
        guard let s = stream else { return }
        let state = pa_stream_get_state(s)
        if state == PA_STREAM_READY {
            isReady = true
            lastProgressAt = monotonicNanoseconds()
            pump()
        } else if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
            let ctx = pa_stream_get_context(s)
            let code = ctx.map { pa_context_errno($0) } ?? 0
            let contextAlive = ctx.map { pa_context_get_state($0) == PA_CONTEXT_READY } ?? false
            if case .active = status {
                if code == Int32(PA_ERR_NOENTITY.rawValue), let device = output.options.device, contextAlive {
                    status = .failed(.audioDeviceNotFound(device))
                } else if contextAlive {
                    status = .failed(.audioFailure(output.errorText(code)))
                } else {
                    status = .failed(.audioServerLost(reason: output.errorText(code)))
                }
            }
        }
        pa_threaded_mainloop_signal(output.mainloop, 0)
    }

    /// The server ran out of audio: counted, the buffer grown (``latencyBytes``), and the
    /// server asked for its timing at once, so that the played position follows the stall
    /// rather than libpulse's interpolation of a clock that ran on. Lock held (callback).
    private func underflowed() {
        underflows += 1
        guard let s = stream else { return }
        if let op = pa_stream_update_timing_info(s, nil, nil) { pa_operation_unref(op) }
        guard latencyBytes < latencyCapBytes else { return }
        latencyBytes = min(latencyCapBytes, latencyBytes &* 2)
        var attr = pa_buffer_attr(
            maxlength: UInt32.max, tlength: latencyBytes, prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
        if let op = pa_stream_set_buffer_attr(s, &attr, nil, nil) { pa_operation_unref(op) }
    }

    /// How the stream has played so far: how often the server ran dry, and the buffer it now
    /// keeps.
    package var report: PlaybackReport {
        output.lock()
        defer { output.unlock() }
        return PlaybackReport(underflows: underflows, latency: .samples(Int(latencyBytes / 2), atRate: sampleRate))
    }

    /// Sends as much pending audio as the server asks for. Lock held.
    private func pump() {
        guard let s = stream, case .active = status, pa_stream_get_state(s) == PA_STREAM_READY else { return }
        var room = pa_stream_writable_size(s)
        if room == Int.max || room == -1 { return }
        while room >= 2 && pendingOffset < pending.count {
            let count = min(room / 2, pending.count - pendingOffset)
            let rc: Int32
            if gain == 1 {
                rc = pending.withUnsafeBufferPointer { buf -> Int32 in
                    guard let base = buf.baseAddress else { return -1 }
                    return pa_stream_write(s, base + pendingOffset, count * 2, nil, 0, PA_SEEK_RELATIVE)
                }
            } else {
                let scaled = SampleGain.apply(gain, to: pending[pendingOffset..<(pendingOffset + count)])
                rc = scaled.withUnsafeBufferPointer { buf -> Int32 in
                    guard let base = buf.baseAddress else { return -1 }
                    return pa_stream_write(s, base, count * 2, nil, 0, PA_SEEK_RELATIVE)
                }
            }
            if rc < 0 { break }
            if sentSamples == 0 && timingOperation == nil {
                firstWriteAt = monotonicNanoseconds()
                let me = Unmanaged.passUnretained(self).toOpaque()
                timingOperation = pa_stream_update_timing_info(
                    s,
                    { _, _, userdata in
                        guard let userdata else { return }
                        let me = Unmanaged<PlaybackStream>.fromOpaque(userdata).takeUnretainedValue()
                        if me.stream == nil { me.answersAfterClose += 1 }
                        me.timedSinceFirstWrite = true
                        pa_threaded_mainloop_signal(me.output.mainloop, 0)
                    }, me)
            }
            pendingOffset += count
            sentSamples += count
            room -= count * 2
        }
        if pendingOffset > 65536 && pendingOffset * 2 > pending.count {
            pending.removeFirst(pendingOffset)
            pendingOffset = 0
        }
        if inputFinished && pendingOffset == pending.count && !drainRequested {
            drainRequested = true
            let me = Unmanaged.passUnretained(self).toOpaque()
            drainOperation = pa_stream_drain(
                s,
                { _, success, userdata in
                    guard let userdata else { return }
                    let me = Unmanaged<PlaybackStream>.fromOpaque(userdata).takeUnretainedValue()
                    if success != 0, case .active = me.status { me.status = .drained }
                    pa_threaded_mainloop_signal(me.output.mainloop, 0)
                }, me)
        }
    }

    /// Queues `samples` for playback.
    /// - Throws: the stream's failure, if it has failed.
    package func write(_ samples: [Int16]) throws(ParlaError) {
        try output.locked { () throws(ParlaError) in
            if case .failed(let e) = status { throw e }
            guard case .active = status else { return }
            pending.append(contentsOf: samples)
            pump()
        }
    }

    /// Says that no more audio follows: what is queued plays to the end (the stream starts
    /// even if less than its buffer was written), then the status becomes ``Status/drained``.
    package func finishInput() {
        output.lock()
        defer { output.unlock() }
        inputFinished = true
        pump()
    }

    /// The stream's state.
    package var currentStatus: Status {
        output.lock()
        defer { output.unlock() }
        checkProgress()
        return status
    }

    /// Fails the stream if the server has left it waiting longer than the output's
    /// ``AudioOutputOptions/serverTimeout``: not made, or not playing while audio waits (a
    /// PipeWire whose session manager is stopped accepts streams and never links them).
    /// Lock held.
    private func checkProgress() {
        guard case .active = status, stream != nil else { return }
        let now = monotonicNanoseconds(), limit = output.timeoutNanoseconds
        guard isReady else {
            if now &- createdAt > limit {
                status = .failed(.audioServerStalled("accepted a stream but did not start it within \(output.formatSeconds(limit))"))
            }
            return
        }
        let played = playedLocked() ?? 0
        let waiting = sentSamples + pending.count - pendingOffset - played
        // Once playing, a loaded server may be slow to report its first timing or to catch
        // up: only three times the deadline without progress counts as stuck.
        if isCorked || played != lastPlayed || waiting <= 0 {
            lastPlayed = played
            lastProgressAt = now
        } else if now &- lastProgressAt > 3 &* limit {
            status = .failed(
                .audioServerStalled("stopped playing: nothing was heard for \(output.formatSeconds(3 &* limit)) while audio waited"))
        }
    }

    /// How many samples the listener has heard: the server's played position, corrected by the
    /// sink's latency and interpolated between timing updates. Nil until the server has reported
    /// its first timing.
    package func playedSamples() -> Int? {
        output.lock()
        defer { output.unlock() }
        if case .drained = status { return sentSamples }
        checkProgress()
        return playedLocked()
    }

    /// The server's played position in samples, nil before its first timing report or when the
    /// stream is not active. Lock held.
    private func playedLocked() -> Int? {
        guard let s = stream, case .active = status else { return nil }
        guard let usec = serverClock(s) else { return nil }
        guard sentSamples > 0, timedSinceFirstWrite else { return 0 }
        // The server's clock is untrusted: a time beyond the samples handed to it is those
        // samples (what is still waiting here cannot have been heard), and beyond the time since
        // the first write is that time.
        let written = sentSamples
        let sinceFirstWrite = Int(clamping: (monotonicNanoseconds() &- firstWriteAt) / 1000)
        let (product, overflow) = Int(clamping: min(usec, UInt64(sinceFirstWrite))).multipliedReportingOverflow(by: sampleRate)
        playedHighWater = max(playedHighWater, overflow ? written : min(product / 1_000_000, written))
        return playedHighWater
    }

    /// The stream's clock in µs, nil before the server's first timing report. Lock held.
    private func serverClock(_ s: OpaquePointer) -> UInt64? {
        var usec: pa_usec_t = 0
        return pa_stream_get_time(s, &usec) == 0 ? UInt64(usec) : nil
    }

    /// Samples written but not yet played (0 once the stream is not playing).
    package func samplesAhead() -> Int {
        output.lock()
        defer { output.unlock() }
        guard stream != nil, case .active = status else { return 0 }
        return max(0, sentSamples + pending.count - pendingOffset - (playedLocked() ?? 0))
    }

    /// Drops the audio written from stream sample `sample` on, if none of it has been handed to
    /// the server yet and at least `margin` samples before it have not either (so the server does
    /// not run dry while what replaces it is made). The stream then takes more input, even after
    /// ``finishInput()``, as long as the server was not yet asked to drain it.
    /// - Returns: whether the audio was dropped (false: too late, keep it).
    package func discard(from sample: Int, margin: Int) -> Bool {
        output.lock()
        defer { output.unlock() }
        guard stream != nil, case .active = status, !drainRequested else { return false }
        let written = sentSamples + pending.count - pendingOffset
        guard sample >= sentSamples + max(margin, 0), sample <= written else { return false }
        pending.removeSubrange((pendingOffset + sample - sentSamples)...)
        inputFinished = false
        return true
    }

    /// Sets the stream's volume (a multiple of its loudness, 0 to 2; above 1 with a soft limiter,
    /// ``SampleGain``) for every sample not yet handed to
    /// the server: the change is heard once the server's buffer (``AudioOutputOptions/targetLatency``)
    /// has played. It is applied to the samples, not through the server's stream volume, which
    /// the server would remember for every later stream of the same role (a screen reader's too).
    package func setVolume(_ volume: Double) {
        output.lock()
        defer { output.unlock() }
        gain = volume.isFinite ? min(max(volume, 0), 2) : 1
    }

    /// Samples written so far.
    package var writtenSamples: Int {
        output.lock()
        defer { output.unlock() }
        return sentSamples + pending.count - pendingOffset
    }

    /// Whether the server has made the stream (for tests that must act on a made stream).
    package var isMade: Bool {
        output.lock()
        defer { output.unlock() }
        return isReady
    }

    /// Answers from the server that reached the stream after it was closed: none may (a closed
    /// stream can be freed at once). For tests.
    package var callbacksAfterClose: Int {
        output.lock()
        defer { output.unlock() }
        return answersAfterClose
    }
    private var answersAfterClose = 0

    /// Pauses (true) or resumes (false) playback where it is: the buffered audio is kept.
    package func setCorked(_ corked: Bool) {
        output.lock()
        defer { output.unlock() }
        guard let s = stream, corked != isCorked else { return }
        isCorked = corked
        if let op = pa_stream_cork(s, corked ? 1 : 0, nil, nil) { pa_operation_unref(op) }
        if let op = pa_stream_update_timing_info(s, nil, nil) { pa_operation_unref(op) }
    }

    /// Whether playback is paused.
    package var corked: Bool {
        output.lock()
        defer { output.unlock() }
        return isCorked
    }

    /// Stops at once: the server drops the stream and everything buffered in it.
    package func close() {
        output.lock()
        defer { output.unlock() }
        if case .active = status { status = .closed }
        if case .drained = status { status = .closed }
        detach()
    }

    /// Disconnects and releases the stream. Lock held.
    private func detach() {
        guard let s = stream else { return }
        stream = nil
        for op in [drainOperation, timingOperation].compactMap({ $0 }) {
            if pa_operation_get_state(op) == PA_OPERATION_RUNNING { pa_operation_cancel(op) }
            pa_operation_unref(op)
        }
        drainOperation = nil
        timingOperation = nil
        pa_stream_set_state_callback(s, nil, nil)
        pa_stream_set_write_callback(s, nil, nil)
        pa_stream_set_underflow_callback(s, nil, nil)
        pa_stream_disconnect(s)
        pa_stream_unref(s)
        if countedForDucking {
            countedForDucking = false
            output.ducker?.streamEnded()
        }
        pending = []
        pendingOffset = 0
        Unmanaged.passUnretained(self).release()
    }
}
