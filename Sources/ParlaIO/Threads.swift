import ParlaCore
import Dispatch
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs `body` on a new detached thread of its own (for work that blocks: the engine thread,
/// the threads that drive render workers), off Swift's cooperative thread pool.
package func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(
        &thread, nil,
        { context in
            #if canImport(Glibc)
                guard let context else { return nil }
            #endif
            let body = Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue()
            body.run()
            return nil
        }, box)
    guard rc == 0 else {
        // Out of threads (EAGAIN): never trap inside the host program; run it on a thread of
        // Dispatch's pool instead, which may be slower to get but keeps the work going.
        let body = Unmanaged<ThreadBody>.fromOpaque(box).takeRetainedValue()
        DispatchQueue.global().async { body.run() }
        return
    }
    pthread_detach(thread)
}

/// Runs blocking `body` (connecting to a sound server, for one) on a thread of its own and
/// waits for it without holding a thread of Swift's cooperative pool, which has as few threads
/// as cores: a slow server must not stall every other task.
package func onThreadOfItsOwn<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws(ParlaError) -> T) async throws(ParlaError)
    -> T
{
    let result: Result<T, ParlaError> = await withCheckedContinuation { continuation in
        startThread(name: name) {
            do throws(ParlaError) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try result.get()
}

/// Runs `operation`, raising `stop` if the task is cancelled meanwhile: the standard
/// library's `withTaskCancellationHandler`, keeping the operation's typed error (the standard
/// one rethrows `any Error`).
package func withCancellation<T: Sendable>(
    raising stop: StopFlag, _ operation: () async throws(ParlaError) -> T
) async throws(ParlaError) -> T {
    let result = await withTaskCancellationHandler {
        await capturingResult(operation)
    } onCancel: {
        stop.raise()
    }
    return try result.get()
}

/// What `body` returns or throws, as a value: what an `async let` can hold without forgetting
/// the error's type.
package func capturingResult<T>(_ body: () async throws(ParlaError) -> T) async -> Result<T, ParlaError> {
    do throws(ParlaError) {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// Initialises `attributes` for `posix_spawn` so the child starts with no signal blocked and the
/// usual ones at their default action. A thread of Swift's pools blocks nearly every signal, and
/// a child inherits its spawner's mask: a daemon started that way would never see SIGTERM or
/// SIGUSR1, and one started where SIGPIPE is ignored would ignore it too. Destroy the attributes
/// with `posix_spawnattr_destroy`.
package func initCleanSpawnAttributes(_ attributes: inout posix_spawnattr_t) {
    posix_spawnattr_init(&attributes)
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for sig in [SIGTERM, SIGHUP, SIGPIPE, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD] { sigaddset(&defaults, sig) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
}

/// A flag that stops synthesis at the engine's next audio block (within tens of milliseconds),
/// without waiting for the engine's thread.
package final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    /// Called once when the flag is raised (see ``onRaise(_:)``).
    private let wakers = Mutex<[@Sendable () -> Void]>([])
    /// Creates a lowered flag.
    package init() {}
    /// Asks the synthesis that watches this flag to stop.
    package func raise() {
        raised.store(true, ordering: .releasing)
        let waking = wakers.withLock { w -> [@Sendable () -> Void] in
            defer { w = [] }
            return w
        }
        for wake in waking { wake() }
    }
    /// Whether stop has been requested.
    package var isRaised: Bool { raised.load(ordering: .acquiring) }
    /// Calls `wake` once the flag is raised (now, if it already is): for a thread that blocks
    /// on something else to be woken by a stop instead of polling the flag.
    package func onRaise(_ wake: @escaping @Sendable () -> Void) {
        let now = wakers.withLock { w -> Bool in
            if raised.load(ordering: .acquiring) { return true }
            w.append(wake)
            return false
        }
        if now { wake() }
    }
}
