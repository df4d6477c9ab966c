import FoundationEssentials
import ParlaIO
internal import CParlaEngineDriver
internal import CParlaEngineHost
internal import CParlaProcess
import ParlaCore
#if canImport(Glibc)
    import Glibc
#endif

/// espeak-ng in a process of its own: the small `parla-engine` program beside this one (or in
/// `../libexec/parla/`, or at `PARLA_ENGINE`), else this program started again with
/// `PARLA_ENGINE_HOST=1`, whose C constructor runs the same loop before `main`
/// (`CParlaEngineHost`). The helper is a few milliseconds faster to start: it loads no Swift.
///
/// Parla sends it one run at a time (``EngineMessage``) on its standard input and reads the
/// audio and raw engine events it reports on its standard output; ``TimelineBuilder``
/// repairs those events as it would in-process. If the host dies (espeak-ng 1.51 can crash on
/// some texts) or stops answering, the run fails with an error saying so, and the next run
/// starts a new host. Used from one thread at a time (the engine's).
final class EngineHost: RunEngine {
    private var pid: pid_t = 0
    private var toHost: Int32 = -1
    private var fromHost: Int32 = -1
    /// Reads the host's messages from `fromHost`.
    private var reader = MessageReader(fd: -1)
    private var sampleRate: Int?
    private var seq: UInt32 = 0
    /// The utterance being spoken, and whether its child (in the host) has died.
    private var utterance: UInt32 = 0
    private var utteranceCrashed: UInt32?
    /// The run sent with the utterance's BEGIN, until it is spoken (or dropped).
    private var queued: UInt32?
    /// How long the host may stay silent while it speaks before it is given up.
    static let timeout: Int32 = 15_000
    /// How long it may take to load a Piper voice: a first load prepares the voice's copies
    /// (ONNX Runtime's optimizations of a 60 MB model), which took over 15 s on a 2-core
    /// machine busy with other work.
    static let loadTimeout: Int32 = 60_000

    /// Never blocks: closing its input ends the host, and a thread of its own reaps it. (A
    /// deinit that waited for it, run when an engine actor was released on a cooperative
    /// thread, crashed the Swift concurrency runtime under load: 4 runs in 4 of one test.)
    deinit {
        if toHost >= 0 { close(toHost) }
        if fromHost >= 0 { close(fromHost) }
        guard pid > 0 else { return }
        let child = pid
        startThread(name: "parla.reap-engine-host") {
            waitForExit(child)
        }
    }

    /// The host's process id, nil while none runs.
    var processID: pid_t? { pid > 0 ? pid : nil }

    /// Ends the host: closing its input makes it exit.
    func stop() { shutDown(gracefully: true) }

    /// Starts the host process unless it runs, without waiting for it to load espeak-ng:
    /// ``start()`` waits. (The host loads while this program gets ready to speak.)
    func launch() throws(ParlaError) {
        if pid == 0 { try spawn() }
    }

    func start() throws(ParlaError) -> Int {
        if let sampleRate, pid > 0 { return sampleRate }
        try launch()
        guard let (type, payload) = receive(), type == EngineMessage.ready.rawValue else {
            throw failure(while: "loading")
        }
        var r = PayloadReader(payload)
        let version = r.u32()
        let rate = Int(r.i32())
        guard version == UInt32(PARLA_ENGINE_PROTOCOL) else {
            shutDown()
            throw .engineUnavailable(
                "parla-engine",
                reason:
                    "the engine host \(executable ?? "") speaks version \(version) of its protocol, and this program version \(PARLA_ENGINE_PROTOCOL): install the parla-engine of the same Parla as this program"
            )
        }
        guard rate > 0 else {
            let reason = String(decoding: r.rest(), as: UTF8.self)
            shutDown()
            throw .engineUnavailable("espeak-ng", reason: reason.isEmpty ? "espeak-ng could not be initialised" : reason)
        }
        sampleRate = rate
        return rate
    }

    func installedVoices() throws(ParlaError) -> [String] {
        _ = try start()
        var w = MessageWriter()
        w.message(.listVoices) { _ in }
        guard w.write(to: toHost), let (type, payload) = receive(), type == EngineMessage.voiceList.rawValue else {
            throw failure(while: "listing voices")
        }
        return String(decoding: payload, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Tells the host an utterance begins, and sends it `first`, the utterance's first run,
    /// if given. It need not have loaded yet: it reads the messages once it has, so its child
    /// speaks the first run while this side waits for `READY` (no round trip between the host
    /// being ready and the first sound). ``speak(_:shouldStop:audio:event:)`` must then be
    /// given that run first; if it is not, ``endUtterance()`` stops the run and drops what
    /// it made. If the host could not load, ``start()``'s error is the one thrown.
    func beginUtterance(first: RunRequest?) throws(ParlaError) {
        try launch()
        utterance &+= 1
        utteranceCrashed = nil
        var w = MessageWriter()
        let id = utterance
        w.message(.begin) { $0.u32(id) }
        if let first {
            seq &+= 1
            queued = seq
            w.speak(first, seq: seq)
        }
        let sent = w.write(to: toHost)
        if sampleRate == nil { _ = try start() }
        guard sent else { throw failure(while: "starting an utterance") }
    }

    /// The Piper voices the host process has loaded, oldest first (cleared with a new host): it
    /// keeps `PARLA_ENGINE_PIPER_SLOTS`, the oldest going first, and so does this list, so that
    /// a voice it let go is loaded there again, not by every child that speaks with it.
    private var preloaded: [String] = []

    func prepare(voices: [String]) throws(ParlaError) {
        var piper: [String] = []
        for voice in voices where voice.hasPrefix(piperVoicePrefix) && !preloaded.contains(voice) && !piper.contains(voice) {
            piper.append(voice)
        }
        guard !piper.isEmpty else { return }
        _ = try start()  // READY first
        var w = MessageWriter()
        for voice in piper {
            let path = Array(voice.utf8.dropFirst(piperVoicePrefix.utf8.count))
            w.message(.preload) { m in path.withUnsafeBytes { m.raw($0) } }
        }
        guard w.write(to: toHost) else { throw failure(while: "loading a voice") }
        // Each is answered once loaded (a first load of joe: about 0.45 s); all answers are read
        // before a voice that failed is reported, so none is left for the next message.
        var failed: ParlaError?
        for voice in piper {
            guard let (type, payload) = receive(timeout: Self.loadTimeout), type == EngineMessage.preloaded.rawValue else {
                throw failure(while: "loading a Piper voice")
            }
            var r = PayloadReader(payload)
            let status = r.u32()
            guard status == 1 else {
                failed = failed ?? .runFailed(Int32(bitPattern: status), voice: voice, reason: String(decoding: r.rest(), as: UTF8.self))
                continue
            }
            preloaded.append(voice)
            if preloaded.count > Int(PARLA_ENGINE_PIPER_SLOTS) { preloaded.removeFirst() }
        }
        if let failed { throw failed }
    }

    func endUtterance() {
        if let run = queued {
            // Sent with BEGIN and never asked for: stopped, and what it made is read and dropped.
            queued = nil
            do throws(ParlaError) { try receive(run: run, voice: "", shouldStop: { true }, audio: { _ in }, event: { _ in }) } catch {}
        }
        guard toHost >= 0, utteranceCrashed == nil else { return }
        var w = MessageWriter()
        w.message(.finish) { _ in }
        if !w.write(to: toHost) { shutDown() }
    }

    func speak(
        _ run: RunRequest, shouldStop: () -> Bool,
        audio: ([Int16]) -> Void, event: (RawEngineEvent) -> Void
    ) throws(ParlaError) {
        _ = try start()
        let mine: UInt32
        if let run = queued {
            mine = run  // sent with BEGIN
            queued = nil
        } else {
            seq &+= 1
            mine = seq
            var w = MessageWriter()
            w.speak(run, seq: mine)
            guard w.write(to: toHost) else { throw failure(while: "speaking") }
        }
        try receive(run: mine, voice: run.voice, shouldStop: shouldStop, audio: audio, event: event)
    }

    /// Reads what the host reports of run `mine` until its end, sending it a stop once
    /// `shouldStop` says so (and dropping what comes after that).
    private func receive(
        run mine: UInt32, voice: String, shouldStop: () -> Bool,
        audio: ([Int16]) -> Void, event: (RawEngineEvent) -> Void
    ) throws(ParlaError) {
        var stopSent = false
        while true {
            if !stopSent, shouldStop() {
                var s = MessageWriter()
                s.message(.stop) { $0.u32(mine) }
                stopSent = true
                guard s.write(to: toHost) else { throw failure(while: "stopping") }
            }
            guard let (type, payload) = receive() else { throw failure(while: "speaking") }
            switch EngineMessage(rawValue: type) {
            case .audio:
                guard !stopSent else { continue }
                let samples = [Int16](unsafeUninitializedCapacity: payload.count / 2) { buffer, count in
                    payload.withUnsafeBytes { raw in
                        UnsafeMutableRawBufferPointer(buffer).copyMemory(
                            from: UnsafeRawBufferPointer(rebasing: raw[0..<(payload.count / 2 * 2)]))
                    }
                    count = payload.count / 2
                }
                audio(samples)
            case .event:
                guard !stopSent else { continue }
                var r = PayloadReader(payload)
                let kind = Int32(r.u8())
                let e = (position: r.i32(), length: r.i32(), sample: r.i32())
                if r.isValid, let raw = RawEngineEvent(kind: kind, position: e.position, length: e.length, sample: e.sample) {
                    event(raw)
                }
            case .phonemes:
                guard !stopSent else { continue }
                var r = PayloadReader(payload)
                let position = r.i32()
                if r.isValid { event(RawEngineEvent(position: position, phonemes: r.rest())) }
            case .done:
                var r = PayloadReader(payload)
                let done = r.u32()
                let status = r.i32()
                guard done == mine else { continue }  // the end of a run stopped earlier
                if stopSent || shouldStop() { throw .cancelled }
                let why = String(decoding: r.rest(), as: UTF8.self)
                switch status {
                case Int32(PARLA_RUN_OK): return
                case Int32(PARLA_RUN_UNKNOWN_VOICE): throw .unknownEngineVoice(voice)
                case Int32(PARLA_RUN_STOPPED): throw .cancelled
                default:
                    throw .runFailed(
                        status, voice: voice, reason: why.isEmpty ? "\(ParlaError.engine(of: voice)) could not speak this text" : why)
                }
            case .crashed:
                var r = PayloadReader(payload)
                let (id, signal) = (r.u32(), Int32(bitPattern: r.u32()))
                guard id == utterance else { continue }  // an earlier utterance's child
                utteranceCrashed = UInt32(bitPattern: signal)
                let how = signal == 0 ? "failed" : "crashed (\(strsignal(signal).map { String(cString: $0) } ?? "signal \(signal)"))"
                let engine = ParlaError.engine(of: voice)
                throw .engineCrashed(
                    engine, reason: "\(engine) \(how) while speaking this text (the next utterance is spoken by a fresh copy of the engine)"
                )
            default:
                shutDown()
                throw .engineFailure("the engine host sent a message Parla does not understand (type \(type))", engine: "parla-engine")
            }
        }
    }

    // MARK: The process

    /// The `parla-engine` program to start, nil to start this program as the host.
    private var executable: String? { Self.program }

    /// The `parla-engine` program engine hosts are started from, nil for this program.
    package static var program: String? {
        if let value = getenv("PARLA_ENGINE"), value.pointee != 0 {
            let path = String(cString: value)
            return path == "self" ? nil : path
        }
        // Inside another program (libparla), beside the library or in its prefix's libexec.
        if let beside = InstallLocation.engineCandidates().first(where: { access($0, X_OK) == 0 }) { return beside }
        guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        let dir = exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return [dir + "/parla-engine", dir + "/../libexec/parla/parla-engine"].first { access($0, X_OK) == 0 }
    }

    private func spawn() throws(ParlaError) {
        shutDown()
        let quiet = getenv("PARLA_ENGINE_DEBUG") == nil
        // Built by SwiftPM, even parla-engine loads the Swift runtime, whose crash handler
        // would catch a crash of espeak-ng and, for a signal sent by kill, let it go on.
        var prestarted: (pid: Int32, input: Int32, output: Int32) = (0, -1, -1)
        let child: ChildProcess
        if parla_take_prestarted_host(&prestarted.pid, &prestarted.input, &prestarted.output) == 1 {
            // Forked before main by the parla or speak-selection program (CParlaPrestart).
            child = ChildProcess(pid: prestarted.pid, input: prestarted.input, output: prestarted.output)
        } else if let path = executable {
            child = try ChildProcess.spawn(
                executable: path, role: "parla engine host", environment: ["SWIFT_BACKTRACE": "enable=no"], stderrToNull: quiet)
        } else {
            child = try ChildProcess.spawnSelf(
                role: "parla engine host", environment: ["PARLA_ENGINE_HOST": "1:\(getpid())", "SWIFT_BACKTRACE": "enable=no"],
                stderrToNull: quiet)
        }
        pid = child.pid
        toHost = child.input
        fromHost = child.output
        reader = MessageReader(fd: child.output)
        sampleRate = nil
        preloaded = []
    }

    /// Reads and drops what `fd` still delivers until its end, or until `milliseconds` pass.
    private static func drainToEnd(_ fd: Int32, milliseconds: Int) {
        guard fd >= 0 else { return }
        let deadline = monotonicNanoseconds() + UInt64(max(0, milliseconds)) * 1_000_000
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = monotonicNanoseconds()
            guard now < deadline else { return }
            let left = Int((deadline - now) / 1_000_000) + 1
            var fds = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let rc = poll(&fds, 1, Int32(left))
            if rc < 0 && errno == EINTR { continue }
            guard rc > 0 else { return }
            let n = buffer.withUnsafeMutableBytes { readSome(fd, into: $0) }
            if n <= 0 { return }
        }
    }

    /// The next message, nil if the host is gone or silent for longer than ``timeout``. The
    /// payload is a slice of the reader's buffer, valid until the next call.
    private func receive(timeout: Int32 = EngineHost.timeout) -> (type: UInt8, payload: ArraySlice<UInt8>)? {
        guard fromHost >= 0 else { return nil }
        while true {
            if let message = reader.next() { return message }
            var fds = pollfd(fd: fromHost, events: Int16(POLLIN), revents: 0)
            var rc: Int32
            repeat { rc = poll(&fds, 1, timeout) } while rc < 0 && errno == EINTR
            guard rc > 0, reader.fill() else { return nil }
        }
    }

    /// Ends the host and describes what happened to it, for an error about `activity`.
    private func failure(while activity: String) -> ParlaError {
        let how = shutDown()
        return .engineCrashed("parla-engine", reason: "espeak-ng \(how) while \(activity) (the next utterance starts it again)")
    }

    /// Kills and reaps the host if it runs; says how it ended.
    @discardableResult
    private func shutDown(gracefully: Bool = false) -> String {
        guard pid > 0 else { return "is not running" }
        if toHost >= 0 { close(toHost) }
        // Closing its input ends the host; its output reaches its end as the host exits, which
        // is the moment to reap it (no sleeping in steps: this is on the path of every exit).
        Self.drainToEnd(fromHost, milliseconds: gracefully ? 500 : 100)
        if fromHost >= 0 { close(fromHost) }
        toHost = -1
        fromHost = -1
        sampleRate = nil
        queued = nil
        var status: Int32 = 0
        let reaped = parla_reap_within(pid, 10, &status)
        if reaped == 0 {
            // Still alive: silent for too long, or asked to stop by closing its input.
            kill(pid, SIGKILL)
            _ = waitForExit(pid)
            pid = 0
            return "stopped answering"
        }
        pid = 0
        let signal = status & 0x7F
        if reaped > 0, signal != 0 {
            let name = strsignal(signal).map { String(cString: $0) } ?? "signal \(signal)"
            return "crashed (\(name))"
        }
        return "exited"
    }
}

extension MessageWriter {
    /// A `SPEAK` message: run `seq`, its flags, prosody and voice, then its text.
    mutating func speak(_ run: RunRequest, seq: UInt32) {
        message(.speak) { w in
            w.u32(seq)
            w.u32(run.flags)
            for v in [run.rate, run.pitch, run.volume, run.punctuation] { w.i32(v) }
            let voice = Array(run.voice.utf8.prefix(Int(UInt16.max)))
            w.u8(UInt8(truncatingIfNeeded: voice.count))
            w.u8(UInt8(truncatingIfNeeded: voice.count >> 8))
            voice.withUnsafeBytes { w.raw($0) }
            Array(run.text.utf8).withUnsafeBytes { w.raw($0) }
        }
    }
}

extension SynthesisEngine {
    /// The voice the engine host has loaded before its first utterance (a first run in it
    /// starts sooner): Parla's voice for English.
    package static var firstVoice: String { PARLA_ENGINE_FIRST_VOICE }
    /// That voice's file under espeak-ng-data/lang, which the host loads it from.
    package static var firstVoiceFile: String { PARLA_ENGINE_FIRST_VOICE_FAMILY + "/" + PARLA_ENGINE_FIRST_VOICE }
}
