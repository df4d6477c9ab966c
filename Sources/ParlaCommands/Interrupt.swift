import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import ParlaEngine
import ParlaIO
import ParlaPulseAudio
import CParlaProcess
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// Turns Ctrl-C and SIGTERM into task cancellation, so work stops cleanly and leaves no partial files.
enum Interrupt {
    /// The exit status once SIGINT or SIGTERM has been received: 130 (interrupted) for both.
    static var signalled: Int32? { Signalled.code.withLock { $0 } }

    /// Calls `handler` on SIGINT or SIGTERM (instead of dying), remembering that one came, until
    /// the returned registration is cancelled. The signals are caught from the moment this
    /// returns (a C handler writes them to a pipe that a dispatch source reads), so one sent
    /// right after it is not lost; once caught, they stay caught for the process's life.
    static func onSignal(_ handler: @escaping @Sendable () -> Void) -> Registration {
        // The handler first, then the catching: a signal caught in between finds it.
        let id = Dispatcher.handlers.withLock { h in
            h.next += 1
            h.all[h.next] = handler
            return h.next
        }
        let registration = Registration(id: id)
        guard Dispatcher.source != nil else {  // no pipe: the signals keep their actions
            registration.cancel()
            return Registration(id: nil)
        }
        return registration
    }

    /// A handler given to ``onSignal(_:)``; `cancel()` removes it.
    struct Registration: Sendable {
        let id: Int?
        func cancel() {
            guard let id else { return }
            _ = Dispatcher.handlers.withLock { $0.all.removeValue(forKey: id) }
        }
    }

    /// Runs `body`; on SIGINT or SIGTERM it is cancelled and the process exits with 130.
    static func cancellingOnSignal<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task { try await body() }
        let signalHandler = onSignal { task.cancel() }
        defer { signalHandler.cancel() }
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

/// Reads the signals `parla_catch_interrupts` writes to its pipe and calls the handlers.
private enum Dispatcher {
    static let handlers = Mutex<(next: Int, all: [Int: @Sendable () -> Void])>((0, [:]))
    // Set once (a lazy static) and never changed: the source lives as long as the process.
    nonisolated(unsafe) static let source: (any DispatchSourceRead)? = {
        let fd = parla_catch_interrupts()
        guard fd >= 0 else { return nil }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .global())
        source.setEventHandler {
            var bytes = [UInt8](repeating: 0, count: 64)
            var caught = false
            while read(fd, &bytes, bytes.count) > 0 { caught = true }
            guard caught else { return }
            Signalled.code.withLock { $0 = 130 }
            for handler in handlers.withLock({ $0.all.sorted { $0.key < $1.key }.map(\.value) }) { handler() }
        }
        source.resume()
        return source
    }()
}
