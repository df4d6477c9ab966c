import Foundation
import ParlaIO
import ParlaCore
import ParlaPulseAudio
import ParlaAudioTestSupport
import Testing

/// speak-selection's sources beyond the X selection: its desktop file, a terminal through tmux,
/// accessibility, the clipboard, and Wayland compositors.
extension SpeakSelectionTests {
    @Test func desktopFileLaunchesTheShippedCommand() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("share/applications/parla-speak-selection.desktop"), encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "[Desktop Entry]")
        for required in ["Type=Application", "Exec=speak-selection", "Terminal=false"] { #expect(lines.contains(required)) }
        #expect(lines.contains { $0.hasPrefix("Name=") })
        #expect(FileManager.default.isExecutableFile(atPath: SpeakSelectionTests.binary))
    }

    @Test func terminalHighlightSeenThroughTmux() async throws {
        // The text is piped in: the highlight is what this test is about, and reading the X
        // selection is each source test's. Read from the selection, it failed in 2 of 4
        // live-phase runs on a 2-core machine that was also building: with 15 speak-selection
        // tests starting their Xvfb and sound servers at once, xclip did not answer within 3 s.
        let s = try await Session.start(display: false)
        let sentence = "Highlight every word of this sentence please, one after another, slowly and clearly."
        let textFile = s.home.appendingPathComponent("sentence.txt")
        try sentence.write(to: textFile, atomically: true, encoding: .utf8)
        let session = "parla-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        // Slow speech, so a loaded machine's capture loop sees several words.
        let conf = s.home.appendingPathComponent("slow.conf")
        try "rate = 100\n".write(to: conf, atomically: true, encoding: .utf8)
        // The session's variables, and those it has none of removed (not left as the test
        // process has them: a desktop's accessibility bus and Wayland clipboard were read).
        var removals = "", assignments = ""  // env takes every -u before the first assignment
        for (k, v) in s.environment {
            if let v { assignments += "\(k)='\(v)' " } else { removals += "-u \(k) " }
        }
        let env = removals + assignments
        // A tmux server of the test's own, not the user's.
        let tmux = "tmux -f /dev/null -S \(s.home.appendingPathComponent("tmux.sock").path)"
        // Start the session and capture its pane every 30 ms from one shell script, so that no
        // gap between two processes started by this (possibly starved) test loses the speech,
        // until the session ends.
        let script = """
            \(tmux) new-session -d -s \(session) -x 100 -y 10 "env \(env) \(SpeakSelectionTests.binary) --config \(conf.path) - <\(textFile.path); sleep 3" || exit 3
            end=$(( $(date +%s) + 25 ))
            while \(tmux) has-session -t \(session) 2>/dev/null && [ $(date +%s) -lt $end ]; do
              \(tmux) capture-pane -p -e -t \(session); echo ---; sleep 0.03
            done
            \(tmux) kill-server 2>/dev/null || true
            """
        defer { _ = try? runProcess("/bin/sh", ["-c", "\(tmux) kill-server"]) }
        let run = try await offPool { try runProcess("/bin/sh", ["-c", script]) }
        #expect(run.status == 0, "\(run.error)")
        let captures = run.output
        var highlighted: Set<String> = []
        var rest = captures[...]
        while let r = rest.range(of: "\u{1B}[7m") {
            let word = rest[r.upperBound...].prefix { $0.isLetter }
            if !word.isEmpty { highlighted.insert(String(word)) }
            rest = rest[r.upperBound...]
        }
        let lastCapture = String(captures.suffix(600))
        #expect(highlighted.count >= 3, "highlighted: \(highlighted); the pane: \(lastCapture)")
        #expect(highlighted.isSubset(of: Set(sentence.split { !$0.isLetter }.map(String.init))))
    }

    /// Runs `speak-selection --print` until it prints `expected` (the accessible application
    /// takes a moment to come up and register), for at most 30 s. Returns the last run.
    func waitUntilPrinted(_ expected: String, _ s: Session, _ args: [String], environment: [String: String?]) async throws -> ProcessResult
    {
        let deadline = Date().addingTimeInterval(30)
        var last = try await s.run(["--print"] + args, environment: environment)
        while last.output != expected + "\n" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(200))
            last = try await s.run(["--print"] + args, environment: environment)
        }
        return last
    }

    /// The selection of the focused GTK application is read over the accessibility bus, as a
    /// screen reader reads it: with no X display given to speak-selection at all, it is spoken
    /// in its language; with the default sources it is found there before PRIMARY.
    @Test func theFocusedApplicationsSelectionIsReadOverAccessibility() async throws {
        let s = try await Session.start()
        let app = try AccessibleApp(display: s.display!.display, text: "Hello world. Καλημέρα κόσμε.", selecting: 13..<28)
        let bus: [String: String?] = ["DBUS_SESSION_BUS_ADDRESS": app.busAddress]
        let found = try await waitUntilPrinted("Καλημέρα κόσμε.", s, ["--sources", "accessibility"], environment: bus)
        #expect(found.status == 0 && found.output == "Καλημέρα κόσμε.\n", "\(found.output) \(found.error)")
        #expect(found.error.contains("Source: accessibility (AT-SPI)"), "\(found.error)")

        // Default sources, no X display: only the accessibility bus can answer.
        var noDisplay = bus
        noDisplay["DISPLAY"] = String?.none
        let spoken = try await s.run([], environment: noDisplay)
        #expect(spoken.status == 0, "\(spoken.error)")
        #expect(spoken.error.contains("Languages: el"), "\(spoken.error)")
        #expect(s.server.recorder.loudSampleTimes().count > 5000)

        // With the display too, the accessibility bus is asked first; PRIMARY (which GTK also
        // sets) answers when it comes first.
        let first = try await s.run(["--print"], environment: bus)
        #expect(first.error.contains("Source: accessibility (AT-SPI)"), "\(first.error)")
        let primary = try await s.run(["--print", "--sources", "primary, accessibility"], environment: bus)
        #expect(primary.error.contains("Source: primary (xclip)"), "\(primary.error)")
        #expect(primary.output == "Καλημέρα κόσμε.\n")
    }

    /// An accessibility bus that takes the connection and never answers (a hung desktop
    /// session) costs the lookup only its timeout, and says so; PRIMARY is then read.
    @Test func aHungAccessibilityBusCostsOnlyItsTimeout() async throws {
        let s = try await Session.start()
        try s.display!.select("Hello there, from X.")
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let path = dir.appendingPathComponent("hung-bus").path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0 && listen(listener, 8) == 0)
        let hung: [String: String?] = ["AT_SPI_BUS_ADDRESS": "unix:path=\(path)"]
        // 1 s per source: the hung bus must cost no more than that, and xclip, started next,
        // has as long (starting it can take more than 300 ms while the rest of the suite runs).
        let r = try await s.run(["--print", "--timeout", "1000"], environment: hung)
        #expect(r.status == 0, "\(r.error)")
        #expect(r.output == "Hello there, from X.\n")
        #expect(r.error.contains("accessibility: failed(") && r.error.contains("did not answer"), "\(r.error)")
        #expect(r.error.contains("Source: primary (xclip)"), "\(r.error)")
        // Spoken, too.
        let spoken = try await s.run(["--timeout", "1000"], environment: hung)
        #expect(spoken.status == 0 && spoken.error.contains("Languages: en"), "\(spoken.error)")
    }

    /// The clipboard is read only when the sources setting asks for it: a user who copied
    /// something long ago and selected nothing hears "Nothing selected".
    @Test func theClipboardIsReadOnlyWhenAskedFor() async throws {
        let s = try await Session.start()
        try s.display!.select("Copied long ago.", selection: "clipboard")
        let nothing = try await s.run(["--print"])
        #expect(nothing.status == 1 && nothing.error.contains("Nothing selected"), "\(nothing.error)")
        let conf = s.home.appendingPathComponent("clipboard.conf")
        try "sources = primary, clipboard\n".write(to: conf, atomically: true, encoding: .utf8)
        let copied = try await s.run(["--print", "--config", conf.path])
        #expect(copied.status == 0 && copied.output == "Copied long ago.\n", "\(copied.error)")
        #expect(copied.error.contains("Source: clipboard (xclip)"), "\(copied.error)")
    }

    /// sway (wlroots): PRIMARY through `wl-paste` and the data-control protocol, with no X
    /// display and no accessibility bus; spoken in its languages.
    @Test func swaysPrimarySelectionIsReadThroughWlPaste() async throws {
        let s = try await Session.start(display: false)
        let sway = try await TestCompositor(.sway)
        try sway.select("Hello from sway. Καλημέρα σας.")
        let wayland: [String: String?] = ["WAYLAND_DISPLAY": sway.socket]
        let found = try await waitUntilPrinted("Hello from sway. Καλημέρα σας.", s, [], environment: wayland)
        #expect(found.error.contains("Source: primary (wl-paste)"), "\(found.error)")
        let spoken = try await s.run([], environment: wayland)
        #expect(spoken.status == 0, "\(spoken.error)")
        #expect(spoken.error.contains("Languages: en, el"), "\(spoken.error)")
        #expect(s.server.recorder.loudSampleTimes().count > 5000)
    }

    /// A GTK application on sway: its selection is read over the accessibility bus, as on X11.
    @Test func aGtkApplicationOnWaylandIsReadOverAccessibility() async throws {
        let s = try await Session.start(display: false)
        let sway = try await TestCompositor(.sway)
        try sway.addKeyboard()
        let app = try AccessibleApp(display: nil, wayland: sway, text: "Hello world. Καλημέρα κόσμε.", selecting: 13..<28)
        let env: [String: String?] = ["WAYLAND_DISPLAY": sway.socket, "DBUS_SESSION_BUS_ADDRESS": app.busAddress]
        // Waits on the accessibility bus alone: GTK also sets PRIMARY, which wl-paste can read
        // a moment before the selection is reported over AT-SPI (seen once in CI).
        let found = try await waitUntilPrinted("Καλημέρα κόσμε.", s, ["--sources", "accessibility"], environment: env)
        #expect(found.error.contains("Source: accessibility (AT-SPI)"), "\(found.error)")
        let spoken = try await s.run([], environment: env)
        #expect(spoken.status == 0, "\(spoken.error)")
        #expect(spoken.error.contains("Languages: el"), "\(spoken.error)")
        #expect(s.server.recorder.loudSampleTimes().count > 5000)
    }

    /// weston has neither data-control nor a way for `wl-paste` to read the selection: the
    /// reason, with wl-paste's own message, is printed, spoken and notified.
    @Test func westonWithoutTheProtocolsGivesASpokenReason() async throws {
        let s = try await Session.start(display: false)
        let weston = try await TestCompositor(.weston)
        let tools = try stubTools(wlPaste: nil)
        let env: [String: String?] = [
            "WAYLAND_DISPLAY": weston.socket,
            "PATH": tools.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
        ]
        let r = try await s.run([], environment: env)
        #expect(r.status == 1)
        #expect(
            r.error.contains("Cannot read the selection: the compositor does not share it with other programs (wl-paste: Missing a seat)"),
            "\(r.error)")
        #expect(s.server.recorder.loudSampleTimes().count > 1000)  // spoken
        let notified = try String(contentsOf: tools.appendingPathComponent("notified"), encoding: .utf8)
        #expect(notified.contains("Cannot read the selection: the compositor does not share it"), "\(notified)")
    }
}
