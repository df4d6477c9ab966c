import Foundation
import ParlaTestSupport

/// A headless Wayland compositor for selection tests: sway (wlroots, with the data-control
/// protocol that `wl-paste` uses) or weston (without it). Both refuse to run as root, so as
/// root they run as the system user `parlatest` (created if missing); clients here connect to
/// its socket by absolute path.
/// Unchecked: it holds `Process`es, which are not Sendable, and `helpers` grows as clients are
/// started; each test uses its compositor from one task at a time.
final class TestCompositor: @unchecked Sendable {
    enum Kind: String { case sway, weston }

    let kind: Kind
    /// The compositor's runtime directory, holding its socket `wayland-1`.
    let runtimeDirectory: URL
    /// `WAYLAND_DISPLAY` for clients (an absolute path).
    var socket: String { runtimeDirectory.appendingPathComponent("wayland-1").path }
    private let process: Process
    private var helpers: [Process] = []

    static let user = "parlatest"

    init(_ kind: Kind) async throws {
        self.kind = kind
        runtimeDirectory = try makeTemporaryDirectory()
        let dir = runtimeDirectory.path
        var command: [String]
        switch kind {
        case .sway:
            command = ["env", "-i", "PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=\(dir)", "HOME=\(dir)",
                       "WLR_BACKENDS=headless", "WLR_HEADLESS_OUTPUTS=1", "WLR_LIBINPUT_NO_DEVICES=1",
                       "WLR_RENDERER=pixman", "/usr/bin/sway", "-c", "/dev/null"]
        case .weston:
            command = ["env", "-i", "PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=\(dir)", "HOME=\(dir)",
                       "/usr/bin/weston", "--backend=headless-backend.so", "--socket=wayland-1", "--no-config"]
        }
        if getuid() == 0 {
            if (try? runProcess("/usr/bin/id", [Self.user]))?.status != 0 {
                let made = try runProcess("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", Self.user])
                guard made.status == 0 else { throw TestSetupError(message: "useradd \(Self.user): \(made.error)") }
            }
            let chown = try runProcess("/bin/chown", [Self.user, dir])
            guard chown.status == 0 else { throw TestSetupError(message: "chown: \(chown.error)") }
            command = ["/usr/sbin/runuser", "-u", Self.user, "--"] + command
        }
        chmod(dir, 0o700)
        process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: socket) {
            guard process.isRunning, Date() < deadline else {
                throw TestSetupError(message: "\(kind) did not create its socket within 30 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // The socket exists before the compositor takes clients; wait until one is served.
        while Date() < deadline {
            let probe = try await offPool { [socket] in
                try runProcess("/usr/bin/wl-paste", ["--list-types"], environment: ["WAYLAND_DISPLAY": socket, "XDG_RUNTIME_DIR": "/tmp"])
            }
            if !probe.error.contains("Failed to connect") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Starts a helper client of the compositor, kept until the compositor is stopped.
    func startClient(_ executable: String, _ arguments: [String], environment extra: [String: String] = [:]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        var env = ["PATH": "/usr/bin:/bin", "WAYLAND_DISPLAY": socket, "XDG_RUNTIME_DIR": runtimeDirectory.path]
        for (k, v) in extra { env[k] = v }
        p.environment = env
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        helpers.append(p)
    }

    /// Makes `text` the compositor's PRIMARY selection (sway: through data-control, as
    /// `wl-copy --primary`, which keeps serving it).
    func select(_ text: String) throws {
        let file = try makeTemporaryDirectory().appendingPathComponent("selection.txt")
        try Data(text.utf8).write(to: file)
        let r = try runProcess("/bin/sh", ["-c", "wl-copy --primary --foreground <'\(file.path)' >/dev/null 2>&1 & echo $!"],
                               environment: ["WAYLAND_DISPLAY": socket, "XDG_RUNTIME_DIR": runtimeDirectory.path])
        if let pid = Int32(r.output.trimmingCharacters(in: .whitespacesAndNewlines)) { copyPids.append(pid) }
    }
    private var copyPids: [Int32] = []

    /// A virtual keyboard (wtype holding it for 10 minutes): without a keyboard, no window
    /// gets the keyboard focus, and GTK then marks nothing focused or active.
    func addKeyboard() throws {
        try startClient("/usr/bin/wtype", ["-s", "600000", "-k", "Shift_L"])
    }

    deinit {
        for pid in copyPids { kill(pid, SIGKILL) }
        var status: Int32 = 0
        for p in helpers {
            kill(p.processIdentifier, SIGKILL)
            waitpid(p.processIdentifier, &status, 0)
        }
        // runuser passes SIGTERM on to the compositor.
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<200 where process.isRunning { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        waitpid(process.processIdentifier, &status, 0)
        try? FileManager.default.removeItem(at: runtimeDirectory)
    }
}
