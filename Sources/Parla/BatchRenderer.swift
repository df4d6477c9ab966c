internal import CParlaWorker
import Dispatch
import FoundationEssentials
import ParlaESpeak
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How a batch is rendered.
public struct BatchRenderOptions: Sendable {
    /// Where `ID.wav` (and `ID.json`, `ID.vtt`) and `results.jsonl` are written; created if needed.
    public var outputDirectory: String
    /// Worker processes (default: one per core).
    public var jobs: Int
    /// Also write `ID.json` word timings.
    public var timings = false
    /// Also write `ID.vtt` WebVTT captions, one cue per sentence.
    public var captions = false
    /// Render items again even when done.
    public var force = false
    /// The language of items that give none (nil: detected).
    public var language: LanguageTag?
    /// The voice of items that give none.
    public var voice: String?
    /// Whether text without a language is segmented by detected language.
    public var detectsLanguages = true
    /// The voice catalog directory (nil: found as ``/ParlaIO/ParlaCore/VoiceCatalog/locateDirectory(explicit:)`` does).
    public var voicesDirectory: String?
    /// Render only the items of this shard.
    public var shard: BatchShard?
    /// With no more jobs than CPUs this process may use, run worker `i` (and the processes
    /// it forks) on the `i`-th of those CPUs. A worker and its chunk's process then never
    /// wake each other across CPUs, and the speech never moves to a cold cache: 5–8% less
    /// CPU time for `--jobs 1` on the VM the benchmark runs on. Turn it off when other
    /// programs keep one of those CPUs busy.
    public var pinsWorkers = true
    /// Speak every item from a pristine engine in a process of its own, so its audio depends
    /// on nothing but the item: the same in any input order, shard or company. By default items
    /// are spoken in chunks of consecutive items, whose engine state carries over from item to
    /// item (identical for any number of jobs, but not across orders or shardings), which costs
    /// a fork per chunk instead of one per item.
    public var isolatesItems = false

    /// Options writing to `outputDirectory` with one worker per core.
    public init(outputDirectory: String, jobs: Int? = nil) {
        self.outputDirectory = outputDirectory
        self.jobs = max(1, jobs ?? BatchRenderOptions.cores)
    }

    /// The cores this process may run on.
    public static var cores: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }
}

/// Shard `index` of `count`: the items whose id hashes there (``/ParlaCore/BatchInput/shard(of:count:)``).
public struct BatchShard: Sendable, Hashable {
    /// 0-based shard number.
    public var index: Int
    /// Number of shards.
    public var count: Int
    /// Shard `index` of `count`; nil unless `0 <= index < count`.
    public init?(index: Int, count: Int) {
        guard count > 0, (0..<count).contains(index) else { return nil }
        self.index = index
        self.count = count
    }
    /// Whether the item `id` belongs to this shard.
    public func contains(_ id: String) -> Bool { BatchInput.shard(of: id, count: count) == index }
}

/// One entry of a batch's input: an item, or a line that could not be read as one (it is
/// reported as failed, and the batch goes on).
public enum BatchEntry: Sendable {
    /// An item to render.
    case item(BatchItem)
    /// An unreadable input line.
    case invalid(BatchInput.LineError)
}

/// What became of one item.
public struct BatchItemResult: Sendable, Hashable {
    /// How it ended.
    public enum Status: Sendable, Hashable {
        /// Rendered: `seconds` of audio in these languages and voices.
        case rendered(seconds: Double, languages: [String], voices: [String])
        /// Not rendered; the message says why and what to do.
        case failed(String)
        /// Already rendered by an earlier run (its files verified).
        case skipped
    }
    /// The item's id.
    public var id: String
    /// Its 1-based input line (0 for a file of a directory input).
    public var line: Int
    /// How it ended.
    public var status: Status
}

/// The state of a batch after an item, as ``BatchRenderer/render(_:)-(S)`` reports it.
public struct BatchProgress: Sendable {
    /// The item this update is about (nil on the final update).
    public var latest: BatchItemResult?
    /// Items rendered in this run.
    public var rendered = 0
    /// Items that failed.
    public var failed = 0
    /// Items skipped because an earlier run rendered them.
    public var skipped = 0
    /// Seconds of audio rendered in this run.
    public var audioSeconds = 0.0
    /// Seconds since the batch started.
    public var elapsedSeconds = 0.0
    /// Whether the batch was stopped before its input ended.
    public var stopped = false
    /// On the final update: the largest peak resident memory of any worker (the worker and
    /// the processes it forks), in bytes.
    public var workerPeakBytes: Int?
    /// On the final update: the peak resident memory of this process, in bytes.
    public var peakBytes: Int?
    /// Whether this is the final update.
    public var isFinal: Bool { latest == nil }
    /// An empty progress.
    public init() {}
}

/// Renders many utterances to WAV files in parallel worker processes: the engine behind
/// `parla render`.
///
/// ```swift
/// let renderer = BatchRenderer(options: BatchRenderOptions(outputDirectory: "out"))
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
        DispatchQueue.global().async {
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

/// One run of a batch: its workers, its results log and its counts.
private final class BatchRun: @unchecked Sendable {
    let options: BatchRenderOptions
    let settings: RenderSettings
    let next: @Sendable () throws -> BatchEntry?
    let stopping: StopFlag
    let report: @Sendable (BatchProgress) -> Void
    let results: ResultsLog
    let started = monotonicNanoseconds()

    /// Counts and the input, touched under this lock only.
    private struct Shared {
        var progress = BatchProgress()
        /// An error that ends the batch: the input could not be read, no worker could be
        /// started, `results.jsonl` could not be written.
        var fatal: (any Error)?
        var inputEnded = false
        var workerPeak = 0
        /// Result lines waiting for the next sync of the output's file system.
        var pending: [String] = []
        /// The files of the items in `pending` that were rendered.
        var pendingFiles: [String] = []
        /// Result lines (and their files) that arrived before a line that comes earlier in the
        /// input, by their place among the batch's lines: they join `pending` in input order.
        var held: [Int: (line: String, files: [String])] = [:]
        /// The place of the next line to join `pending`.
        var released = 0

        /// Queues the result line at `place`, and every held line that then comes next.
        mutating func queue(_ line: String, files: [String], at place: Int) {
            held[place] = (line, files)
            while let next = held.removeValue(forKey: released) {
                pending.append(next.line)
                pendingFiles += next.files
                released += 1
            }
        }

        /// Queues the lines still held, in order: the lines before them will not come.
        mutating func releaseHeld() {
            for (_, entry) in held.sorted(by: { $0.key < $1.key }) {
                pending.append(entry.line)
                pendingFiles += entry.files
            }
            held = [:]
        }
    }
    private let shared = Mutex(Shared())
    /// Held while the input is read, apart from `shared`: a slow producer must not hold up
    /// the threads reporting finished items.
    private let inputLock = Mutex(InputState())
    private struct InputState {
        var ended = false
        /// The place the next result line gets among the batch's lines (see ``finish(_:at:)``).
        var sequence = 0
    }

    init(options: BatchRenderOptions, next: @escaping @Sendable () throws -> BatchEntry?, stopping: StopFlag, report: @escaping @Sendable (BatchProgress) -> Void) throws {
        self.options = options
        self.next = next
        self.stopping = stopping
        self.report = report
        if let code = AtomicFile.makeDirectories(options.outputDirectory) {
            throw ParlaError.unwritableOutput(path: options.outputDirectory, reason: String(cString: strerror(code)))
        }
        let voices = try VoiceCatalog.locateDirectory(explicit: options.voicesDirectory)
        settings = RenderSettings(
            output: options.outputDirectory, voicesDirectory: voices, userVoicesDirectory: VoiceCatalog.userPresetDirectory,
            timings: options.timings, captions: options.captions, language: options.language?.identifier,
            voice: options.voice, detectsLanguages: options.detectsLanguages && options.language == nil)
        results = try ResultsLog(directory: options.outputDirectory)
        Self.removeAbandonedTemporaryFiles(in: options.outputDirectory)
    }

    /// Removes temporary files (`.NAME.parla-PID-….tmp`) left by processes that no longer run,
    /// such as a worker killed with SIGKILL in the middle of an item: those of a process id
    /// not running here and untouched for 10 minutes (a pod of the same job on another machine
    /// may be writing to a shared volume: its files are fresh).
    static func removeAbandonedTemporaryFiles(in directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        let now = time(nil)
        for name in names where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            guard let marker = name.ranges(of: ".parla-").last else { continue }
            let digits = name[marker.upperBound...].prefix { $0.isNumber }
            guard let pid = pid_t(digits), kill(pid, 0) != 0, errno == ESRCH else { continue }
            var st = stat()
            guard stat(directory + "/" + name, &st) == 0, now - st.st_mtim.tv_sec > 600 else { continue }
            unlink(directory + "/" + name)
        }
    }

    /// Raised by ``fail(_:)``; `stopping` is the renderer's, raised by ``BatchRenderer/stop()``.
    private let failed = StopFlag()
    private var isStopping: Bool { stopping.isRaised || failed.isRaised }

    func run() throws -> BatchProgress {
        // Start every worker before rendering: one that cannot start (no voice catalog, no
        // espeak-ng data) ends the batch with its message.
        var workers: [WorkerProcess] = []
        // (All are started before any is waited for: they load at the same time.)
        for index in 0..<options.jobs { workers.append(try WorkerProcess(settings: settings, cpu: cpu(forWorker: index))) }
        for worker in workers { try worker.awaitReady() }
        // Group commit on its own thread: a sync takes tens of milliseconds, which no thread
        // feeding a worker should wait for.
        // It sleeps until a second has passed since the last commit, or until the rendering
        // ends (woken at once: the last commit is on the batch's critical path).
        let rendering = StopFlag()
        let wake = DispatchSemaphore(value: 0), committed = DispatchSemaphore(value: 0)
        startThread(name: "parla.render.commit") { [self] in
            while !rendering.isRaised {
                let due = lastCommit + 1_000_000_000, now = monotonicNanoseconds()
                if now >= due {
                    commitPending()
                } else {
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(due - now)))
                }
            }
            committed.signal()
        }
        let group = DispatchGroup()
        for (index, worker) in workers.enumerated() {
            group.enter()
            startThread(name: "parla.render") { [self] in
                defer { group.leave() }
                drive(worker, cpu: cpu(forWorker: index))
            }
        }
        group.wait()
        rendering.raise()
        wake.signal()
        committed.wait()
        // Lines still held wait for items that will not come (the batch failed).
        shared.withLock { $0.releaseHeld() }
        commitPending(droppingPages: false)  // on the way out: not worth the time
        var final = shared.withLock { s in
            var p = s.progress
            p.latest = nil
            p.stopped = stopping.isRaised && !s.inputEnded
            p.workerPeakBytes = s.workerPeak
            p.peakBytes = peakResidentBytes()
            return p
        }
        final.elapsedSeconds = elapsed
        if let error = shared.withLock({ $0.fatal }) { throw error }
        return final
    }

    private var elapsed: Double { Double(monotonicNanoseconds() - started) / 1e9 }

    /// Feeds one worker until the input ends or the batch stops. The next chunk is sent when
    /// the current one has one item left, so the worker starts it without waiting for this
    /// thread, yet at the end of the input no worker holds a whole chunk that an idle one
    /// could have taken.
    /// The allowed CPU worker `index` runs on (see ``BatchRenderOptions/pinsWorkers``), if any.
    private func cpu(forWorker index: Int) -> Int? {
        options.pinsWorkers && options.jobs <= Int(parla_allowed_cpus()) ? index : nil
    }

    private func drive(_ first: WorkerProcess, cpu: Int?) {
        var worker: WorkerProcess? = first
        var queued: [RenderChunk] = []   // sent to `worker`, not all answered yet
        var answered = 0                 // items of queued[0] answered
        var waiting: [RenderChunk] = []  // to send again: their worker died before finishing them
        var idleDeaths = 0               // workers in a row that died before taking a chunk
        while true {
            if worker == nil, !(waiting.isEmpty && isStopping) {
                do {
                    let replacement = try WorkerProcess(settings: settings, cpu: cpu)
                    try replacement.awaitReady()
                    worker = replacement
                } catch {
                    // Items are not failed one by one for this: the batch ends, and a rerun
                    // renders what is left.
                    fail(error)
                    break
                }
            }
            guard let current = worker else { break }
            var workerGone = false
            while queued.isEmpty || (queued.count == 1 && queued[0].rendered.count - answered <= 1) {
                guard let chunk = waiting.isEmpty ? (isStopping ? nil : takeChunk()) : waiting.removeFirst() else { break }
                guard let request = try? JSONEncoder().encode(chunk) else {
                    // Only the library's callers can get here (a rate that is not a number).
                    for (item, place) in zip(chunk.rendered, chunk.sequence) {
                        finish(BatchItemResult(id: item.id, line: item.line, status: .failed("the item cannot be sent to a render worker: check that its rate and pitch are numbers")), at: place)
                    }
                    continue
                }
                guard current.send(Array(request)) else {
                    // The worker died (between chunks, or on the one it answers next): this
                    // chunk never reached it, so it goes to the replacement.
                    waiting.insert(chunk, at: 0)
                    workerGone = true
                    break
                }
                queued.append(chunk)
            }
            if workerGone && queued.isEmpty {
                recordPeak(current.finish())
                worker = nil
                idleDeaths += 1
                if idleDeaths > 3 {
                    fail(ParlaError.engineFailure("render workers keep exiting before they take an item (see the messages above; try --jobs 1)"))
                    break
                }
                continue
            }
            idleDeaths = 0
            guard let chunk = queued.first else { break }
            let item = chunk.rendered[answered], place = chunk.sequence[answered]
            let result: WorkerResult
            do {
                result = try current.receive(for: item)
                answered += 1
            } catch {
                // The worker died: this item fails, the rest of its chunk (after a replay of
                // what came before) and the chunks queued behind it go to the replacement.
                result = WorkerResult(id: item.id, ok: false, error: "\(error)")
                recordPeak(current.finish())
                worker = nil
                waiting = (chunk.remainder(afterAnswering: answered).map { [$0] } ?? []) + queued.dropFirst() + waiting
                queued = []
                answered = 0
            }
            if !queued.isEmpty && answered == chunk.rendered.count {
                queued.removeFirst()
                answered = 0
            }
            let status: BatchItemResult.Status = result.ok
                ? .rendered(seconds: result.seconds, languages: result.languages, voices: result.voices)
                : .failed(result.error ?? "unknown error")
            finish(BatchItemResult(id: item.id, line: item.line, status: status), at: place)
        }
        if let worker { recordPeak(worker.finish()) }
    }

    /// Ends the batch after the items in flight with `error` (the first one wins).
    private func fail(_ error: any Error) {
        shared.withLock { if $0.fatal == nil { $0.fatal = error } }
        failed.raise()
    }

    private func recordPeak(_ bytes: Int) {
        shared.withLock { $0.workerPeak = max($0.workerPeak, bytes) }
    }

    /// The next chunk to render: consecutive items of the input (of this shard) until
    /// ``RenderChunk/maxWeight`` bytes of text are reached, cut the same way whatever the number of jobs
    /// and whatever is already done. Reports invalid lines and items already done on the way;
    /// done items before one to render are kept in the chunk, to be replayed.
    private func takeChunk() -> RenderChunk? {
        while !isStopping {
            var entries: [RenderChunk.Entry] = []
            var sequence: [Int] = []  // of the entries to render
            var reports: [(BatchItemResult, Int?)] = []  // made after the lock is released
            defer { for (result, place) in reports { finish(result, at: place) } }
            let ended: Bool
            do {
                ended = try inputLock.withLock { input throws -> Bool in
                    var weight = 0
                    let maxItems = options.isolatesItems ? 1 : RenderChunk.maxItems
                    while !input.ended, weight < RenderChunk.maxWeight, entries.count < maxItems, !isStopping {
                        guard let entry = try next() else {
                            input.ended = true
                            shared.withLock { $0.inputEnded = true }
                            break
                        }
                        switch entry {
                        case .invalid(let e):
                            if let shard = options.shard, !shard.contains(e.id) { continue }
                            reports.append((BatchItemResult(id: e.id, line: e.line, status: .failed("line \(e.line): \(e.reason)")), input.sequence))
                            input.sequence += 1
                        case .item(let item):
                            if let shard = options.shard, !shard.contains(item.id) { continue }
                            let done = !options.force && results.isDone(item.id, timings: options.timings, captions: options.captions)
                            if done {
                                reports.append((BatchItemResult(id: item.id, line: item.line, status: .skipped), nil))
                            } else {
                                sequence.append(input.sequence)
                                input.sequence += 1
                            }
                            entries.append(RenderChunk.Entry(item: item, replay: done))
                            weight += RenderChunk.weight(of: item)
                        }
                    }
                    return input.ended
                }
            } catch {
                inputLock.withLock { $0.ended = true }
                fail(error)
                return nil
            }
            while entries.last?.replay == true { entries.removeLast() }  // nothing after them to render
            if !entries.isEmpty {
                let chunk = RenderChunk(entries: entries, sequence: sequence)
                precondition(chunk.sequence.count == chunk.rendered.count)
                return chunk
            }
            if ended { return nil }
        }
        return nil
    }

    /// Counts and reports `result`, and queues its line for `results.jsonl`, where it goes at
    /// `place` among this run's lines (in input order, so the log too is the same for any
    /// number of jobs): a line waits for the lines before it. Files are not synced one by
    /// one: about once a second, the output's file system is synced and the lines queued
    /// before it are appended, so a line marked ok always names files that are on disk, even
    /// after a machine crash (group commit, ``commitPending()``). A skipped item has no line.
    /// (Lines wait in memory, about 150 bytes each, while an earlier item is spoken: a 1 MB
    /// line, about a minute of synthesis, may hold tens of thousands of short items' lines.)
    private func finish(_ result: BatchItemResult, at place: Int?) {
        shared.withLock { s in
            var line: String?, files: [String] = []
            switch result.status {
            case .rendered(let seconds, let languages, let voices):
                s.progress.rendered += 1
                s.progress.audioSeconds += seconds
                line = ResultsLog.line(id: result.id, line: result.line, seconds: seconds, languages: languages, voices: voices, timings: options.timings, captions: options.captions)
                files.append(result.id + ".wav")
                if options.timings { files.append(result.id + ".json") }
                if options.captions { files.append(result.id + ".vtt") }
            case .failed(let message):
                s.progress.failed += 1
                line = ResultsLog.line(id: result.id, line: result.line, error: message)
            case .skipped:
                s.progress.skipped += 1
            }
            precondition(line == nil || place != nil, "a result line without its place")
            if let line, let place { s.queue(line, files: files, at: place) }
            s.progress.latest = result
            s.progress.elapsedSeconds = elapsed
            report(s.progress)
        }
    }

    /// When the committing thread last synced (touched by that thread, then by `run()` after it ended).
    private var lastCommit: UInt64 = 0

    /// Syncs the output's file system, then appends the result lines of the items finished
    /// before the sync.
    private func commitPending(droppingPages: Bool = true) {
        lastCommit = monotonicNanoseconds()
        let (lines, files) = shared.withLock { s in
            defer {
                s.pending = []
                s.pendingFiles = []
            }
            return (s.pending, s.pendingFiles)
        }
        guard !lines.isEmpty else { return }
        let dir = open(options.outputDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var problem: Int32 = dir >= 0 ? 0 : errno
        if dir >= 0 {
            if parla_syncfs(dir) != 0 { problem = errno }
            close(dir)
        }
        guard problem == 0 else {
            fail(ParlaError.unwritableOutput(path: options.outputDirectory, reason: "the files could not be flushed to disk: \(String(cString: strerror(problem)))"))
            return
        }
        do { try results.append(lines.joined(separator: "\n")) } catch { fail(error) }
        // The files are on disk now: their pages need not stay in memory. A long batch then
        // keeps a few seconds of output in the page cache instead of pushing everything else
        // out, and its next files are written into pages it has just used.
        for name in files where droppingPages {
            let fd = open(options.outputDirectory + "/" + name, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
            close(fd)
        }
    }
}

/// A running render worker (this program started again with `PARLA_RENDER_WORKER=1`).
private final class WorkerProcess: @unchecked Sendable {  // used by one thread at a time
    let pid: pid_t
    private let input: Int32
    private var output: LineReader
    private var closed = false

    /// Starts a worker, on the `cpu`-th allowed CPU if given, and sends it the settings; see
    /// ``awaitReady()``.
    init(settings: RenderSettings, cpu: Int?) throws {
        let child = try ChildProcess.spawnSelf(role: "parla render worker", environment: [
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
        output = LineReader(fd: child.output, name: "a render worker")
        let settingsLine = try JSONEncoder().encode(settings)
        guard send(Array(settingsLine)) else {
            _ = finish()
            throw ParlaError.engineFailure("a render worker exited before it was ready (run with --jobs 1 and check standard error)")
        }
    }

    /// Waits for the worker to have loaded everything (call once, after `init`).
    /// - Throws: what kept it from starting.
    func awaitReady() throws {
        guard let ready = try output.next(),
              let answer = WorkerResult.decode(ready)
        else {
            _ = finish()
            throw ParlaError.engineFailure("a render worker exited before it was ready (run with --jobs 1 and check standard error)")
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
        guard let line = try output.next(), let result = WorkerResult.decode(line),
              result.id == item.id
        else {
            throw ParlaError.engineFailure("the render worker stopped while rendering this item (run the same command again to retry it)")
        }
        return result
    }

    /// Queues one request line (a JSON chunk) in the worker's input; false if the worker is gone.
    func send(_ bytes: [UInt8]) -> Bool { writeFully(input, bytes + [0x0A]) }

    /// Ends the worker (it exits at the end of its input) and returns its peak memory in bytes,
    /// its per-chunk processes included.
    func finish() -> Int {
        guard !closed else { return 0 }
        closed = true
        close(input)
        let last = try? output.next()
        close(output.fd)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard let last, let stats = WorkerResult.decode(last) else { return 0 }
        return stats.peakBytes ?? 0
    }
}


/// `results.jsonl`: streamed once to learn which ids are done, then appended one whole line per write.
final class ResultsLog: @unchecked Sendable {
    let path: String
    private let fd: Int32
    /// The ids whose last line says "ok".
    private(set) var done: Set<String> = []
    private let directory: String

    init(directory: String) throws {
        self.directory = directory
        path = directory + "/results.jsonl"
        var endsInsideALine = false
        let existing = open(path, O_RDONLY | O_CLOEXEC)
        if existing >= 0 {
            defer { close(existing) }
            // Streamed line by line: only the ids are kept. The last line for an id wins; a line
            // that is not a result (torn by a crash, edited by hand) is skipped.
            var reader = LineReader(fd: existing, name: path, limit: 1 << 20)
            let decoder = JSONDecoder()
            while let line = try reader.next() {
                guard !reader.lastLineWasCut, !line.isEmpty,
                      let object = Self.entry(line) ?? (try? decoder.decode(Entry.self, from: Data(line))) else { continue }
                if object.status == "ok" { done.insert(object.id) } else { done.remove(object.id) }
            }
            var st = stat()
            var last: UInt8 = 0x0A
            if fstat(existing, &st) == 0, st.st_size > 0 { _ = pread(existing, &last, 1, st.st_size - 1) }
            endsInsideALine = last != 0x0A
        } else if errno != ENOENT {
            throw ParlaError.unreadableInput(path: path, reason: String(cString: strerror(errno)))
        }
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ParlaError.unwritableOutput(path: path, reason: String(cString: strerror(errno))) }
        // A line cut short by a crash or a full disk must not swallow the next one.
        if endsInsideALine { try append("") }
    }

    private struct Entry: Decodable {
        var id: String
        var status: String
    }

    /// The id and status of a line exactly as ``line(id:line:seconds:languages:voices:timings:captions:)``
    /// writes it, when its id needs no escapes; nil for anything else, which JSONDecoder then
    /// reads (a million lines take about 1 s this way, and 4–5 s through JSONDecoder).
    private static func entry(_ line: [UInt8]) -> Entry? {
        var c = ByteCursor(bytes: line)
        guard c.take(#"{"id": "#), let id = c.string(), c.take(#", "status": "#), let status = c.string(),
              status == "ok" || status == "failed",
              line.last(where: { $0 != 0x20 && $0 != 0x0D }) == 0x7D else { return nil }  // ends with }
        return Entry(id: id, status: status)
    }

    deinit { close(fd) }

    /// Whether `id` was rendered before and its files are complete: the WAV header's sizes
    /// match the file's size, and the timings and captions asked for exist.
    func isDone(_ id: String, timings: Bool, captions: Bool) -> Bool {
        guard done.contains(id) else { return false }
        let base = directory + "/" + id
        if timings && access(base + ".json", F_OK) != 0 { return false }
        if captions && access(base + ".vtt", F_OK) != 0 { return false }
        let f = open(base + ".wav", O_RDONLY | O_CLOEXEC)
        guard f >= 0 else { return false }
        defer { close(f) }
        var header = [UInt8](repeating: 0, count: 44)
        guard read(f, &header, 44) == 44 else { return false }
        var st = stat()
        guard fstat(f, &st) == 0 else { return false }
        let riff = Int(header[4]) | Int(header[5]) << 8 | Int(header[6]) << 16 | Int(header[7]) << 24
        return header[0..<4] == [0x52, 0x49, 0x46, 0x46] && riff + 8 == Int(st.st_size)
    }

    /// Appends `line` (one or more whole lines) in one write.
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)`` (a full disk, for example).
    func append(_ line: String) throws(ParlaError) {
        guard writeFully(fd, Array((line + "\n").utf8)) else {
            throw .unwritableOutput(path: path, reason: String(cString: strerror(errno)))
        }
    }

    static func line(id: String, line n: Int, seconds: Double, languages: [String], voices: [String], timings: Bool, captions: Bool) -> String {
        "{\"id\": \(JSONText.quoted(id)), \"status\": \"ok\", \"line\": \(n), \"wav\": \(JSONText.quoted(id + ".wav"))"
            + (timings ? ", \"json\": \(JSONText.quoted(id + ".json"))" : "")
            + (captions ? ", \"vtt\": \(JSONText.quoted(id + ".vtt"))" : "")
            + ", \"duration_s\": \(JSONText.threeDecimals(seconds)), \"languages\": [\(languages.map(JSONText.quoted).joined(separator: ", "))]"
            + ", \"voices\": [\(voices.map(JSONText.quoted).joined(separator: ", "))]}"
    }

    static func line(id: String, line n: Int, error: String) -> String {
        "{\"id\": \(JSONText.quoted(id)), \"status\": \"failed\", \"line\": \(n), \"error\": \(JSONText.quoted(error))}"
    }

}
