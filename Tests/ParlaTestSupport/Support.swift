import Foundation
@_exported import ParlaTesting
import ParlaPulseAudio
#if canImport(Glibc)
import Glibc
#endif

/// The result of running a program: exit status and what it printed.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var output: String
    public var error: String
}

/// Runs `executable` with `arguments`, feeding `stdin`, and waits for it.
/// `environment` entries replace the inherited ones (a nil value removes one).
public func runProcess(_ executable: String, _ arguments: [String], stdin: Data? = nil, environment: [String: String?] = [:]) throws -> ProcessResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    if !environment.isEmpty {
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
    }
    let out = Pipe(), err = Pipe(), inp = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = inp
    try p.run()
    if let stdin { inp.fileHandleForWriting.write(stdin) }
    try inp.fileHandleForWriting.close()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    return ProcessResult(status: waitForExit(p), output: String(decoding: o, as: UTF8.self), error: String(decoding: e, as: UTF8.self))
}

/// Waits for `p` to exit and returns its exit status, or minus the signal that killed it (so
/// that a program that handled Ctrl-C and exited with 130 is told apart from one that
/// SIGINT killed, which a shell would also report as 130).
///
/// Not `Process.waitUntilExit()`: under Swift Testing's parallel tests it can wait forever
/// (the child stays a zombie), and it holds a thread of the small cooperative pool.
public func waitForExit(_ p: Process) -> Int32 {
    var status: Int32 = 0
    let pid = p.processIdentifier
    var r: pid_t
    repeat { r = waitpid(pid, &status, 0) } while r < 0 && errno == EINTR
    if r == pid {
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : -(status & 0x7F)
    }
    while p.isRunning { usleep(1_000) }  // Foundation reaped it first
    return p.terminationReason == .uncaughtSignal ? -p.terminationStatus : p.terminationStatus
}

/// Whether the file system under `dir` can make unnamed files (`O_TMPFILE`; not every one can).
public func supportsUnnamedFiles(_ dir: URL) -> Bool {
    let fd = open(dir.path, 0o20_000_000 | O_DIRECTORY | O_WRONLY | O_CLOEXEC, 0o600)
    if fd >= 0 { close(fd) }
    return fd >= 0
}

/// A new empty directory under the system's temporary directory.
public func makeTemporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("parla-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Every file in `dir`, hidden temporaries included, sorted.
public func leftovers(in dir: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
}

/// The sound servers the live tests run against.
public enum SoundServer: String, Sendable, CaseIterable, CustomStringConvertible {
    /// PulseAudio itself.
    case pulseaudio
    /// PipeWire with WirePlumber and PipeWire's pulse server, as most desktops now run.
    case pipewire

    public var description: String { rawValue }
}

/// A private sound server with one null sink, for tests that must prove sound really arrived:
/// ``recorder`` listens to the sink's monitor from the start. PulseAudio, or PipeWire (with a
/// private D-Bus session bus, WirePlumber and pipewire-pulse).
///
/// It runs in its own runtime directory (nothing of the user's sound setup is touched) and is
/// killed when the value is released. A new null sink renders its first two seconds in one
/// block before it follows the latency its clients ask for, so `start()` waits that out
/// (``PulseAudioRecorder/settle(timeout:)``).
public final class TestAudioServer: @unchecked Sendable {
    /// Which server it is.
    public let kind: SoundServer
    /// The runtime directory holding the socket.
    public let directory: URL
    /// The server address for libpulse (`unix:…/native`).
    public let server: String
    /// The null sink's name.
    public let sink = "parla_test"
    private var processes: [Process] = []
    private var sessionManager: Process?
    /// Records the sink's monitor.
    public private(set) var recorder: PulseAudioRecorder!

    /// Starts a server (reusing `directory` when given, so a restarted server has the same address).
    public static func start(_ kind: SoundServer = .pulseaudio) async throws -> TestAudioServer {
        let server = TestAudioServer(kind: kind, directory: try makeTemporaryDirectory())
        try await server.launch()
        return server
    }

    private init(kind: SoundServer, directory: URL) {
        self.kind = kind
        self.directory = directory
        let socket = kind == .pulseaudio ? "native" : "pulse/native"
        self.server = "unix:" + directory.appendingPathComponent(socket).path
    }

    /// The environment of the server's processes: everything in the runtime directory.
    private var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = directory.path
        env["HOME"] = directory.path
        env["XDG_CONFIG_HOME"] = directory.appendingPathComponent("config").path
        env["XDG_STATE_HOME"] = directory.appendingPathComponent("state").path
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=" + directory.appendingPathComponent("bus").path
        env.removeValue(forKey: "PULSE_SERVER")
        return env
    }

    private func run(_ path: String, _ arguments: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        p.environment = environment
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        processes.append(p)
        return p
    }

    /// Waits (up to 15 s from `launched`) until `path` exists.
    private func waitFor(_ path: String, since launched: Date) async throws {
        while !FileManager.default.fileExists(atPath: path) {
            if Date().timeIntervalSince(launched) > 15 { throw TestAudioServerError(message: "\(kind) did not create \(path) within 15 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    private func launch() async throws {
        let launched = Date()
        let socket = String(server.dropFirst("unix:".count))
        try? FileManager.default.removeItem(atPath: socket)
        chmod(directory.path, 0o700)
        switch kind {
        case .pulseaudio:
            _ = try run("/usr/bin/pulseaudio", [
                "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--system=no", "--disallow-exit",
                "--disable-shm=yes", "--log-level=error",
                "-L", "module-native-protocol-unix socket=\(socket) auth-anonymous=1",
                "-L", "module-null-sink sink_name=\(sink) rate=22050 channels=1",
            ])
        case .pipewire:
            let bus = directory.appendingPathComponent("bus").path
            try? FileManager.default.removeItem(atPath: bus)
            _ = try run("/usr/bin/dbus-daemon", ["--session", "--nofork", "--nopidfile", "--address=unix:path=\(bus)"])
            try await waitFor(bus, since: launched)
            _ = try run("/usr/bin/pipewire", [])
            try await waitFor(directory.appendingPathComponent("pipewire-0").path, since: launched)
            sessionManager = try run("/usr/bin/wireplumber", [])
            _ = try run("/usr/bin/pipewire-pulse", [])
            try await waitFor(socket, since: launched)
            // The null sink, once the pulse server takes commands.
            while true {
                let r = try? await offPool { [server, sink] in
                    try runProcess("/usr/bin/pactl", ["-s", server, "load-module", "module-null-sink", "sink_name=\(sink)", "rate=22050", "channels=1"])
                }
                if r?.status == 0 { break }
                if Date().timeIntervalSince(launched) > 15 { throw TestAudioServerError(message: "pipewire-pulse did not load a null sink within 15 s: \(r?.error ?? "")") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        // The socket appears before the null sink is ready: retry until the monitor exists.
        var recorder: PulseAudioRecorder?
        while recorder == nil {
            if Date().timeIntervalSince(launched) > 15 { throw TestAudioServerError(message: "\(kind) did not start within 15 s") }
            if FileManager.default.fileExists(atPath: socket) {
                recorder = try? PulseAudioRecorder(source: sink + ".monitor", server: server)
            }
            if recorder == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        self.recorder = recorder
        try await recorder?.settle()
    }

    /// Freezes the session manager (WirePlumber; PipeWire only), as a wedged desktop session
    /// does: the server still takes connections and streams, and links nothing.
    public func wedgeSessionManager() {
        if let p = sessionManager { Glibc.kill(p.processIdentifier, SIGSTOP) }
    }

    /// Lets a wedged session manager go on.
    public func resumeSessionManager() {
        if let p = sessionManager { Glibc.kill(p.processIdentifier, SIGCONT) }
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    public func kill() {
        recorder?.stop()
        // Not Process.waitUntilExit: it would hold a thread of the small cooperative pool.
        for p in processes.reversed() {
            let pid = p.processIdentifier
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            for _ in 0..<400 where p.isRunning {
                if waitpid(pid, &status, WNOHANG) != 0 { break }
                usleep(5_000)
            }
        }
        processes = []
        sessionManager = nil
    }

    /// Starts the server again at the same address.
    public func restart() async throws {
        kill()
        try await launch()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }
}

struct TestAudioServerError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// SplitMix64: a seeded generator, so "random" test input is the same on every run.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs blocking work (waiting for a process) on a thread of its own, so that tests running in
/// parallel do not starve Swift's small cooperative thread pool (2 threads on a 2-core machine)
/// and stall each other's timing.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// The exit status of `p` (see ``waitForExit(_:)``), waited for off the cooperative pool.
public func exitStatus(_ p: Process) async -> Int32 {
    (try? await offPool { waitForExit(p) }) ?? Int32.min
}
