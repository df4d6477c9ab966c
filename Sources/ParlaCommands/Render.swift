import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `parla render`: many texts to WAV files, resumable, shardable. (Renders in this process,
/// one item after another; worker processes for every core are not built yet.)
struct Render: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Render many texts to WAV files: one per line of a text, TSV or JSONL file.",
        discussion: """
            Each line of INPUT is one utterance: a plain text line (its id is the line number, \
            zero-padded: 000001), 'id<TAB>text' or 'id<TAB>language<TAB>text' (.tsv), or a JSON object \
            {"id", "text", "language"?, "voice"?, "rate"?, "pitch"?, "ssml"?} (.jsonl). Blank lines are \
            skipped. '-' reads standard input.

            Writes DIR/ID.wav (and DIR/ID.json with --timings), each under a temporary name renamed \
            into place when complete, and appends one line per item to DIR/results.jsonl: id, status \
            (ok or failed), files, duration, languages and voices, or the error. A bad item is \
            reported there and on standard error, and the batch goes on; the exit status is 1 if any \
            item failed. Run the same command again to resume: items whose WAV file is complete are \
            skipped (--force renders them again). Ctrl-C stops after the item being rendered.

            --shard K/N renders only the items whose id hashes to K (0-based) of N, the same on every \
            machine: run shards 0..N-1 anywhere and concatenate their results.jsonl files.
            """)

    @Argument(help: ArgumentHelp("The input file ('-' for standard input).", valueName: "input"))
    var input: String

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("The output directory (created if needed).", valueName: "dir"))
    var output: String

    @Option(name: .customLong("format"), help: ArgumentHelp("How to read the input: text, tsv or jsonl (default: from the file name; text for standard input).", valueName: "format"))
    var format: BatchInput.Format?

    @Flag(name: .customLong("timings"), help: "Also write ID.json word timings (the schema of 'parla say --timings').")
    var timings = false

    @Flag(name: .customLong("force"), help: "Render every item again, even those already done.")
    var force = false

    @Option(name: .customLong("shard"), help: ArgumentHelp("Render only shard K of N (0-based), e.g. 0/4 or $(JOB_COMPLETION_INDEX)/4 in a Kubernetes Indexed Job.", valueName: "K/N"))
    var shard: String?

    @Option(name: .customLong("progress"), help: ArgumentHelp("Progress on standard error: 'bar' (default on a terminal), 'json' (one object per item) or 'none'.", valueName: "mode"))
    var progress: ProgressMode?

    @Option(name: [.customShort("l"), .customLong("language")], help: ArgumentHelp("Language of items that give none (default: detected).", valueName: "tag"))
    var language: String?

    @Option(name: [.customShort("v"), .customLong("voice")], help: ArgumentHelp("Voice of items that give none.", valueName: "id"))
    var voice: String?

    @OptionGroup var catalogOptions: CatalogOptions

    enum ProgressMode: String, ExpressibleByArgument { case bar, json, none }

    func validate() throws {
        if let shard { _ = try Self.parseShard(shard) }
    }

    static func parseShard(_ text: String) throws -> (index: Int, count: Int) {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]), n > 0, (0..<n).contains(k) else {
            throw ValidationError("--shard needs K/N with 0 ≤ K < N, e.g. 0/4 (got '\(text)').")
        }
        return (k, n)
    }

    func run() async throws {
        let catalog = try catalogOptions.load()
        let detector = language == nil ? try LanguageDetector.load(catalog: catalog) : nil
        let synth = SpeechSynthesizer(catalog: catalog, detectsLanguages: detector != nil, detector: detector)
        let shard = try self.shard.map(Self.parseShard)
        let format = self.format ?? (input == "-" ? .text : BatchInput.Format.guess(path: input))
        let defaultLanguage = try language.map { try LanguageTag(parsing: $0) }
        let defaultVoice = try voice.map { try catalog.voice(identifier: $0) }

        let fd: Int32 = input == "-" ? 0 : open(input, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ParlaError.unreadableInput(path: input, reason: String(cString: strerror(errno))) }
        try makeDirectory(output)
        let results = try ResultsLog(directory: output)
        var counts = Counts()
        let mode = progress ?? (isatty(2) != 0 ? .bar : .none)
        let stopping = Atomic<Bool>(false)
        let signals = Interrupt.onSignal { stopping.store(true, ordering: .relaxed) }
        defer { signals.forEach { $0.cancel() } }
        let started = monotonicNanoseconds()

        var reader = LineReader(fd: fd)
        var number = 0
        while !stopping.load(ordering: .relaxed), let bytes = try reader.next() {
            number += 1
            guard let text = String(validating: bytes, as: UTF8.self) else {
                let offset = TextInput.firstInvalidUTF8Offset(bytes) ?? 0
                let id = "line-\(number)"
                if shard.map({ BatchInput.shard(of: id, count: $0.count) == $0.index }) ?? true {
                    record(.failed(id: id, line: number, error: "line \(number) is not valid UTF-8 (byte \(offset) of the line); convert the input to UTF-8"), results, &counts, mode)
                }
                continue
            }
            guard let parsed = BatchInput.item(fromLine: Substring(text), number: number, format: format) else { continue }
            let id = (try? parsed.get().id) ?? { if case .failure(let e) = parsed { return e.id } else { return "" } }()
            if let shard, BatchInput.shard(of: id, count: shard.count) != shard.index { continue }
            switch parsed {
            case .failure(let e):
                record(.failed(id: e.id, line: e.line, error: "line \(e.line): \(e.reason)"), results, &counts, mode)
            case .success(let item):
                if !force && results.isDone(item.id) {
                    counts.skipped += 1
                    continue
                }
                let outcome = await renderItem(item, synth: synth, catalog: catalog, language: defaultLanguage, voice: defaultVoice)
                record(outcome, results, &counts, mode)
            }
            if mode == .bar { printBar(counts, since: started) }
        }
        if input != "-" { close(fd) }
        if mode == .bar { printError("") }
        let summary = "\(counts.ok) rendered, \(counts.failed) failed, \(counts.skipped) already done; \(String(format1: counts.audioSeconds / 60)) min of audio; results in \(output)/results.jsonl"
        if stopping.load(ordering: .relaxed) {
            printError("Interrupted after \(counts.ok + counts.failed) items (\(summary)). Run the same command again to resume.")
            throw ExitCode(130)
        }
        printError(summary)
        if counts.failed > 0 { throw ExitCode(1) }
    }

    struct Counts {
        var ok = 0
        var failed = 0
        var skipped = 0
        var audioSeconds = 0.0
    }

    enum Outcome {
        case ok(id: String, line: Int, seconds: Double, languages: [String], voices: [String], timings: Bool)
        case failed(id: String, line: Int, error: String)
    }

    func renderItem(_ item: BatchItem, synth: SpeechSynthesizer, catalog: VoiceCatalog, language: LanguageTag?, voice: SpeechVoice?) async -> Outcome {
        do {
            if item.text.utf8.count > 1_000_000 {
                throw UserError("the text is longer than 1 MB: split it into several items")
            }
            var u = item.isSSML ? try Utterance(ssml: item.text) : Utterance(string: item.text)
            if let l = item.language { u.language = try LanguageTag(parsing: l) } else if let language { u.language = language }
            if let v = item.voice { u.voice = try catalog.voice(identifier: v) } else if let voice { u.voice = voice }
            if let r = item.rate {
                guard SpeechPlan.rateRange.contains(r) else { throw ParlaError.parameterOutOfRange(name: "rate", value: r, range: SpeechPlan.rateRange) }
                u.rate = r
            }
            if let p = item.pitch {
                guard (0...99).contains(p) else { throw ParlaError.parameterOutOfRange(name: "pitch", value: p, range: 0...99) }
                u.pitchMultiplier = p / 50
            }
            let wav = URL(fileURLWithPath: output).appendingPathComponent(item.id + ".wav")
            let json = timings ? URL(fileURLWithPath: output).appendingPathComponent(item.id + ".json") : nil
            let timeline = try await synth.write(u, to: wav, timingsURL: json)
            var seenL = Set<String>(), seenV = Set<String>()
            return .ok(
                id: item.id, line: item.line, seconds: Double(timeline.sampleCount) / Double(timeline.sampleRate),
                languages: timeline.segments.map(\.language.identifier).filter { seenL.insert($0).inserted },
                voices: timeline.segments.map(\.voice).filter { seenV.insert($0).inserted }, timings: timings)
        } catch {
            return .failed(id: item.id, line: item.line, error: "\(error)")
        }
    }

    func record(_ outcome: Outcome, _ results: ResultsLog, _ counts: inout Counts, _ mode: ProgressMode) {
        let line: String
        switch outcome {
        case .ok(let id, let n, let seconds, let languages, let voices, let withTimings):
            counts.ok += 1
            counts.audioSeconds += seconds
            line = "{\"id\": \(JSONText.quoted(id)), \"status\": \"ok\", \"line\": \(n), \"wav\": \(JSONText.quoted(id + ".wav"))"
                + (withTimings ? ", \"json\": \(JSONText.quoted(id + ".json"))" : "")
                + ", \"duration_s\": \(String(format: seconds)), \"languages\": [\(languages.map(JSONText.quoted).joined(separator: ", "))]"
                + ", \"voices\": [\(voices.map(JSONText.quoted).joined(separator: ", "))]}"
        case .failed(let id, let n, let error):
            counts.failed += 1
            line = "{\"id\": \(JSONText.quoted(id)), \"status\": \"failed\", \"line\": \(n), \"error\": \(JSONText.quoted(error))}"
            if mode == .bar { printError("") }
            printError("error: item \(id): \(error)")
        }
        results.append(line)
        if mode == .json {
            printError("{\"done\": \(counts.ok), \"failed\": \(counts.failed), \"skipped\": \(counts.skipped), \"audio_s\": \(String(format: counts.audioSeconds))}")
        }
    }

    func printBar(_ c: Counts, since start: UInt64) {
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        let rate = Double(c.ok + c.failed) / max(elapsed, 0.001)
        var line = "\r\u{1B}[K\(c.ok) done, \(c.failed) failed, \(c.skipped) skipped · \(String(format1: c.audioSeconds / 60)) min of audio · \(String(format1: rate)) items/s"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    func makeDirectory(_ path: String) throws {
        if let code = Processes.makeDirectories(path) {
            throw ParlaError.unwritableOutput(path: path, reason: String(cString: strerror(code)))
        }
    }
}

extension BatchInput.Format: ExpressibleByArgument {}

extension String {
    /// `value` with three decimals.
    init(format value: Double) {
        let thousandths = Int((value * 1000).rounded())
        let frac = String(abs(thousandths) % 1000)
        self = (thousandths < 0 ? "-" : "") + "\(abs(thousandths) / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }
}

/// `results.jsonl`: read once to know what is done, then appended one whole line per write.
final class ResultsLog {
    let path: String
    private let fd: Int32
    private var done: Set<String> = []
    private let directory: String

    init(directory: String) throws {
        self.directory = directory
        path = directory + "/results.jsonl"
        if let text = try? TextInput.read(path: path) {
            // The last line for an id wins.
            var status: [String: Bool] = [:]
            for line in text.split(separator: "\n") {
                guard let object = try? JSONDecoder().decode(Entry.self, from: Data(line.utf8)) else { continue }
                status[object.id] = object.status == "ok"
            }
            done = Set(status.filter { $0.value }.keys)
        }
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ParlaError.unwritableOutput(path: path, reason: String(cString: strerror(errno))) }
    }

    private struct Entry: Decodable {
        var id: String
        var status: String
    }

    deinit { close(fd) }

    /// Whether `id` was rendered before and its WAV file is complete (its header's sizes match
    /// the file's size).
    func isDone(_ id: String) -> Bool {
        guard done.contains(id) else { return false }
        let wav = directory + "/" + id + ".wav"
        let f = open(wav, O_RDONLY | O_CLOEXEC)
        guard f >= 0 else { return false }
        defer { close(f) }
        var header = [UInt8](repeating: 0, count: 44)
        guard read(f, &header, 44) == 44 else { return false }
        var st = stat()
        guard fstat(f, &st) == 0 else { return false }
        let riff = Int(header[4]) | Int(header[5]) << 8 | Int(header[6]) << 16 | Int(header[7]) << 24
        return header[0..<4] == [0x52, 0x49, 0x46, 0x46] && riff + 8 == Int(st.st_size)
    }

    func append(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
