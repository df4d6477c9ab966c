import Dispatch
import ParlaCore
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A serial executor that runs every job on one dedicated thread it owns.
///
/// espeak-ng keeps global state and blocks inside `espeak_Synth`; confining it to its own
/// thread keeps those blocking calls off Swift's cooperative thread pool. It is a task
/// executor too: a task that prefers it runs its nonisolated code on this thread, and so
/// reaches the engine without waiting for a thread of the pool.
package final class ThreadExecutor: SerialExecutor, TaskExecutor, Sendable {
    private let jobs = Mutex<[UnownedJob]>([])
    private let available = DispatchSemaphore(value: 0)

    /// Starts the thread; it lives for the rest of the process.
    package init(name: String) {
        startThread(name: name) { [self] in run() }
    }

    private func run() -> Never {
        while true {
            available.wait()
            let job = jobs.withLock { $0.removeFirst() }
            job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        }
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
        available.signal()
    }
}
