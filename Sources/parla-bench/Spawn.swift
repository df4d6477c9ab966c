#if canImport(Glibc)
    import Glibc
#endif
import ParlaCommands
import ParlaIO

extension Processes {
    /// Starts `argv` with standard input from /dev/null, standard output to `stdout` and standard
    /// error to `stderr` (each discarded if nil), and a clean signal state (a thread of Swift's pools
    /// blocks nearly every signal, and a child would inherit that). Nil if it could not be started.
    ///
    /// The benchmarks start the programs they time with `posix_spawn` directly: swift-subprocess's
    /// `run` takes 1.01 ms where this takes 0.79 ms (docs/BENCHMARKS.md), and it awaits the
    /// process, where a benchmark starts one and stops it from elsewhere.
    static func spawn(_ argv: [String], stdout: Int32? = nil, stderr: Int32? = nil) -> pid_t? {
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
