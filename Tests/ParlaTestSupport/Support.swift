import Foundation
import ParlaIO
import ParlaCore
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

/// `unshare`'s arguments for a mount namespace of a test's own: as root, a mount namespace
/// alone; otherwise inside a user namespace where this user is root. Root in a chroot (a fresh
/// Debian root, as `fresh-machine` runs the suite) may not make a user namespace at all
/// ("unshare failed: Operation not permitted"), but may make a mount namespace.
public var unshareMountArguments: [String] { getuid() == 0 ? ["--mount"] : ["--map-root-user", "--mount"] }

/// A new empty directory under the system's temporary directory.
public func makeTemporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("parla-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Removes a directory `makeTemporaryDirectory()` made, with what is in it: a test's files
/// (rendered audio, copies of a 63 MB voice) would otherwise fill the disk over a run.
public func removeTemporaryDirectory(_ dir: URL) {
    try? FileManager.default.removeItem(at: dir)
}

/// Every file in `dir`, hidden temporaries included, sorted.
public func leftovers(in dir: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
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

/// Waits until process `pid` ignores or catches `signal` (its handler is in place, read from
/// `/proc/PID/status`), at most `timeout` seconds; false if it never does or has ended.
public func waitUntilHandling(_ signal: Int32, pid: Int32, timeout: Double = 20) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    let bit = UInt64(1) << UInt64(signal - 1)
    while Date() < deadline {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
        for line in status.split(separator: "\n") where line.hasPrefix("SigIgn:") || line.hasPrefix("SigCgt:") {
            if let mask = UInt64(line.split(separator: "\t").last.map(String.init) ?? "", radix: 16), mask & bit != 0 {
                return true
            }
        }
        usleep(5_000)
    }
    return false
}

/// Waits until process `pid` and its children have done `ticks` clock ticks of CPU work
/// between them (a render under way: ordered by work done, not by a sleep). False after
/// `timeout` seconds or once the process is gone.
public func waitUntilWorking(pid: Int32, ticks: Int = 5, timeout: Double = 20) -> Bool {
    func cpu(_ p: Int32) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(p)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state, ppid, …; utime and stime are fields 14 and 15 of stat (11 and 12 here).
        return fields.count > 12 ? (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0) : 0
    }
    func children(of p: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { child in
            guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == p
        }
    }
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline && kill(pid, 0) == 0 {
        if ([pid] + children(of: pid)).map(cpu).reduce(0, +) >= ticks { return true }
        usleep(5_000)
    }
    return false
}

/// Starts a daemon with standard input, output and error on /dev/null, and a clean signal
/// state (`initCleanSpawnAttributes`; Foundation's `Process` would hand it the spawning
/// thread's mask, which blocks nearly every signal). Returns its pid (reap it with `waitpid`).
public func spawnDaemon(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var attributes = posix_spawnattr_t()
    initCleanSpawnAttributes(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    guard rc == 0 else { throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot start \(executable): \(String(cString: strerror(rc)))"]) }
    return pid
}
