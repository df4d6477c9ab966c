#if canImport(Glibc)
    import Glibc
#endif
import ParlaCore
import ParlaIO

/// Small process helpers the commands share (posix_spawn, not Foundation's Process, which the
/// commands do not link).
package enum Processes {
    /// Whether `tool` is an executable on $PATH.
    package static func have(_ tool: String) -> Bool {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(tool)", X_OK) == 0 }
    }

    /// Starts `argv` with standard input from /dev/null, standard output to `stdout` and standard
    /// error to `stderr` (each discarded if nil), and a clean signal state (a thread of Swift's pools
    /// blocks nearly every signal, and a child would inherit that). Nil if it could not be started.
    package static func spawn(_ argv: [String], stdout: Int32? = nil, stderr: Int32? = nil) -> pid_t? {
        var pid = pid_t()
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdout {
            posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        if let stderr {
            posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        var attributes = posix_spawnattr_t()
        initCleanSpawnAttributes(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        return posix_spawnp(&pid, argv[0], &actions, &attributes, &cArgs, environ) == 0 ? pid : nil
    }
}
