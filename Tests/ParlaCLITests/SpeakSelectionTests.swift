import Foundation
import ParlaIO
import ParlaCore
import ParlaPulseAudio
import ParlaAudioTestSupport
import Testing

/// A private X server (Xvfb) for selection tests.
/// Unchecked: it holds Xvfb's `Process`, which is not Sendable; it is started in `init` and
/// only ended (once) by `deinit`.
final class TestDisplay: @unchecked Sendable {
    let display: String
    private let process: Process

    init() async throws {
        // -displayfd: Xvfb picks a free display number and writes it to standard output.
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        process.arguments = ["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "640x480x24"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !text.contains("\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        display = ":" + text.filter(\.isNumber)
    }

    /// Makes `text` the PRIMARY selection (xclip keeps serving it in the background).
    func select(_ text: String, selection: String = "primary") throws {
        let file = try makeTemporaryDirectory().appendingPathComponent("selection.txt")
        try Data(text.utf8).write(to: file)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/xclip")
        p.arguments = ["-selection", selection, "-i", file.path]
        p.environment = ["DISPLAY": display, "PATH": "/usr/bin:/bin"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        _ = waitForExit(p)  // xclip's parent exits at once; its child serves the selection
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        var status: Int32 = 0
        waitpid(process.processIdentifier, &status, 0)
    }
}

@Suite("speak-selection", .serialized)
struct SpeakSelectionTests {
    static var binary: String {
        URL(fileURLWithPath: CLITests.binary).deletingLastPathComponent().appendingPathComponent("speak-selection").path
    }

    /// The environment of one user session: its display, sound server, runtime and config dirs.
    struct Session {
        var server: TestAudioServer
        var display: TestDisplay?
        var home: URL

        var environment: [String: String?] {
            [
                "DISPLAY": display?.display, "WAYLAND_DISPLAY": nil, "PULSE_SERVER": server.server,
                "XDG_RUNTIME_DIR": home.path, "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                "LANG": "C.UTF-8", "LANGUAGE": nil,
                // No accessibility bus unless a test starts one (AccessibleApp).
                "DBUS_SESSION_BUS_ADDRESS": nil, "AT_SPI_BUS_ADDRESS": nil,
            ]
        }

        static func start(display: Bool = true) async throws -> Session {
            Session(
                server: try await TestAudioServer.start(), display: display ? try await TestDisplay() : nil,
                home: try makeTemporaryDirectory())
        }

        /// Each source may take 3 s here instead of 50 ms: on a machine busy with the rest of
        /// the suite, starting xclip alone can take longer than that.
        static func slowMachine(_ args: [String]) -> [String] {
            args.contains("--timeout") || args.contains("--stop") ? args : ["--timeout", "3000"] + args
        }

        func run(_ args: [String] = [], stdin: Data? = nil, environment extra: [String: String?] = [:]) async throws -> ProcessResult {
            var env = environment
            for (k, v) in extra { env[k] = v }
            let environment = env
            return try await offPool {
                try runProcess(SpeakSelectionTests.binary, Session.slowMachine(args), stdin: stdin, environment: environment)
            }
        }

        /// Starts speak-selection without waiting for it; what it prints on standard error goes
        /// to `launchLog(of:)`, for the message of a failed expectation.
        func launch(_ args: [String] = []) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: SpeakSelectionTests.binary)
            p.arguments = Session.slowMachine(args)
            var env = ProcessInfo.processInfo.environment
            for (k, v) in environment { env[k] = v }
            p.environment = env
            p.standardInput = FileHandle.nullDevice
            p.standardOutput = FileHandle.nullDevice
            let log = home.appendingPathComponent("launched-\(UUID().uuidString).log")
            FileManager.default.createFile(atPath: log.path, contents: nil)
            p.standardError = try FileHandle(forWritingTo: log)
            try p.run()
            try FileManager.default.moveItem(at: log, to: launchLogURL(p))  // open: it goes on being written
            return p
        }

        /// What a process started by `launch` has printed on standard error so far.
        func launchLog(of p: Process) -> String {
            (try? String(contentsOf: launchLogURL(p), encoding: .utf8)) ?? ""
        }

        private func launchLogURL(_ p: Process) -> URL {
            home.appendingPathComponent("launched-\(p.processIdentifier).log")
        }

        /// Waits until the monitor has heard something after `time`.
        func waitForSound(after time: UInt64, timeout: Double = 10) async throws -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if server.recorder.loudSampleTimes(after: time).count > 500 { return true }
                try await Task.sleep(for: .milliseconds(10))
            }
            return false
        }
    }

    @Test func threeLanguageSelectionIsSpokenWithThreeVoices() async throws {
        let s = try await Session.start()
        try s.display!.select("Hello world. مرحبا بالعالم. Καλημέρα κόσμε.")
        let r = try await s.run()
        #expect(r.status == 0, "\(r.error)")
        #expect(r.error.contains("Languages: en, ar, el"))
        // Three stretches of speech (one per language), separated by the sentence pauses.
        let loud = s.server.recorder.loudSampleTimes()
        #expect(loud.count > 10_000)
        let pauses = zip(loud, loud.dropFirst()).filter { $1 - $0 > 150_000_000 }.count
        #expect(pauses >= 2)
        // The settings file was created with every setting commented out.
        let conf = try String(contentsOf: s.home.appendingPathComponent("config/parla/speak-selection.conf"), encoding: .utf8)
        #expect(conf.contains("# rate = 175"))
    }

    @Test func secondInvocationStopsTheFirst() async throws {
        let s = try await Session.start()
        // About 40 s of speech: on a loaded machine the second process may take seconds to
        // start, and the first must still be speaking then (it is stopped, so this costs nothing).
        let count = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen. "
        try s.display!.select(String(repeating: count, count: 8))
        let started = monotonicNanoseconds()
        let first = try s.launch()
        #expect(try await s.waitForSound(after: started), "\(s.launchLog(of: first))")
        let r = try await s.run()
        // Timed from the second process's exit (it exits right after signalling), not its
        // start, which a loaded test machine may delay; scripts/bench-selection measures from
        // the start.
        let second = monotonicNanoseconds()
        #expect(r.status == 0)
        #expect(r.error.contains("Stopped the speech in progress"))
        #expect(await exitStatus(first) == 130)
        try await Task.sleep(for: .milliseconds(300))
        #expect(s.server.recorder.loudSampleTimes(after: second + 150_000_000).count < 50)
        // No stale lock: the next invocation speaks.
        try s.display!.select("Again.")
        let again = try await s.run()
        #expect(again.status == 0)
        #expect(again.error.contains("Languages: en"))
    }

    @Test func queueWaitsForTheFirstAndKillNineLeavesNoStaleLock() async throws {
        let s = try await Session.start()
        try s.display!.select("First sentence here.")
        let first = try s.launch()
        #expect(try await s.waitForSound(after: 0), "\(s.launchLog(of: first))")
        try s.display!.select("Second one.")
        let r = try await s.run(["--queue"])
        let firstStatus = await exitStatus(first)
        #expect(r.status == 0, "\(r.error)")
        #expect(firstStatus == 0)  // it was not stopped: the second waited its turn

        // kill -9 while speaking, then --stop finds nothing speaking (the kernel dropped the lock).
        try s.display!.select("One two three four five six seven eight nine ten eleven twelve.")
        let t = monotonicNanoseconds()
        let victim = try s.launch()
        #expect(try await s.waitForSound(after: t), "\(s.launchLog(of: victim))")
        kill(victim.processIdentifier, SIGKILL)
        _ = await exitStatus(victim)
        let stop = try await s.run(["--stop"])
        #expect(stop.status == 0)
        #expect(stop.error.contains("Nothing is speaking"))
    }

    /// A press while the previous speak-selection has taken the lock but is still starting
    /// stops it: who holds the lock comes from the kernel, not from a file the holder has yet to
    /// write. (Here the holder is a process that takes the lock and writes nothing.)
    @Test func aPressWhileThePreviousOneIsStartingStopsIt() async throws {
        let s = try await Session.start(display: false)
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")  // not a shim that forks it
        holder.arguments = [
            "-c",
            // SIGTERM as a speaker has it (the test process may leave it ignored or blocked).
            "import fcntl, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_DFL); "
                + "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM]); f = open(sys.argv[1], 'a'); "
                + "fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
            s.home.appendingPathComponent("parla-speak-selection.lock").path,
        ]
        let out = Pipe()
        holder.standardOutput = out
        try holder.run()
        let locked = try await offPool { String(decoding: out.fileHandleForReading.availableData, as: UTF8.self) }
        #expect(locked.hasPrefix("locked"))
        let stop = try await s.run(["--stop"])
        #expect(stop.status == 0, "\(stop.error)")
        #expect(stop.error.contains("Stopped the speech in progress"))
        #expect(await exitStatus(holder) == -SIGTERM)
        let again = try await s.run(["--stop"])
        #expect(again.error.contains("Nothing is speaking"))
    }

    @Test func nothingSelected() async throws {
        let s = try await Session.start()
        let r = try await s.run()
        #expect(r.status == 1)
        #expect(r.error.contains("Nothing selected"))
        #expect(s.server.recorder.loudSampleTimes().count > 1000)  // it says so, too
    }

    @Test func withoutADisplayStandardInputOrAClearError() async throws {
        let s = try await Session.start(display: false)
        let piped = try await s.run([], stdin: Data("Piped text is spoken.".utf8))
        #expect(piped.status == 0, "\(piped.error)")
        #expect(piped.error.contains("Languages: en"))
        let p = try s.launch()  // standard input is /dev/null: not piped
        #expect(await exitStatus(p) != 0)
        let env = s.environment
        let r = try await offPool { try runProcess("/bin/sh", ["-c", "\(SpeakSelectionTests.binary) </dev/null"], environment: env) }
        #expect(r.status != 0)
        #expect(r.error.contains("no X display, Wayland session or accessibility bus"))
        #expect(!r.error.contains("Usage:"))
    }

    /// Runs speak-selection with standard input an open pipe that gets `written` and is never
    /// closed (as some launchers give), killing it after 20 s. Returns its status and stderr.
    func runWithOpenPipe(_ s: Session, _ args: [String] = [], written: String = "") async throws -> (status: Int32, error: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: SpeakSelectionTests.binary)
        p.arguments = Session.slowMachine(args)
        var env = ProcessInfo.processInfo.environment
        for (k, v) in s.environment { env[k] = v }
        p.environment = env
        let input = Pipe(), errors = Pipe()
        p.standardInput = input
        p.standardOutput = FileHandle.nullDevice
        p.standardError = errors
        try p.run()
        if !written.isEmpty { input.fileHandleForWriting.write(Data(written.utf8)) }
        let pid = p.processIdentifier
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            kill(pid, SIGKILL)
        }
        let status = await exitStatus(p)
        watchdog.cancel()
        let error = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        try input.fileHandleForWriting.close()
        return (status, error)
    }

    /// An open pipe is not waited for: empty, it is "Nothing selected" at once; with text in it,
    /// that text is spoken without waiting for the pipe to close. The selection comes first,
    /// unless '-' asks for standard input.
    @Test func anOpenPipeIsNeverWaitedFor() async throws {
        let s = try await Session.start()
        let empty = try await runWithOpenPipe(s)
        #expect(empty.status == 1, "\(empty.error)")  // not killed by the watchdog
        #expect(empty.error.contains("Nothing selected"))

        let piped = try await runWithOpenPipe(s, written: "Καλημέρα σας.")
        #expect(piped.status == 0, "\(piped.error)")
        #expect(piped.error.contains("Languages: el"))

        try s.display!.select("Hello there.")
        let selected = try await s.run([], stdin: Data("Καλημέρα σας.".utf8))
        #expect(selected.error.contains("Languages: en"), "\(selected.error)")
        let dash = try await s.run(["-"], stdin: Data("Καλημέρα σας.".utf8))
        #expect(dash.status == 0, "\(dash.error)")
        #expect(dash.error.contains("Languages: el"), "\(dash.error)")
        let wrong = try await s.run(["hello"])
        #expect(wrong.status != 0 && wrong.error.contains("only '-'"), "\(wrong.error)")
    }

    /// A directory of stub tools: `notify-send` records its arguments in `notified`, and
    /// `wl-paste` runs `wlPaste` (if given).
    func stubTools(wlPaste: String?) throws -> URL {
        let dir = try makeTemporaryDirectory()
        var tools = ["notify-send": "echo \"$@\" >> '\(dir.path)/notified'"]
        if let wlPaste { tools["wl-paste"] = wlPaste }
        for (name, body) in tools {
            // Written with O_CLOEXEC: a process that another test spawns meanwhile must not
            // keep it open for writing, or running it fails with "Text file busy" (seen once).
            let path = dir.appendingPathComponent(name).path
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
            guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            let bytes = Array("#!/bin/sh\n\(body)\n".utf8)
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard written == bytes.count else { throw POSIXError(.EIO) }
        }
        return dir
    }

    /// `--notify` shows the text being spoken in a desktop notification (notify-send, started
    /// while the speech starts), and the speech is heard.
    @Test func notifyShowsTheSpokenText() async throws {
        let s = try await Session.start(display: false)
        let tools = try stubTools(wlPaste: nil)
        let path = tools.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let r = try await s.run(["--notify", "-"], stdin: Data("Notified and spoken.".utf8), environment: ["PATH": path])
        #expect(r.status == 0, "\(r.error)")
        let notified = try String(contentsOf: tools.appendingPathComponent("notified"), encoding: .utf8)
        #expect(notified == "--app-name=Parla Parla Notified and spoken.\n", "\(notified)")
        #expect(s.server.recorder.loudSampleTimes().count > 1000)
    }

    /// From a hotkey nobody sees standard error: a selection that cannot be read is said aloud
    /// and in a notification, with the tool's own message.
    @Test func anUnreadableSelectionIsSpokenAndNotified() async throws {
        let s = try await Session.start(display: false)
        let tools = try stubTools(wlPaste: "echo 'Failed to connect to a Wayland server' >&2; exit 1")
        var env = s.environment
        env["WAYLAND_DISPLAY"] = "wayland-parla-test"
        env["PATH"] = tools.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let failingEnv = env
        let failing = try await offPool { try runProcess(SpeakSelectionTests.binary, Session.slowMachine([]), environment: failingEnv) }
        #expect(failing.status == 1)
        #expect(failing.error.contains("Cannot read the selection: wl-paste: Failed to connect to a Wayland server"), "\(failing.error)")
        #expect(s.server.recorder.loudSampleTimes().count > 1000)  // spoken
        let notified = try String(contentsOf: tools.appendingPathComponent("notified"), encoding: .utf8)
        #expect(notified.contains("Cannot read the selection: wl-paste: Failed to connect"), "\(notified)")

        // No wl-paste at all (only the stubs on PATH): it says what to install.
        try FileManager.default.removeItem(at: tools.appendingPathComponent("wl-paste"))
        env["PATH"] = tools.path
        let missingEnv = env
        let missing = try await offPool { try runProcess(SpeakSelectionTests.binary, Session.slowMachine([]), environment: missingEnv) }
        #expect(missing.status == 1)
        #expect(missing.error.contains("Cannot read the selection: install wl-clipboard"), "\(missing.error)")
    }

    /// A wl-paste that hangs (GNOME without the data-control protocol) costs the lookup's
    /// deadline, then the X selection is read and spoken.
    @Test func aHangingWlPasteDoesNotHoldUpTheXSelection() async throws {
        let s = try await Session.start()
        try s.display!.select("Hello there, from X.")
        let tools = try stubTools(wlPaste: "exec sleep 30")
        var env = s.environment
        env["WAYLAND_DISPLAY"] = "wayland-parla-test"
        env["PATH"] = tools.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let hangingEnv = env
        let r = try await offPool { try runProcess(SpeakSelectionTests.binary, ["--timeout", "1500"], environment: hangingEnv) }
        #expect(r.status == 0, "\(r.error)")
        #expect(r.error.contains("Languages: en"), "\(r.error)")
    }

    @Test func brokenSettingsNameTheLine() async throws {
        let s = try await Session.start()
        try s.display!.select("Hello")
        let conf = s.home.appendingPathComponent("bad.conf")
        try "rate = 175\nlanguages = en, el\nspeed = fast\n".write(to: conf, atomically: true, encoding: .utf8)
        let r = try await s.run(["--config", conf.path])
        #expect(r.status != 0)
        #expect(r.error.contains("bad.conf, line 3: unknown setting 'speed'"))
        try "rate = 9000\n".write(to: conf, atomically: true, encoding: .utf8)
        let r2 = try await s.run(["--config", conf.path])
        #expect(r2.error.contains("line 1: rate must be a number from 80 to 1000"))
        try "duck = loud\n".write(to: conf, atomically: true, encoding: .utf8)
        let r3 = try await s.run(["--config", conf.path])
        #expect(r3.error.contains("line 1: duck must be true, false or a number of dB from 1 to 60"))
        try "timeout = 50\nsources = primary, selection\n".write(to: conf, atomically: true, encoding: .utf8)
        let r4 = try await s.run(["--config", conf.path])
        #expect(
            r4.error.contains("line 2: sources must be some of accessibility, primary and clipboard, separated by commas, not 'selection'"),
            "\(r4.error)")
        let r5 = try await s.run(["--sources", " , "])
        #expect(r5.status != 0 && r5.error.contains("sources must name at least one"), "\(r5.error)")
    }

    /// `duck = 12` in the settings lowers other audio by 12 dB while the selection is spoken.
    @Test func duckSettingLowersOtherAudio() async throws {
        let s = try await Session.start()
        try s.display!.select("Hello there, the music is lower while this is read.")
        let music = try await TestMusic.start(on: s.server)
        let conf = s.home.appendingPathComponent("duck.conf")
        try "duck = 12\ndevice = \(s.server.sink)\n".write(to: conf, atomically: true, encoding: .utf8)
        let before = monotonicNanoseconds()
        let full = try #require(music.level(from: before - 400_000_000, to: before))
        let r = try await s.run(["--config", conf.path])
        #expect(r.status == 0, "\(r.error)")
        let end = monotonicNanoseconds()
        var lowest = full, t = before
        while t + 100_000_000 < end {
            if let l = music.level(from: t, to: t + 100_000_000) { lowest = min(lowest, l) }
            t += 50_000_000
        }
        #expect(abs(lowest - (full - 12)) < 1.5, "the music went from \(full) down to \(lowest) dBFS (12 dB asked)")
    }
}
