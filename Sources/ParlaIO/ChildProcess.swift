import FoundationEssentials
internal import CParlaProcess
import ParlaCore
#if canImport(Glibc)
    import Glibc
#endif

/// A copy of this program started as a helper (an engine host or a render worker), with a
/// socket to its standard input and a pipe from its standard output. (A socket, so that
/// writing to a helper that has died fails with EPIPE through ``writeFully(_:_:)`` instead of
/// raising SIGPIPE in a program that may not ignore it.)
package struct ChildProcess: Sendable {
    /// Its process id.
    package let pid: Int32
    /// Writes to its standard input.
    package let input: Int32
    /// Reads its standard output.
    package let output: Int32

    /// A helper started otherwise (the engine host forked before `main`).
    package init(pid: Int32, input: Int32, output: Int32) {
        self.pid = pid
        self.input = input
        self.output = output
    }

    /// Starts `/proc/self/exe` (the running program, even if its file was replaced or deleted
    /// since it started) with `environment` added to this process's, `role` as its name in
    /// `ps`, no signal blocked, and SIGTERM, SIGHUP, SIGPIPE and SIGINT at their defaults
    /// (this process's threads may block signals, and a program that links Parla may ignore
    /// some). It inherits no other descriptor of this process. Helpers never play: they
    /// find no sound server and no ALSA device (`PARLA_HELPER_PULSE_SERVER`), so espeak-ng's
    /// audio probe fails at once in them.
    /// - Throws: ``ParlaError/Code/engineUnavailable`` if the pipes or the process cannot be made.
    package static func spawnSelf(role: String, environment: [String: String], stderrToNull: Bool = false) throws(ParlaError)
        -> ChildProcess
    {
        try spawn(executable: "/proc/self/exe", role: role, environment: environment, stderrToNull: stderrToNull)
    }

    /// Starts `executable` as ``spawnSelf(role:environment:stderrToNull:)`` starts this program.
    package static func spawn(executable exe: String, role: String, environment: [String: String] = [:], stderrToNull: Bool = false)
        throws(ParlaError) -> ChildProcess
    {
        var toChild: [Int32] = [-1, -1], fromChild: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &toChild) == 0 else {
            throw .engineUnavailable(role, reason: "cannot create a socket for the \(role): \(systemErrorMessage())")
        }
        guard parla_pipe_cloexec(&fromChild) == 0 else {
            close(toChild[0]); close(toChild[1])
            throw .engineUnavailable(role, reason: "cannot create a pipe for the \(role): \(systemErrorMessage())")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        if stderrToNull { posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) }
        // Nothing else of this process: a helper holding the write end of someone else's pipe
        // (Foundation's Pipe, for one, is not close-on-exec) would keep its reader waiting.
        _ = parla_spawn_close_from(&actions, 3)
        var env = ProcessInfo.processInfo.environment
        env["PULSE_SERVER"] = PARLA_HELPER_PULSE_SERVER
        env["ALSA_CONFIG_PATH"] = PARLA_HELPER_ALSA_CONFIG_PATH
        for (k, v) in environment { env[k] = v }
        let argv = [exe, "(\(role))"]
        let envp = env.map { "\($0.key)=\($0.value)" }
        var attributes = posix_spawnattr_t()
        initCleanSpawnAttributes(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var pid: pid_t = 0
        let rc = withCStrings(argv) { a in withCStrings(envp) { e in posix_spawn(&pid, exe, &actions, &attributes, a, e) } }
        close(toChild[0])
        close(fromChild[1])
        guard rc == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw .engineUnavailable(role, reason: "cannot start the \(role) (\(exe)): \(systemErrorMessage(rc))")
        }
        return ChildProcess(pid: pid, input: toChild[1], output: fromChild[0])
    }
}

/// Calls `body` with `strings` as a NULL-terminated C array.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    let array = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: strings.count + 1)
    for (i, s) in strings.enumerated() { array[i] = strdup(s) }
    array[strings.count] = nil
    defer {
        for i in 0..<strings.count { free(array[i]) }
        array.deallocate()
    }
    return body(array)
}
