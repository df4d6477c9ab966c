import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import ParlaEngine
import ParlaIO
import ParlaPulseAudio
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// Turns Ctrl-C and SIGTERM into task cancellation, so work stops cleanly and leaves no partial files.
enum Interrupt {
    /// The exit status once SIGINT or SIGTERM has been received: 130 (interrupted) for both.
    static var signalled: Int32? { Signalled.code.withLock { $0 } }

    /// Calls `handler` on SIGINT or SIGTERM (instead of dying), remembering that one came.
    static func onSignal(_ handler: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        return [SIGINT, SIGTERM].map { sig in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                Signalled.code.withLock { $0 = 130 }
                handler()
            }
            source.resume()
            return source
        }
    }

    /// Runs `body`; on SIGINT or SIGTERM it is cancelled and the process exits with 130.
    static func cancellingOnSignal<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task { try await body() }
        let sources = onSignal { task.cancel() }
        defer { sources.forEach { $0.cancel() } }
        do {
            return try await task.value
        } catch {
            if let code = signalled {
                printError("Interrupted; no output was written.")
                throw ExitCode(code)
            }
            throw error
        }
    }
}

private enum Signalled {
    static let code = Mutex<Int32?>(nil)
}
