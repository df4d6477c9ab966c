internal import CParlaWorker
import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// Renders many utterances to WAV files in parallel worker processes: the engine behind
/// `parla render`.
///
/// ```swift
/// let renderer = BatchRenderer(options: BatchRenderOptions(outputDirectory: URL(filePath: "out")))
/// let items = texts.enumerated().map { BatchItem(id: "line\($0)", text: $1) }
/// for try await p in renderer.render(items) { print(p.rendered, "of", items.count) }
/// ```
///
/// Each worker is this same program started again (any program that links Parla can serve),
/// and forks a pristine copy of itself per chunk of consecutive items (cut the same way
/// whatever the number of jobs; done items before a missing one are replayed), so the files
/// are byte-identical whatever the number of jobs or an earlier interrupted run. Files are written
/// under temporary names and renamed when complete; `results.jsonl` gets one line per item.
/// An item already done (its result line is ok and its files are complete) is skipped unless
/// ``BatchRenderOptions/force`` is set. ``stop()`` finishes the items being rendered and ends
/// the stream.
public final class BatchRenderer: Sendable {
    /// The options this renderer uses.
    public let options: BatchRenderOptions
    private let stopping = StopFlag()
    /// Runs under way, and who waits for them all to end.
    private let runs = Mutex<(active: Int, waiters: [CheckedContinuation<Void, Never>])>((0, []))

    /// Returns once every run this renderer started has ended: its workers have stopped and
    /// its input is no longer read. A loop over a `render` stream that is left early returns
    /// before that; this is how to know the batch is over (to reuse the output directory, or
    /// to read what the input handed out).
    public func waitForRunsToEnd() async {
        await withCheckedContinuation { c in
            runs.withLock { r in
                if r.active == 0 { c.resume() } else { r.waiters.append(c) }
            }
        }
    }

    private func runEnded() {
        let waiters = runs.withLock { r -> [CheckedContinuation<Void, Never>] in
            r.active -= 1
            guard r.active == 0 else { return [] }
            defer { r.waiters = [] }
            return r.waiters
        }
        waiters.forEach { $0.resume() }
    }

    /// A renderer with `options`.
    public init(options: BatchRenderOptions) {
        self.options = options
    }

    /// Stops taking new items; the stream ends once the chunks being rendered (up to two per
    /// worker, one being spoken and one queued, of about 2,000 bytes of text each) are done.
    /// The renderer takes no items afterwards. Leaving the loop over a `render` stream
    /// early, or cancelling the task reading it, does the same.
    public func stop() { stopping.raise() }

    /// Renders `items`.
    public func render<S: Sequence & Sendable>(_ items: S) -> AsyncThrowingStream<BatchProgress, any Error> where S.Element == BatchItem {
        let iterator = Mutex<S.Iterator?>(nil)
        return render { () -> BatchEntry? in
            iterator.withLock { it in
                var current = it ?? items.makeIterator()
                defer { it = current }
                return current.next().map(BatchEntry.item)
            }
        }
    }

    /// Renders the entries `next` returns until it returns nil. `next` is called from one
    /// thread at a time; an error it throws ends the batch (after the items in flight).
    public func render(_ next: @escaping @Sendable () throws -> BatchEntry?) -> AsyncThrowingStream<BatchProgress, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: BatchProgress.self)
        let options = self.options
        let stopping = self.stopping
        // Whoever leaves the loop early (or whose task is cancelled) stops the batch as stop()
        // does: no worker keeps rendering for a stream nobody reads.
        continuation.onTermination = { termination in
            if case .cancelled = termination { stopping.raise() }
        }
        runs.withLock { $0.active += 1 }
        DispatchQueue.global().async {
            defer { self.runEnded() }
            do {
                let run = try BatchRun(options: options, next: next, stopping: stopping) { continuation.yield($0) }
                let final = try run.run()
                continuation.yield(final)
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        return stream
    }
}
