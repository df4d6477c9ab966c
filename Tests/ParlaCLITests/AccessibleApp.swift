import Foundation
import ParlaTestSupport

/// A GTK 3 application on a private X display or Wayland compositor and a private session bus, with the AT-SPI
/// accessibility bus that the session bus starts on demand (at-spi-bus-launcher), as on a
/// desktop. It shows `text` in a text view with the characters `range` selected and focused.
/// Unchecked: it holds two `Process`es, which are not Sendable; they are started in `init` and
/// only ended (once) by `deinit`.
final class AccessibleApp: @unchecked Sendable {
    let busAddress: String
    let directory: URL
    private let bus: Process
    private let app: Process

    /// The application: scripts/lib/selection_app.py, shared with the benchmarks.
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/lib/selection_app.py")

    /// Starts the bus and the application on `display`; the caller waits until the selection is
    /// visible (``SpeakSelectionTests``' `--print` polling).
    init(display: String?, wayland: TestCompositor? = nil, text: String, selecting range: Range<Int>) throws {
        directory = try makeTemporaryDirectory()
        let socket = directory.appendingPathComponent("bus").path
        busAddress = "unix:path=\(socket)"
        let environment: [String: String] = [
            "PATH": "/usr/bin:/bin", "HOME": directory.path, "XDG_RUNTIME_DIR": directory.path, "LANG": "C.UTF-8",
        ]
        // Foundation starts it in a process group of its own, which the accessibility bus and
        // registry it starts on demand join: the group is killed at the end.
        bus = Process()
        bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        bus.arguments = ["--session", "--nofork", "--nopidfile", "--address=\(busAddress)"]
        bus.environment = environment
        bus.standardOutput = FileHandle.nullDevice
        bus.standardError = FileHandle.nullDevice
        try bus.run()
        guard getpgid(bus.processIdentifier) == bus.processIdentifier else {
            kill(bus.processIdentifier, SIGKILL)
            throw TestSetupError(message: "dbus-daemon does not lead a process group of its own: its services could not be stopped")
        }
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: socket) && Date() < deadline { usleep(10_000) }
        let scriptFile = Self.script
        app = Process()
        app.executableURL = URL(fileURLWithPath: "/usr/bin/python3")  // Debian's, with python3-gi
        app.arguments = [scriptFile.path, text, String(range.lowerBound), String(range.upperBound)]
        var appEnvironment = environment
        appEnvironment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        if let wayland {
            // GTK 3 takes WAYLAND_DISPLAY only as a name in XDG_RUNTIME_DIR, not as a path.
            appEnvironment["GDK_BACKEND"] = "wayland"
            appEnvironment["XDG_RUNTIME_DIR"] = wayland.runtimeDirectory.path
            appEnvironment["WAYLAND_DISPLAY"] = "wayland-1"
        } else if let display {
            appEnvironment["DISPLAY"] = display
        }
        app.environment = appEnvironment
        app.standardOutput = FileHandle.nullDevice
        app.standardError = FileHandle.nullDevice
        try app.run()
    }

    deinit {
        kill(app.processIdentifier, SIGKILL)
        var status: Int32 = 0
        waitpid(app.processIdentifier, &status, 0)
        kill(-bus.processIdentifier, SIGKILL)
        kill(bus.processIdentifier, SIGKILL)
        waitpid(bus.processIdentifier, &status, 0)
        try? FileManager.default.removeItem(at: directory)
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
