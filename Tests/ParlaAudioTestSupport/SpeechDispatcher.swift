import Foundation
import ParlaTestSupport
import Synchronization

/// A private speech-dispatcher: its own configuration directory, socket, pid file, runtime
/// directory and logs, with `sd_parla` (and optionally speechd's own espeak-ng module) as its
/// modules, playing on a private sound server. Killed when released.
public final class TestSpeechDispatcher: Sendable {
    /// Its directory (configuration, socket, logs).
    public let directory: URL
    /// The address clients use (`SPEECHD_ADDRESS`).
    public let address: String
    /// The daemon's process id.
    public let pid: pid_t
    private let exited = Mutex<Bool>(false)

    /// Starts a daemon whose default module is `parla` (the program at `module`).
    public static func start(module: String, audio: TestAudioServer, withESpeakModule: Bool = false) async throws -> TestSpeechDispatcher {
        let dir = try makeTemporaryDirectory()
        let conf = dir.appendingPathComponent("conf")
        try FileManager.default.createDirectory(at: conf.appendingPathComponent("modules"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("log"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("run"), withIntermediateDirectories: true)
        var lines = [
            "AddModule \"parla\" \"\(module)\" \"parla.conf\"",
            "DefaultModule parla",
            "AudioOutputMethod \"pulse\"",
            "AudioPulseDevice \"\(audio.sink)\"",
            "DefaultVolume 100",
            "LogLevel 4",
            "LogDir \"\(dir.appendingPathComponent("log").path)\"",
        ]
        if withESpeakModule { lines.insert("AddModule \"espeak-ng\" \"sd_espeak-ng\" \"espeak-ng.conf\"", at: 1) }
        try (lines.joined(separator: "\n") + "\n").write(to: conf.appendingPathComponent("speechd.conf"), atomically: true, encoding: .utf8)
        try "# Parla needs no settings here.\n".write(to: conf.appendingPathComponent("modules/parla.conf"), atomically: true, encoding: .utf8)
        try "".write(to: conf.appendingPathComponent("modules/espeak-ng.conf"), atomically: true, encoding: .utf8)
        let socket = dir.appendingPathComponent("sock").path
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = dir.appendingPathComponent("run").path
        env["HOME"] = dir.path
        env["PULSE_SERVER"] = audio.server
        env["LANG"] = "C.UTF-8"
        env.removeValue(forKey: "LANGUAGE")
        let pid = try spawnDaemon(
            "/usr/bin/speech-dispatcher",
            ["-s", "-t", "0", "-C", conf.path, "-S", socket, "-P", dir.appendingPathComponent("pid").path, "-L", dir.appendingPathComponent("log").path],
            environment: env)
        let daemon = TestSpeechDispatcher(directory: dir, address: "unix_socket:" + socket, pid: pid)
        let started = Date()
        while !FileManager.default.fileExists(atPath: socket) {
            guard daemon.isRunning, Date().timeIntervalSince(started) < 30 else {
                throw TestAudioServerError(message: "speech-dispatcher did not open \(socket) within 30 s: \(daemon.log("speech-dispatcher").suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return daemon
    }

    private init(directory: URL, address: String, pid: pid_t) {
        self.directory = directory
        self.address = address
        self.pid = pid
    }

    /// Whether it is still running (reaps it once it has exited).
    var isRunning: Bool {
        exited.withLock { done in
            if !done {
                var status: Int32 = 0
                done = waitpid(pid, &status, WNOHANG) == pid
            }
            return !done
        }
    }

    deinit {
        // Its modules first (they would exit anyway once their pipe closes), then the daemon.
        _ = try? runProcess("/usr/bin/pkill", ["-KILL", "-P", String(pid)])
        kill(pid, SIGKILL)
        // Not Process.waitUntilExit: it would hold a thread of the small cooperative pool.
        for _ in 0..<400 where isRunning { usleep(5_000) }
    }

    /// A log the daemon keeps (`speech-dispatcher`, or a module's name such as `parla`).
    public func log(_ name: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent("log/\(name).log"), encoding: .utf8)) ?? ""
    }

    /// Runs `spd-say` against this daemon.
    public func spdSay(_ arguments: [String]) throws -> ProcessResult {
        try runProcess("/usr/bin/spd-say", arguments, environment: ["SPEECHD_ADDRESS": address])
    }
}
