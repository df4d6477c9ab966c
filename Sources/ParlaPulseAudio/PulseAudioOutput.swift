internal import CPulseAudio
internal import CPulseAudioLazy
import ParlaCore
import ParlaIO
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// Where and how live speech is played.
public struct AudioOutputOptions: Sendable, Hashable {
    /// The PulseAudio sink to play to (nil: the server's default sink).
    public var device: String?
    /// The server to connect to (nil: the default, which honours `PULSE_SERVER`).
    public var server: String?
    /// How much audio the server buffers ahead of the listener. Smaller reacts faster to stop
    /// and pause; too small risks underruns on a loaded machine.
    public var targetLatency: Duration
    /// The stream's `media.role` (PulseAudio's role for screen readers and announcements is `a11y`).
    public var role: String
    /// The client name desktop volume controls show.
    public var applicationName: String
    /// How far synthesis may run ahead of the listener (at least a second). Beyond it, live
    /// synthesis stops at the next sentence and carries on when half has been heard, so a
    /// book-length text does not sit in memory (22050 Hz mono: 2.6 MB per minute).
    public var maxBufferedAhead: Duration
    /// How long the server may take to accept a connection, to start a stream, or to play on
    /// while audio waits, before it counts as stuck (a PipeWire whose WirePlumber stopped
    /// accepts streams and never plays them).
    public var serverTimeout: Duration
    /// Lower other programs' audio while Parla speaks (nil, the default: leave it alone). See
    /// ``DuckingOptions``.
    public var ducking: DuckingOptions?

    /// Creates options; the defaults suit spoken announcements on a desktop.
    public init(
        device: String? = nil, server: String? = nil, targetLatency: Duration = .milliseconds(30),
        role: String = "a11y", applicationName: String = "Parla", maxBufferedAhead: Duration = .seconds(30),
        serverTimeout: Duration = .seconds(3), ducking: DuckingOptions? = nil
    ) {
        self.ducking = ducking
        self.maxBufferedAhead = maxBufferedAhead
        self.serverTimeout = serverTimeout
        self.device = device
        self.server = server
        self.targetLatency = targetLatency
        self.role = role
        self.applicationName = applicationName
    }
}

/// A connection to a PulseAudio server (or PipeWire's pulse server) through libpulse's
/// threaded main loop. It connects on first use and again after the server went away.
///
/// Every libpulse call is made with the main loop's lock held; callbacks run on the main
/// loop's own thread (with the lock held) and only record state.
///
/// Unchecked: its `var`s are read and written only with the main loop's lock held (``lock()``,
/// ``locked(_:)``, or inside libpulse's callbacks), and the loop itself is behind a `Mutex`.
public final class PulseAudioOutput: @unchecked Sendable {
    /// The options the output was created with.
    public let options: AudioOutputOptions
    /// The main loop, made (and libpulse loaded) on first use: by ``connect()`` or the first
    /// stream, not by `init`, so that a program can make its output at once and let a thread of
    /// its own pay for loading the library (`parla say` plans the text meanwhile).
    package var mainloop: OpaquePointer { loop.mainloop }
    private let loopStorage = Mutex<Loop?>(nil)
    private struct Loop {
        let mainloop: OpaquePointer
        /// Why there is no main loop (libpulse is not installed), or nil.
        let unavailable: String?
        let ducker: Ducker?
    }
    private var context: OpaquePointer?
    /// Whether a thread is connecting (lock held): another waits for it rather than connecting
    /// too, and takes its failure as its own.
    private var connecting = false
    private var connectFailure: ParlaError?
    /// Lowers other streams while this output's play (``AudioOutputOptions/ducking``).
    var ducker: Ducker? { loop.ducker }

    /// Why there is no main loop (libpulse is not installed), or nil.
    private var unavailable: String? { loop.unavailable }

    private var loop: Loop {
        loopStorage.withLock { stored in
            if let stored { return stored }
            let made = Self.makeLoop(options)
            stored = made
            return made
        }
    }

    /// Creates an output; nothing is connected until ``connect()`` or the first stream.
    public init(options: AudioOutputOptions = AudioOutputOptions()) {
        self.options = options
    }

    /// libpulse is loaded here, on first use (CPulseAudioLazy). Without it, a placeholder
    /// stands in for the loop, nothing ever touches it, and connect() says what to install.
    private static func makeLoop(_ options: AudioOutputOptions) -> Loop {
        guard let made = pa_threaded_mainloop_new() else {
            return Loop(
                mainloop: OpaquePointer(parla_pulse_placeholder()),
                unavailable: parla_pulse_load_error().map { String(cString: $0) } ?? "libpulse could not create its main loop",
                ducker: nil)
        }
        pa_threaded_mainloop_start(made)
        return Loop(
            mainloop: made, unavailable: nil,
            ducker: options.ducking.map { Ducker(options: $0, role: options.role, server: options.server, mainloop: made) })
    }

    deinit {
        guard let loop = loopStorage.withLock({ $0 }), loop.unavailable == nil else { return }
        pa_threaded_mainloop_stop(loop.mainloop)
        if let context {
            pa_context_disconnect(context)
            pa_context_unref(context)
        }
        pa_threaded_mainloop_free(loop.mainloop)
    }

    /// How ducking works on this server (``DuckingMode/unknown`` until a stream has played,
    /// or when ducking is off).
    package var duckingMode: DuckingMode { lock(); defer { unlock() }; return ducker?.mode ?? .unknown }

    package func lock() {
        let loop = loop  // once: each read takes the storage's lock
        if loop.unavailable == nil { pa_threaded_mainloop_lock(loop.mainloop) }
    }
    package func unlock() {
        let loop = loop
        if loop.unavailable == nil { pa_threaded_mainloop_unlock(loop.mainloop) }
    }

    /// Runs `body` with the main loop locked.
    package func locked<T>(_ body: () throws(ParlaError) -> T) throws(ParlaError) -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Connects to the server unless already connected. Blocks until the connection is ready or
    /// has failed (a local server answers in about a millisecond).
    /// - Throws: ``ParlaError/audioServerUnavailable(reason:)``.
    public func connect() throws(ParlaError) {
        try locked { () throws(ParlaError) in _ = try readyContext() }
    }

    /// ``AudioOutputOptions/serverTimeout`` in nanoseconds.
    var timeoutNanoseconds: UInt64 {
        let (s, atto) = options.serverTimeout.components
        return UInt64(clamping: max(0, s)) &* 1_000_000_000 &+ UInt64(clamping: max(0, atto / 1_000_000_000))
    }

    /// Waits for the main loop to signal (lock held), at most until `deadline` (monotonic
    /// nanoseconds); false once the deadline has passed. A timer event of the main loop wakes
    /// the wait at the deadline, so nothing polls.
    func wait(until deadline: UInt64) -> Bool {
        let now = monotonicNanoseconds()
        guard now < deadline, let api = pa_threaded_mainloop_get_api(mainloop),
            let timeNew = api.pointee.time_new, let timeFree = api.pointee.time_free
        else { return false }
        // Time events take wall-clock times: now, plus what is left until the deadline.
        var tv = timeval()
        gettimeofday(&tv, nil)
        pa_timeval_add(&tv, (deadline - now) / 1000 + 1)
        let event = timeNew(
            api, &tv,
            { _, _, _, userdata in
                guard let userdata else { return }
                pa_threaded_mainloop_signal(OpaquePointer(userdata), 0)
            }, UnsafeMutableRawPointer(mainloop))
        pa_threaded_mainloop_wait(mainloop)
        if let event { timeFree(event) }
        return monotonicNanoseconds() < deadline
    }

    /// Throws unless the server has a sink named `name` (lock held). Both PulseAudio and
    /// PipeWire accept a stream for any target name, and PipeWire then plays it on the default
    /// sink: only asking for the sink by name tells a typo from a device.
    func requireSink(_ name: String, context: OpaquePointer) throws(ParlaError) {
        final class Answer {
            var done = false
            var found = false
            let mainloop: OpaquePointer
            init(_ mainloop: OpaquePointer) { self.mainloop = mainloop }
        }
        let answer = Answer(mainloop)
        let box = Unmanaged.passRetained(answer)
        defer { box.release() }
        guard
            let op = pa_context_get_sink_info_by_name(
                context, name,
                { _, info, eol, userdata in
                    guard let userdata else { return }
                    let answer = Unmanaged<Answer>.fromOpaque(userdata).takeUnretainedValue()
                    if eol == 0, info != nil { answer.found = true } else { answer.done = true }
                    pa_threaded_mainloop_signal(answer.mainloop, 0)
                }, box.toOpaque())
        else {
            throw .audioFailure(errorText(pa_context_errno(context)))
        }
        defer {
            // No callback runs while the lock is held: after this, none will.
            pa_operation_cancel(op)
            pa_operation_unref(op)
        }
        let deadline = monotonicNanoseconds() &+ timeoutNanoseconds
        while !answer.done {
            guard wait(until: deadline) || answer.done else {
                throw .audioServerStalled("did not say within \(formatSeconds(timeoutNanoseconds)) whether it has a sink named '\(name)'")
            }
        }
        guard answer.found else { throw .audioDeviceNotFound(name) }
    }

    /// The connected context; connects (again) if needed. Lock held.
    package func readyContext() throws(ParlaError) -> OpaquePointer {
        if let unavailable { throw .audioServerUnavailable(reason: unavailable) }
        // Another thread is connecting (`parla say` connects while it reads the text, and the
        // utterance's stream waits for that): its outcome is this one's.
        if connecting {
            let deadline = monotonicNanoseconds() &+ timeoutNanoseconds
            while connecting {
                guard wait(until: deadline) || !connecting else {
                    throw .audioServerStalled("took the connection but did not complete it within \(formatSeconds(timeoutNanoseconds))")
                }
            }
            if let connectFailure { throw connectFailure }
        }
        if let context {
            if pa_context_get_state(context) == PA_CONTEXT_READY { return context }
            pa_context_set_state_callback(context, nil, nil)
            pa_context_disconnect(context)
            pa_context_unref(context)
            self.context = nil
        }
        let props = pa_proplist_new()
        defer { pa_proplist_free(props) }
        pa_proplist_sets(props, "application.name", options.applicationName)
        pa_proplist_sets(props, "application.id", "org.parla")
        pa_proplist_sets(props, "application.icon_name", "audio-speakers")
        guard let ctx = pa_context_new_with_proplist(pa_threaded_mainloop_get_api(mainloop), options.applicationName, props) else {
            throw .audioServerUnavailable(reason: "libpulse could not create a context")
        }
        pa_context_set_state_callback(
            ctx,
            { _, userdata in
                pa_threaded_mainloop_signal(OpaquePointer(userdata), 0)
            }, UnsafeMutableRawPointer(mainloop))
        connecting = true
        connectFailure = nil
        defer {
            connecting = false
            pa_threaded_mainloop_signal(mainloop, 0)
        }
        let flags = pa_context_flags_t(rawValue: PA_CONTEXT_NOAUTOSPAWN.rawValue)
        if pa_context_connect(ctx, options.server, flags, nil) < 0 {
            let error = ParlaError.audioServerUnavailable(reason: errorText(pa_context_errno(ctx)))
            pa_context_unref(ctx)
            connectFailure = error
            throw error
        }
        let deadline = monotonicNanoseconds() &+ timeoutNanoseconds
        while true {
            let state = pa_context_get_state(ctx)
            if state == PA_CONTEXT_READY { break }
            let failed = state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
            if failed || !wait(until: deadline) {
                let error: ParlaError =
                    failed
                    ? .audioServerUnavailable(reason: errorText(pa_context_errno(ctx)))
                    : .audioServerStalled("took the connection but did not complete it within \(formatSeconds(timeoutNanoseconds))")
                pa_context_set_state_callback(ctx, nil, nil)
                pa_context_disconnect(ctx)
                pa_context_unref(ctx)
                connectFailure = error
                throw error
            }
        }
        context = ctx
        return ctx
    }

    /// Opens a playback stream for 16-bit mono audio at `sampleRate`. Returns at once: audio
    /// written before the server has created the stream is sent as soon as it has.
    /// - Throws: ``ParlaError/audioServerUnavailable(reason:)`` if there is no server.
    public func openStream(sampleRate: Int, name: String) throws(ParlaError) -> PlaybackStream {
        try locked { () throws(ParlaError) in
            let ctx = try readyContext()
            if let device = options.device { try requireSink(device, context: ctx) }
            return try PlaybackStream(output: self, context: ctx, sampleRate: sampleRate, name: name)
        }
    }

    /// libpulse's message for `code` (`pa_strerror` returns NULL for codes it does not know).
    /// `nanoseconds` as "3 s" or "0.5 s".
    func formatSeconds(_ nanoseconds: UInt64) -> String {
        let tenths = (nanoseconds + 50_000_000) / 100_000_000
        return tenths % 10 == 0 ? "\(tenths / 10) s" : "\(tenths / 10).\(tenths % 10) s"
    }

    package func errorText(_ code: Int32) -> String {
        pa_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}

/// One utterance's playback stream: audio goes in with ``write(_:)``, and
/// ``playedSamples()`` says how far the listener has heard.
///
/// Unchecked: its `var`s are read and written only with its output's main-loop lock held,
/// by the calling thread or by libpulse's callbacks on the main loop's thread.
public final class PlaybackStream: @unchecked Sendable {
    /// What the stream is doing.
    public enum Status: Sendable, Equatable {
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
    public let sampleRate: Int
    private var pending: [Int16] = []
    private var pendingOffset = 0
    private var inputFinished = false
    private var drainRequested = false
    private var drainOperation: OpaquePointer?
    private var status: Status = .active
    private var isCorked = false
    /// The gain applied to samples as they are handed to the server (linear, 0 to 1).
    private var gain = 1.0
    /// Samples handed to the server so far.
    private var sentSamples = 0
    /// Number of times the server ran out of audio while playing.
    public private(set) var underflows = 0
    /// When the stream was asked for, whether the server has made it, and when its played
    /// position last moved: a server that leaves it waiting fails it (``checkProgress()``).
    private let createdAt = monotonicNanoseconds()
    private var isReady = false
    private var lastPlayed = -1
    private var lastProgressAt: UInt64 = 0
    /// Whether the output's ducker counts this stream as playing.
    private var countedForDucking = false

    /// Lock held by the caller.
    fileprivate init(output: PulseAudioOutput, context: OpaquePointer, sampleRate: Int, name: String) throws(ParlaError) {
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
                Unmanaged<PlaybackStream>.fromOpaque(userdata).takeUnretainedValue().underflows += 1
            }, me)
        // 5 ms to 10 s: outside that a latency is a mistake, and would not fit the server's field.
        let latency =
            Double(output.options.targetLatency.components.seconds) + Double(output.options.targetLatency.components.attoseconds) / 1e18
        let latencyBytes = UInt32(clamping: Int(min(max(latency.isNaN ? 0 : latency, 0.005), 10) * Double(sampleRate)) * 2)
        var attr = pa_buffer_attr(
            maxlength: UInt32.max, tlength: latencyBytes, prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
        let flags = pa_stream_flags_t(
            rawValue:
                PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue)
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
                let g = gain
                let scaled = pending[pendingOffset..<(pendingOffset + count)].map { Int16((Double($0) * g).rounded()) }
                rc = scaled.withUnsafeBufferPointer { buf -> Int32 in
                    guard let base = buf.baseAddress else { return -1 }
                    return pa_stream_write(s, base, count * 2, nil, 0, PA_SEEK_RELATIVE)
                }
            }
            if rc < 0 { break }
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
    public func write(_ samples: [Int16]) throws(ParlaError) {
        try output.locked { () throws(ParlaError) in
            if case .failed(let e) = status { throw e }
            guard case .active = status else { return }
            pending.append(contentsOf: samples)
            pump()
        }
    }

    /// Says that no more audio follows: what is queued plays to the end (the stream starts
    /// even if less than its buffer was written), then the status becomes ``Status/drained``.
    public func finishInput() {
        output.lock()
        defer { output.unlock() }
        inputFinished = true
        pump()
    }

    /// The stream's state.
    public var currentStatus: Status {
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
    public func playedSamples() -> Int? {
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
        var usec: pa_usec_t = 0
        guard pa_stream_get_time(s, &usec) == 0 else { return nil }
        // The server's clock is untrusted: a time beyond what was written is what was written.
        let written = sentSamples + pending.count - pendingOffset
        let (product, overflow) = Int(clamping: usec).multipliedReportingOverflow(by: sampleRate)
        return overflow ? written : min(product / 1_000_000, written)
    }

    /// Samples written but not yet played (0 once the stream is not playing).
    public func samplesAhead() -> Int {
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
    public func discard(from sample: Int, margin: Int) -> Bool {
        output.lock()
        defer { output.unlock() }
        guard stream != nil, case .active = status, !drainRequested else { return false }
        let written = sentSamples + pending.count - pendingOffset
        guard sample >= sentSamples + max(margin, 0), sample <= written else { return false }
        pending.removeSubrange((pendingOffset + sample - sentSamples)...)
        inputFinished = false
        return true
    }

    /// Sets the stream's volume (linear amplitude, 0 to 1) for every sample not yet handed to
    /// the server: the change is heard once the server's buffer (``AudioOutputOptions/targetLatency``)
    /// has played. It is applied to the samples, not through the server's stream volume, which
    /// the server would remember for every later stream of the same role (a screen reader's too).
    public func setVolume(_ volume: Double) {
        output.lock()
        defer { output.unlock() }
        gain = volume.isFinite ? min(max(volume, 0), 1) : 1
    }

    /// Samples written so far.
    public var writtenSamples: Int {
        output.lock()
        defer { output.unlock() }
        return sentSamples + pending.count - pendingOffset
    }

    /// Pauses (true) or resumes (false) playback where it is: the buffered audio is kept.
    public func setCorked(_ corked: Bool) {
        output.lock()
        defer { output.unlock() }
        guard let s = stream, corked != isCorked else { return }
        isCorked = corked
        if let op = pa_stream_cork(s, corked ? 1 : 0, nil, nil) { pa_operation_unref(op) }
        if let op = pa_stream_update_timing_info(s, nil, nil) { pa_operation_unref(op) }
    }

    /// Whether playback is paused.
    public var corked: Bool {
        output.lock()
        defer { output.unlock() }
        return isCorked
    }

    /// Stops at once: the server drops the stream and everything buffered in it.
    public func close() {
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
        if let op = drainOperation {
            pa_operation_cancel(op)
            pa_operation_unref(op)
            drainOperation = nil
        }
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
