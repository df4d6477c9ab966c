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

/// One run of a batch: its workers, its results log and its counts.
final class BatchRun: Sendable {
    let options: BatchRenderOptions
    let settings: RenderSettings
    /// Whether Piper voices are installed: their synthesis is some 50 times slower than
    /// espeak-ng's, so chunks are cut smaller (``RenderChunk/maxNeuralWeight``).
    let hasNeuralVoices: Bool
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

    init(
        options: BatchRenderOptions, next: @escaping @Sendable () throws -> BatchEntry?, stopping: StopFlag,
        report: @escaping @Sendable (BatchProgress) -> Void
    ) throws {
        var options = options
        options.timings = options.timings || options.dataset  // a data set's alignments are the timings
        self.options = options
        self.next = next
        self.stopping = stopping
        self.report = report
        let output = options.outputDirectory.path(percentEncoded: false)
        if let code = AtomicFile.makeDirectories(output) {
            throw ParlaError.unwritableOutput(path: output, reason: systemErrorMessage(code))
        }
        let voices = try VoiceCatalog.locateDirectory(explicit: options.voicesDirectory?.path(percentEncoded: false))
        settings = RenderSettings(
            output: output, voicesDirectory: voices, userVoicesDirectory: VoiceCatalog.userPresetDirectory,
            piperVoiceDirectories: options.piperVoiceDirectories?.map { $0.path(percentEncoded: false) }
                ?? VoiceCatalog.piperVoiceDirectories,
            preferredVoices: Dictionary(uniqueKeysWithValues: options.preferredVoices.map { ($0.key.identifier, $0.value.identifier) }),
            timings: options.timings, captions: options.captions, language: options.language?.identifier,
            voice: options.voice, detectsLanguages: options.detectsLanguages && options.language == nil)
        hasNeuralVoices = !VoiceCatalog.piperVoices(in: settings.piperVoiceDirectories).isEmpty
        // The settings first: a run that does not match the directory writes nothing.
        try RenderDirectory.claim(output, options: options)
        results = try ResultsLog(directory: output, name: RenderDirectory.resultsName(shard: options.shard))
        Self.removeAbandonedTemporaryFiles(in: output)
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
        // Group commit on a thread of the log's own (``ResultsLog/startGroupCommit(onFailure:)``).
        let committer = results.startGroupCommit { [self] error in fail(error) }
        let group = DispatchGroup()
        for (index, worker) in workers.enumerated() {
            group.enter()
            startThread(name: "parla.render") { [self] in
                defer { group.leave() }
                drive(worker, cpu: cpu(forWorker: index))
            }
        }
        group.wait()
        committer.finish()
        var final = shared.withLock { s in
            var p = s.progress
            p.latest = nil
            p.stopped = stopping.isRaised && !s.inputEnded
            p.workerPeakBytes = s.workerPeak
            p.peakBytes = peakResidentBytes()
            return p
        }
        final.elapsed = elapsed
        if let error = shared.withLock({ $0.fatal }) { throw error }
        return final
    }

    private var elapsed: Duration { .nanoseconds(Int64(clamping: monotonicNanoseconds() &- started)) }

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
        var queued: [RenderChunk] = []  // sent to `worker`, not all answered yet
        var answered = 0  // items of queued[0] answered
        var waiting: [RenderChunk] = []  // to send again: their worker died before finishing them
        var idleDeaths = 0  // workers in a row that died before taking a chunk
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
                        finish(
                            BatchItemResult(
                                id: item.id, line: item.line,
                                status: .failed("the item cannot be sent to a render worker: check that its rate and pitch are numbers")),
                            at: place)
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
                    fail(
                        ParlaError.engineFailure(
                            "render workers keep exiting before they take an item (see the messages above; try --jobs 1)"))
                    break
                }
                continue
            }
            idleDeaths = 0
            guard let chunk = queued.first else { break }
            let item = chunk.rendered[answered]
            let place = chunk.sequence.indices.contains(answered) ? chunk.sequence[answered] : nil
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
            let status: BatchItemResult.Status =
                result.ok
                ? .rendered(duration: .seconds(result.seconds), languages: result.languages, voices: result.voices)
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
                    let maxWeight = hasNeuralVoices ? RenderChunk.maxNeuralWeight : RenderChunk.maxWeight
                    while !input.ended, weight < maxWeight, entries.count < maxItems, !isStopping {
                        guard let entry = try next() else {
                            input.ended = true
                            shared.withLock { $0.inputEnded = true }
                            break
                        }
                        switch entry {
                        case .invalid(let e):
                            if let shard = options.shard, !shard.contains(e.id) { continue }
                            reports.append(
                                (BatchItemResult(id: e.id, line: e.line, status: .failed("line \(e.line): \(e.reason)")), input.sequence))
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
                // One place per entry that is not a replay: both grow together above, and only
                // trailing replays (which have no place) were dropped.
                return RenderChunk(entries: entries, sequence: sequence)
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
    /// after a machine crash (group commit, ``ResultsLog/startGroupCommit(onFailure:)``). A skipped item has no line.
    /// (Lines wait in memory, about 150 bytes each, while an earlier item is spoken: a 1 MB
    /// line, about a minute of synthesis, may hold tens of thousands of short items' lines.)
    private func finish(_ result: BatchItemResult, at place: Int?) {
        shared.withLock { s in
            var line: String?, files: [String] = []
            switch result.status {
            case .rendered(let duration, let languages, let voices):
                s.progress.rendered += 1
                s.progress.audio += duration
                line = ResultsLog.line(
                    id: result.id, line: result.line, seconds: duration.inSeconds, languages: languages, voices: voices,
                    timings: options.timings,
                    captions: options.captions)
                files.append(result.id + ".wav")
                if options.timings { files.append(result.id + ".json") }
                if options.captions { files.append(result.id + ".vtt") }
            case .failed(let message):
                s.progress.failed += 1
                line = ResultsLog.line(id: result.id, line: result.line, error: message)
            case .skipped:
                s.progress.skipped += 1
            }
            if let line { results.queue(line, files: files, at: place) }
            s.progress.latest = result
            s.progress.elapsed = elapsed
            report(s.progress)
        }
    }
}
