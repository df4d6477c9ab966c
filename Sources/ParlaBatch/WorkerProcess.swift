internal import CParlaProcess
import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// A running render worker (this program started again with `PARLA_RENDER_WORKER=1`).
/// One thread at a time drives it; its reading state is behind a lock all the same.
final class WorkerProcess: Sendable {
    let pid: pid_t
    private let input: Int32
    /// Its standard output, nil once ``finish()`` has closed it.
    private let output: Mutex<LineReader?>

    /// Starts a worker, on the `cpu`-th allowed CPU if given, and sends it the settings; see
    /// ``awaitReady()``.
    init(settings: RenderSettings, cpu: Int?) throws {
        let child = try ChildProcess.spawnSelf(
            role: "parla render worker",
            environment: [
                "PARLA_RENDER_WORKER": "1:\(getpid())",
                "SWIFT_DETERMINISTIC_HASHING": "1",  // the same choices in every worker
                "LD_BIND_NOW": "1",  // resolve symbols once in the worker, not in every forked child
            ])
        let pid = child.pid
        self.pid = pid
        // Before it forks anything: its chunk processes inherit the CPU. (A failure leaves
        // the worker free to run anywhere, which is only slower.)
        if let cpu { _ = parla_pin_to_allowed_cpu(pid, Int32(cpu)) }
        input = child.input
        output = Mutex(LineReader(fd: child.output, name: "a render worker"))
        let settingsLine = try JSONEncoder().encode(settings)
        guard send(Array(settingsLine)) else {
            _ = finish()
            throw ParlaError.engineUnavailable(
                "render worker", reason: "a render worker exited before it was ready (run with --jobs 1 and check standard error)")
        }
    }

    /// Waits for the worker to have loaded everything (call once, after `init`).
    /// - Throws: what kept it from starting.
    func awaitReady() throws {
        guard let ready = try nextLine(),
            let answer = WorkerResult.decode(ready)
        else {
            _ = finish()
            throw ParlaError.engineUnavailable(
                "render worker", reason: "a render worker exited before it was ready (run with --jobs 1 and check standard error)")
        }
        if let fatal = answer.fatal {
            _ = finish()
            throw ParlaError.invalidInput(fatal)
        }
    }

    deinit { _ = finish() }

    /// The worker's answer for `item`, the oldest item to render sent and not yet answered.
    /// - Throws: if the worker died (or answered out of turn); it cannot be used again.
    func receive(for item: BatchItem) throws -> WorkerResult {
        guard let line = try nextLine(), let result = WorkerResult.decode(line),
            result.id == item.id
        else {
            throw ParlaError.engineCrashed(
                "render worker", reason: "the render worker stopped while rendering this item (run the same command again to retry it)")
        }
        return result
    }

    /// The worker's next line; nil at its end, or once finished.
    private func nextLine() throws -> [UInt8]? {
        // Read in place (optional chaining): a copy of the reader would copy its buffer.
        try output.withLock { output in try output?.next() ?? nil }
    }

    /// Queues one request line (a JSON chunk) in the worker's input; false if the worker is gone.
    func send(_ bytes: [UInt8]) -> Bool { writeFully(input, bytes + [0x0A]) }

    /// Ends the worker (it exits at the end of its input) and returns its peak memory in bytes,
    /// its per-chunk processes included.
    func finish() -> Int {
        let last: [UInt8]?? = output.withLock { output in
            guard let fd = output?.fd else { return nil }
            close(input)
            let last = (try? output?.next()) ?? nil
            close(fd)
            output = nil
            return .some(last)
        }
        guard case .some(let last) = last else { return 0 }
        waitForExit(pid)
        guard let last, let stats = WorkerResult.decode(last) else { return 0 }
        return stats.peakBytes ?? 0
    }
}
