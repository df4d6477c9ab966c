import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// `parla render`: many texts to WAV files, in worker processes on every core, resumable,
/// shardable. The work is done by ``BatchRenderer``; this command reads the input, shows
/// progress and handles Ctrl-C.
struct Render: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Render many texts to WAV files, on every core: one per line of a text, TSV or JSONL file, or one per .txt file of a directory.",
        discussion: """
            Each line of INPUT is one utterance: a plain text line (its id is the line number, \
            zero-padded: 000001), 'id<TAB>text' or 'id<TAB>language<TAB>text' (.tsv), or a JSON object \
            {"id", "text", "language"?, "voice"?, "rate"?, "pitch"?, "ssml"?} (.jsonl). Blank lines are \
            skipped. '-' reads standard input. If INPUT is a directory, each of its .txt files is one \
            utterance (id: the file name without .txt), read and spoken paragraph by paragraph, so a \
            file may be of any length.

            Writes DIR/ID.wav (and DIR/ID.json with --timings, DIR/ID.vtt with --vtt), each under a \
            temporary name renamed into place when complete, and appends one line per item to \
            DIR/results.jsonl: id, status (ok or failed), files, duration, languages and voices, or the \
            error. A bad item is reported there and on standard error, and the batch goes on; the exit \
            status is 1 if any item failed. Run the same command again to resume: items already done \
            are skipped (--force renders them again). Ctrl-C stops after the items being rendered.

            --jobs N worker processes render in parallel (default: one per core). Items are spoken in \
            chunks of consecutive items, cut the same way for any --jobs, each from the same engine \
            state, so the files are byte-identical for any --jobs and after a resume (results.jsonl, \
            whose lines are in input order, for any --jobs). espeak-ng's state carries over from item to item within \
            a chunk, so another input order or sharding changes some samples and pauses; with \
            --isolate every item is spoken from a fresh engine and depends on nothing else.

            --shard K/N renders only the items whose id hashes to K (0-based) of N, the same on every \
            machine, and records them in DIR/results-K-of-N.jsonl: the shards of a job (a Slurm array, \
            a Kubernetes Indexed Job) can share DIR on shared storage. DIR/render.json records the \
            settings that change the files; a run with other settings is refused before it writes \
            anything. When every shard is done, the same command with --merge instead of --shard \
            checks that every item is rendered exactly once and writes DIR/results.jsonl in input order.

            --dataset makes DIR a data set that machine-learning tools load as it is (Hugging Face \
            datasets' audiofolder): the word timings, and DIR/metadata.jsonl with a row per item \
            (file_name, text, language, voice, duration, and words: each word's start and end in \
            seconds and its place in text, in characters), written at the end of the run, or by \
            --merge for a sharded one.
            """)

    @Argument(help: ArgumentHelp("The input file, a directory of .txt files, or '-' for standard input.", valueName: "input"))
    var input: String

    @Option(
        name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("The output directory (created if needed).", valueName: "dir"))
    var output: String

    @Option(
        name: .customLong("format"),
        help: ArgumentHelp(
            "How to read an input file: text, tsv or jsonl (default: from the file name; text for standard input).", valueName: "format"))
    var format: BatchInput.Format?

    @Option(
        name: [.customShort("j"), .customLong("jobs")],
        help: ArgumentHelp("Worker processes (default: the number of cores, \(BatchRenderOptions.cores) here).", valueName: "n"))
    var jobs: Int?

    @Flag(name: .customLong("timings"), help: "Also write ID.json word timings (the schema of 'parla say --timings').")
    var timings = false

    @Flag(name: .customLong("vtt"), help: "Also write ID.vtt WebVTT captions, one cue per sentence.")
    var vtt = false

    @Flag(name: .customLong("force"), help: "Render every item again, even those already done.")
    var force = false

    @Flag(
        name: .customLong("no-pin"),
        help:
            "Let the system move workers between CPUs. By default, with no more jobs than CPUs, worker i runs on the i-th CPU: cheaper (5-8% less CPU time measured on a VM), but slower if other programs keep one of those CPUs busy."
    )
    var noPin = false

    @Flag(
        name: .customLong("isolate"),
        help:
            "Speak every item from a fresh engine, in a process of its own: its audio then depends on the item alone, the same in any input order or shard. Costs more CPU time (a process per item instead of per chunk); use the same choice when resuming."
    )
    var isolate = false

    @Option(
        name: .customLong("shard"),
        help: ArgumentHelp(
            "Render only shard K of N (0-based), e.g. 0/4 or $(JOB_COMPLETION_INDEX)/4 in a Kubernetes Indexed Job.", valueName: "K/N"))
    var shard: String?

    @Flag(
        name: .customLong("merge"),
        help:
            "Render nothing: check DIR's results (every shard's results-K-of-N.jsonl, or results.jsonl) against INPUT, report items missing, failed, incomplete or rendered twice (exit status 1 if any), and write DIR/results.jsonl in input order (and DIR/metadata.jsonl with --dataset). Audio is never changed; run it as often as you like."
    )
    var merge = false

    @Flag(
        name: .customLong("dataset"),
        help:
            "Write a data set: word timings, and DIR/metadata.jsonl (audiofolder layout, with word alignments) once the whole input is rendered."
    )
    var dataset = false

    @Option(
        name: .customLong("progress"),
        help: ArgumentHelp(
            "Progress on standard error: 'bar' (default on a terminal), 'json' (one object per item) or 'none' (default otherwise).",
            valueName: "mode"))
    var progress: ProgressMode?

    @Option(
        name: [.customShort("l"), .customLong("language")],
        help: ArgumentHelp("Language of items that give none (default: detected).", valueName: "tag"))
    var language: String?

    @Option(name: [.customShort("v"), .customLong("voice")], help: ArgumentHelp("Voice of items that give none.", valueName: "id"))
    var voice: String?

    @OptionGroup var catalogOptions: CatalogOptions

    enum ProgressMode: String, ExpressibleByArgument { case bar, json, none }

    func validate() throws {
        if let shard { _ = try Self.parseShard(shard) }
        if merge && shard != nil {
            throw ValidationError("--merge joins the shards' results: give it the input and -o of the shards, without --shard.")
        }
        if merge && force { throw ValidationError("--merge renders nothing: --force does not go with it.") }
        if dataset && !merge && shard == nil && input == "-" {
            throw ValidationError(
                "--dataset reads the input again at the end to write metadata.jsonl: give an input file, not standard input (or merge with --merge)."
            )
        }
        if let jobs, jobs < 1 { throw ValidationError("--jobs needs a number of worker processes of at least 1 (got \(jobs)).") }
    }

    static func parseShard(_ text: String) throws -> BatchShard {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]), let shard = BatchShard(index: k, count: n) else {
            throw ValidationError("--shard needs K/N with 0 ≤ K < N, e.g. 0/4 (got '\(text)').")
        }
        return shard
    }

    func run() async throws {
        let catalog = try catalogOptions.load()
        if merge {
            try finish(catalog: catalog, merging: true)
            return
        }
        var options = BatchRenderOptions(outputDirectory: URL(filePath: output), jobs: jobs)
        options.timings = timings
        options.dataset = dataset
        options.captions = vtt
        options.force = force
        options.pinsWorkers = !noPin
        options.isolatesItems = isolate
        options.shard = try shard.map(Self.parseShard)
        options.language = try language.map { try LanguageTag(parsing: $0) }
        options.voice = try voice.map { try catalog.voice(identifier: $0) }
        options.voicesDirectory = URL(filePath: try VoiceCatalog.locateDirectory(explicit: catalogOptions.plain.catalogDirectory))
        options.piperVoiceDirectories = catalogOptions.plain.piperDirectories.map { URL(filePath: $0) }
        for (tag, voice) in try VoiceCatalog.parseVoicePreferences(catalogOptions.preferVoice) {
            options.preferredVoices[tag] = try catalog.voice(identifier: voice)
        }

        let (source, total) = try openInput(catalog: catalog)
        let mode = progress ?? (isatty(2) != 0 ? .bar : .none)
        let renderer = BatchRenderer(options: options)
        let interrupts = Atomic<Int>(0)
        let signalHandler = Interrupt.onSignal {
            if interrupts.add(1, ordering: .relaxed).newValue == 1 {
                renderer.stop()
                printError("\nStopping after the items being rendered… (Ctrl-C again to quit at once)")
            } else {
                // Each worker finishes at most its current item, removes its chunk's temporary
                // files and exits; nothing half-written is left under a final name, and a
                // rerun redoes what was not recorded.
                printError("Quitting now. Run the same command again to resume.")
                Glibc.exit(130)
            }
        }
        defer { signalHandler.cancel() }
        let expected = total.map { Double($0) / Double(options.shard?.count ?? 1) }
        var display = ProgressDisplay(mode: mode, expected: expected)
        var final = BatchProgress()
        for try await p in renderer.render(source) {
            if p.isFinal {
                final = p
                break
            }
            if let latest = p.latest, case .failed(let message) = latest.status {
                display.clearLine()
                printError("error: item \(latest.id): \(message)")
            }
            display.show(p)
        }
        display.clearLine()
        let mb = { (bytes: Int?) in String(format1: Double(bytes ?? 0) / 1_048_576) }
        let peak = "; peak memory \(mb(final.peakBytes)) MB here, \(mb(final.workerPeakBytes)) MB per worker"
        let summary =
            "\(final.rendered) rendered, \(final.failed) failed, \(final.skipped) already done; \(String(format1: final.audio.inSeconds / 60)) min of audio in \(String(format1: final.elapsed.inSeconds)) s with \(options.jobs) worker(s)\(peak); results in \(output)/\(RenderDirectory.resultsName(shard: options.shard))"
        if final.stopped {
            printError("Interrupted (\(summary)). Run the same command again to resume.")
            throw ExitCode(130)
        }
        printError(summary)
        if dataset && options.shard == nil {
            try finish(catalog: catalog, merging: false)  // exit status 1 if an item failed
        } else if dataset {
            printError(
                "The data set's metadata.jsonl is written once every shard is done: the same command with --merge instead of --shard.")
        }
        if final.failed > 0 { throw ExitCode(1) }
    }

    /// `--merge`, or a data set's end: ``RenderMerge`` over the input and DIR, reported on
    /// standard error; exit status 1 if an item is not rendered exactly once.
    func finish(catalog: VoiceCatalog, merging: Bool) throws {
        let (source, _) = try openInput(catalog: catalog)
        let report = try RenderMerge.run(directory: output, entries: source, dataset: dataset)
        let list = { (ids: [String]) in ids.prefix(10).joined(separator: ", ") + (ids.count > 10 ? ", … (\(ids.count) in all)" : "") }
        if !report.shardsNotRun.isEmpty {
            printError("not run: \(list(report.shardsNotRun)) (run those shards, then --merge again)")
        }
        if !report.missing.isEmpty { printError("missing (no run has rendered them): \(list(report.missing))") }
        for f in report.failed.prefix(10) { printError("failed: \(f.id): \(f.error)") }
        if report.failed.count > 10 { printError("failed: … \(report.failed.count) in all") }
        if !report.incomplete.isEmpty { printError("marked rendered but the WAV is missing or incomplete: \(list(report.incomplete))") }
        for t in report.twice.prefix(10) { printError("rendered twice: \(t.id) in \(t.files.joined(separator: " and "))") }
        if report.twice.count > 10 {
            printError("rendered twice: … \(report.twice.count) in all (shards of another N share this directory)")
        }
        if !report.withoutTimings.isEmpty { printError("no word timings (ID.json) for the data set: \(list(report.withoutTimings))") }
        var summary = "\(report.items) items: \(report.rendered) rendered, \(report.failed.count) failed, \(report.missing.count) missing"
        if !report.twice.isEmpty { summary += ", \(report.twice.count) rendered twice" }
        summary += " (from \(report.sources.joined(separator: ", ")))"
        if merging && report.sources.first != "results.jsonl" { summary += "; results in \(output)/results.jsonl" }
        if let rows = report.datasetRows { summary += "; data set: \(rows) rows in \(output)/metadata.jsonl" }
        printError(summary)
        if !report.isComplete { throw ExitCode(1) }
    }

    /// The entries of the input, and how many there are when that is cheap to know.
    func openInput(catalog: VoiceCatalog) throws -> (@Sendable () throws -> BatchEntry?, Int?) {
        var isDirectory = false
        if input != "-", FileManager.default.fileExists(atPath: input, isDirectory: &isDirectory), isDirectory {
            let files: [String]
            do {
                files = try FileManager.default.contentsOfDirectory(atPath: input).filter { $0.hasSuffix(".txt") }.sorted()
            } catch {
                throw ParlaError.unreadableInput(path: input, reason: "\(error)")
            }
            if files.isEmpty { throw ValidationError("The directory \(input) has no .txt files to render.") }
            let entries = files.map { name -> BatchEntry in
                let id = String(name.dropLast(4))
                if let problem = BatchInput.invalidID(id) {
                    return .invalid(BatchInput.LineError(id: name, line: 0, reason: "\(name): \(problem)"))
                }
                return .item(BatchItem(id: id, text: "", language: nil, line: 0, textFile: URL(filePath: input + "/" + name)))
            }
            let iterator = Locked(entries.makeIterator())
            return ({ iterator.withValue { $0.next() } }, entries.count)
        }
        let format = self.format ?? (input == "-" ? .text : BatchInput.Format.guess(path: input))
        let fd: Int32 = input == "-" ? 0 : open(input, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ParlaError.unreadableInput(path: input, reason: systemErrorMessage()) }
        let total = input == "-" ? nil : Self.countLines(fd)
        // Lines over 1 MB are not held whole: their item fails.
        let reader = Locked(LineReader(fd: fd, name: input == "-" ? "standard input" : input, limit: 1 << 20))
        let number = Locked(0)
        return (
            {
                while let (bytes, cut) = try reader.withValue({ r throws(ParlaError) in try r.next().map { ($0, r.lastLineWasCut) } }) {
                    let n = number.withValue {
                        $0 += 1; return $0
                    }
                    if cut {
                        let id = format == .text ? BatchInput.lineID(n) : "line-\(n)"
                        return .invalid(
                            BatchInput.LineError(
                                id: id, line: n,
                                reason:
                                    "the line is longer than 1 MB: split it into several items, or put the text in a .txt file of a directory input"
                            ))
                    }
                    guard let text = String(validating: bytes, as: UTF8.self) else {
                        let offset = TextInput.firstInvalidUTF8Offset(bytes) ?? 0
                        return .invalid(
                            BatchInput.LineError(
                                id: "line-\(n)", line: n, reason: "not valid UTF-8 (byte \(offset) of the line); convert the input to UTF-8"
                            ))
                    }
                    switch BatchInput.item(fromLine: Substring(text), number: n, format: format, catalog: catalog) {
                    case nil: continue
                    case .success(let item): return .item(item)
                    case .failure(let e): return .invalid(e)
                    }
                }
                return nil
            }, total
        )
    }

    /// Non-blank lines of a regular file (then rewinds it); nil for pipes.
    static func countLines(_ fd: Int32) -> Int? {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        var count = 0
        var previous: UInt8 = 0x0A
        var block = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = block.withUnsafeMutableBytes { read(fd, $0.baseAddress, 1 << 16) }
            if n <= 0 { break }
            for b in block[0..<n] {
                if previous == 0x0A && b != 0x0A { count += 1 }
                previous = b
            }
        }
        lseek(fd, 0, SEEK_SET)
        return count
    }
}

/// The progress line on a terminal, or JSON progress lines.
struct ProgressDisplay {
    let mode: Render.ProgressMode
    /// Items expected in this run (an estimate when sharded), if known.
    let expected: Double?
    private var lastDraw: UInt64 = 0
    private var drawn = false

    init(mode: Render.ProgressMode, expected: Double?) {
        self.mode = mode
        self.expected = expected
    }

    mutating func show(_ p: BatchProgress) {
        let handled = Double(p.rendered + p.failed + p.skipped)
        let worked = Double(p.rendered + p.failed)
        let rate = worked / max(p.elapsed.inSeconds, 0.001)
        let eta: Double? = expected.flatMap { e in rate > 0 ? max(0, e - handled) / rate : nil }
        switch mode {
        case .none:
            return
        case .json:
            var line =
                "{\"id\": \(JSONText.quoted(p.latest?.id ?? "")), \"done\": \(p.rendered), \"failed\": \(p.failed), \"skipped\": \(p.skipped)"
            if let expected { line += ", \"total\": \(Int(expected.rounded()))" }
            line +=
                ", \"audio_s\": \(JSONText.threeDecimals(p.audio.inSeconds)), \"elapsed_s\": \(JSONText.threeDecimals(p.elapsed.inSeconds)), \"items_per_s\": \(JSONText.threeDecimals(rate))"
            if let eta { line += ", \"eta_s\": \(JSONText.threeDecimals(eta))" }
            printError(line + "}")
        case .bar:
            let now = monotonicNanoseconds()
            guard now - lastDraw > 100_000_000 else { return }  // at most 10 redraws a second
            lastDraw = now
            var line = "\r\u{1B}[K"
            if let expected, expected > 0 {
                let fraction = min(1, handled / expected)
                let width = 24
                let filled = Int((fraction * Double(width)).rounded(.down))
                line += "[" + String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled) + "] "
                line += "\(Int(handled))/\(Int(expected.rounded())) "
            } else {
                line += "\(Int(handled)) items "
            }
            line += "· \(String(format1: p.audio.inSeconds / 3600)) h audio · \(String(format1: rate)) items/s"
            if p.failed > 0 { line += " · \(p.failed) failed" }
            if p.skipped > 0 { line += " · \(p.skipped) skipped" }
            if let eta { line += " · ETA \(Self.clock(eta))" }
            line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
            drawn = true
        }
    }

    mutating func clearLine() {
        guard drawn else { return }
        printError("\r\u{1B}[K", terminator: "")
        drawn = false
    }

    /// `H:MM:SS` or `M:SS`.
    static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        let pad = { (v: Int) in v < 10 ? "0\(v)" : "\(v)" }
        return s >= 3600 ? "\(s / 3600):\(pad(s / 60 % 60)):\(pad(s % 60))" : "\(s / 60):\(pad(s % 60))"
    }
}

/// A value that several threads use in turn, behind a lock (a `Mutex` that closures can share).
final class Locked<Value>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: sending Value) { mutex = Mutex(value) }
    func withValue<R, E: Error>(_ body: (inout sending Value) throws(E) -> sending R) throws(E) -> sending R {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending R in try body(&value) }
    }
}

extension BatchInput.Format: ExpressibleByArgument {}
