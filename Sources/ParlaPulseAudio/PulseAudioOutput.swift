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
package final class PulseAudioOutput: @unchecked Sendable {
    /// The options the output was created with.
    package let options: AudioOutputOptions
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
    package init(options: AudioOutputOptions = AudioOutputOptions()) {
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
    package func connect() throws(ParlaError) {
        try locked { () throws(ParlaError) in _ = try readyContext() }
    }

    /// ``AudioOutputOptions/serverTimeout`` in nanoseconds.
    var timeoutNanoseconds: UInt64 {
        UInt64(clamping: max(0, options.serverTimeout.wholeNanoseconds))
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
    package func openStream(sampleRate: Int, name: String) throws(ParlaError) -> PlaybackStream {
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
