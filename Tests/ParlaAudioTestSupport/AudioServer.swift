import Foundation
@_exported import ParlaTestSupport
@_exported import ParlaTesting
import ParlaPulseAudio
#if canImport(Glibc)
import Glibc
#endif

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
/// Unchecked: it holds `Process`es, which are not Sendable, in `processes` and
/// `sessionManager`, changed only by the start and stop calls a test makes from one task.
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

    /// Starts one of the server's processes, its output kept in `<name>.log` in the runtime
    /// directory for the error a failed start gives.
    private func run(_ path: String, _ arguments: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        p.environment = environment
        let log = logPath(path)
        FileManager.default.createFile(atPath: log, contents: nil)
        let handle = FileHandle(forWritingAtPath: log) ?? FileHandle.nullDevice
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        processes.append(p)
        return p
    }

    private func logPath(_ program: String) -> String {
        directory.appendingPathComponent(URL(fileURLWithPath: program).lastPathComponent + ".log").path
    }

    /// Why a start failed: `what`, and for each of the server's processes that has exited, its
    /// status and the end of its output.
    private func startFailure(_ what: String) -> TestAudioServerError {
        var message = "\(kind) \(what) within \(Int(Self.startLimit)) s"
        for p in processes where !p.isRunning {
            let name = p.executableURL?.lastPathComponent ?? "?"
            let log = (try? String(contentsOfFile: logPath(name), encoding: .utf8)) ?? ""
            let tail = log.split(separator: "\n").suffix(5).joined(separator: " | ")
            message += "; \(name) exited with status \(p.terminationStatus)" + (tail.isEmpty ? "" : ": \(tail)")
        }
        return TestAudioServerError(message: message)
    }

    /// Starts WirePlumber again if it gave up: it exits at once (status 69) when PipeWire's
    /// socket exists but does not yet take connections.
    private func reviveSessionManager() throws {
        guard kind == .pipewire, let p = sessionManager, !p.isRunning else { return }
        processes.removeAll { $0 === p }
        sessionManager = try run("/usr/bin/wireplumber", [])
    }

    /// Waits (up to ``startLimit`` from `launched`) until `path` exists.
    private func waitFor(_ path: String, since launched: Date) async throws {
        while !FileManager.default.fileExists(atPath: path) {
            if Date().timeIntervalSince(launched) > Self.startLimit { throw startFailure("did not create \(path)") }
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
            // A killed PipeWire leaves its sockets behind: a restart that found the old
            // `pipewire-0` would start WirePlumber before the new server listens, and
            // WirePlumber gives up at once (the CI run of 2026-12-01: "pipewire did not start
            // within 45 s" in serverKilledMidUtteranceFailsItAndTheNextReconnects).
            for name in ["pipewire-0", "pipewire-0.lock", "pipewire-0-manager", "pipewire-0-manager.lock"] {
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
            }
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
                try reviveSessionManager()
                if Date().timeIntervalSince(launched) > Self.startLimit { throw startFailure("did not load a null sink (\(r?.error ?? "pactl did not run"))") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        // The socket appears before the null sink is ready: retry until the monitor exists.
        var recorder: PulseAudioRecorder?
        var lastError = "no socket"
        while recorder == nil {
            if Date().timeIntervalSince(launched) > Self.startLimit { throw startFailure("did not let its monitor be recorded (\(lastError))") }
            if FileManager.default.fileExists(atPath: socket) {
                do { recorder = try PulseAudioRecorder(source: sink + ".monitor", server: server) } catch { lastError = "\(error)" }
            }
            if recorder == nil { try reviveSessionManager() }
            if recorder == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        self.recorder = recorder
        try await recorder?.settle()
    }

    /// How long a server may take to start: PipeWire with its session manager took over 15 s
    /// on a 2-core machine busy with the rest of the suite.
    static let startLimit: Double = 45

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

