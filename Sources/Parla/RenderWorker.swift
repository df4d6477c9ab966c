internal import CParlaWorker
import FoundationEssentials
import ParlaESpeak
#if canImport(Glibc)
import Glibc
#endif

/// What every render worker of a batch is told once, as the first line of its input.
struct RenderSettings: Codable, Sendable {
    var output: String
    var voicesDirectory: String
    var userVoicesDirectory: String?
    var timings: Bool
    var captions: Bool
    var language: String?
    var voice: String?
    var detectsLanguages: Bool
}

/// A worker's answer for one item, one JSON line.
struct WorkerResult: Decodable, Sendable, Equatable {  // written by `jsonLine`
    var id: String
    var ok: Bool
    var seconds: Double = 0
    var languages: [String] = []
    var voices: [String] = []
    var error: String?
    /// Set on the worker's first line instead of a result when it cannot start.
    var fatal: String?
    /// On the worker's last line, at the end of its input: its peak resident memory or its
    /// per-chunk processes', whichever is larger, in bytes.
    var peakBytes: Int?
}

extension WorkerResult {
    /// This result as one JSON line (what `JSONEncoder` would write, and `JSONDecoder` reads),
    /// written by hand: the encoder cost about half a percent of a batch.
    var jsonLine: [UInt8] {
        var s = "{\"id\":" + JSONText.quoted(id) + ",\"ok\":" + (ok ? "true" : "false")
        s += ",\"seconds\":" + (seconds.isFinite ? String(seconds) : "0")
        s += ",\"languages\":[" + languages.map(JSONText.quoted).joined(separator: ",") + "]"
        s += ",\"voices\":[" + voices.map(JSONText.quoted).joined(separator: ",") + "]"
        if let error { s += ",\"error\":" + JSONText.quoted(error) }
        if let fatal { s += ",\"fatal\":" + JSONText.quoted(fatal) }
        if let peakBytes { s += ",\"peakBytes\":\(peakBytes)" }
        return Array((s + "}\n").utf8)
    }
}

extension WorkerResult {
    /// A result line (without its line feed): read directly when it is exactly as ``jsonLine``
    /// writes it with no escaped character, else by JSONDecoder, which cost the orchestrator
    /// about 1% of a batch's CPU time. Nil if it is not a result.
    static func decode(_ line: [UInt8]) -> WorkerResult? {
        direct(line) ?? (try? JSONDecoder().decode(WorkerResult.self, from: Data(line)))
    }

    static func direct(_ line: [UInt8]) -> WorkerResult? {
        var c = ByteCursor(bytes: line)
        guard c.take(#"{"id":"#), let id = c.string(), c.take(#","ok":"#) else { return nil }
        let ok: Bool
        if c.take("true") { ok = true } else if c.take("false") { ok = false } else { return nil }
        guard c.take(#","seconds":"#), let seconds = c.number().flatMap(Double.init), seconds.isFinite,
              c.take(#","languages":"#), let languages = c.strings(),
              c.take(#","voices":"#), let voices = c.strings() else { return nil }
        var result = WorkerResult(id: id, ok: ok, seconds: seconds, languages: languages, voices: voices)
        if c.take(#","error":"#) {
            guard let error = c.string() else { return nil }
            result.error = error
        }
        if c.take(#","fatal":"#) {
            guard let fatal = c.string() else { return nil }
            result.fatal = fatal
        }
        if c.take(#","peakBytes":"#) {
            guard let peak = c.number().flatMap({ Int($0) }) else { return nil }
            result.peakBytes = peak
        }
        guard c.take("}"), c.atEnd else { return nil }
        return result
    }
}

/// Reads the few JSON shapes of the lines Parla writes itself (``WorkerResult/direct(_:)``,
/// the results log) from a line of bytes.
struct ByteCursor {
    let bytes: [UInt8]
    var index = 0
    var atEnd: Bool { index == bytes.count }

    /// Skips `literal` if the bytes continue with it.
    mutating func take(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard bytes.count - index >= n else { return false }
        for k in 0..<n where bytes[index + k] != literal.utf8Start[k] { return false }
        index += n
        return true
    }

    /// A string with no escapes and no control characters; nil (and a useless position) otherwise.
    mutating func string() -> String? {
        guard index < bytes.count, bytes[index] == 0x22 else { return nil }
        let start = index + 1
        var i = start
        while i < bytes.count, bytes[i] != 0x22 {
            if bytes[i] == 0x5C || bytes[i] < 0x20 { return nil }
            i += 1
        }
        guard i < bytes.count else { return nil }
        index = i + 1
        return String(validating: bytes[start..<i], as: UTF8.self)
    }

    /// `[]` or `["a","b",…]`.
    mutating func strings() -> [String]? {
        guard take("[") else { return nil }
        var list: [String] = []
        if take("]") { return list }
        repeat {
            guard let s = string() else { return nil }
            list.append(s)
        } while take(",")
        return take("]") ? list : nil
    }

    /// The text of a JSON number: `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`.
    mutating func number() -> String? {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
            return index - from
        }
        _ = take("-")
        let leadingZero = index < bytes.count && bytes[index] == 0x30
        let whole = digits()
        guard whole > 0, !(leadingZero && whole > 1) else { return nil }
        if take("."), digits() == 0 { return nil }
        if take("e") || take("E") {
            if !take("+") { _ = take("-") }
            guard digits() > 0 else { return nil }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }
}

/// The peak resident memory of this process's address space (`VmHWM`), in bytes. (Unlike
/// `getrusage`, it does not include the memory of the process that started this one.)
func peakResidentBytes() -> Int {
    guard let status = try? TextInput.read(path: "/proc/self/status") else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
    return 0
}

/// A run of consecutive input items that one forked process renders in order (see
/// ``RenderWorker``). Chunks are cut from the input by ``RenderChunk/Builder``, the same way
/// whatever the number of jobs, so every item is spoken after the same predecessors.
struct RenderChunk: Codable, Sendable {
    struct Entry: Codable, Sendable {
        var item: BatchItem
        /// Spoken with its audio discarded, only to bring the engine to the state in which the
        /// items after it were (or will be) spoken: an item done by an earlier run, or one
        /// answered before its worker died.
        var replay: Bool
    }
    let entries: [Entry]
    /// The items whose results are expected, in order.
    let rendered: [BatchItem]
    /// For the orchestrator only (never sent; empty in a worker): the place of each of
    /// `rendered` among the batch's result lines, which `results.jsonl` gets in this order.
    let sequence: [Int]

    init(entries: [Entry], sequence: [Int]) {
        self.entries = entries
        rendered = entries.filter { !$0.replay }.map(\.item)
        self.sequence = sequence
    }

    private enum CodingKeys: String, CodingKey { case entries }

    init(from decoder: any Decoder) throws {
        self.init(entries: try decoder.container(keyedBy: CodingKeys.self).decode([Entry].self, forKey: .entries), sequence: [])
    }

    /// A chunk closes after the item that brings its texts to this many bytes (about 2
    /// minutes of speech, 0.15 s of synthesis): the fork per chunk is then a small part of
    /// the chunk's work, and a chunk is short enough to balance the workers and to stop soon.
    static let maxWeight = 2000
    /// … or once it holds this many items.
    static let maxItems = 64


    /// What to send again after the worker rendering this chunk died with `answered` of its
    /// items answered: the next item is failed by the caller, and everything up to it,
    /// itself included, is replayed (a worker never speaks itself, so it was most likely
    /// killed from outside; if that item's speech really kills its process, the worker
    /// leaves it out); the items after it are rendered. Nil if none is left to render.
    func remainder(afterAnswering answered: Int) -> RenderChunk? {
        var seen = 0
        for (index, entry) in entries.enumerated() where !entry.replay {
            if seen == answered {
                let rest = entries[(index + 1)...]
                guard rest.contains(where: { !$0.replay }) else { return nil }
                return RenderChunk(entries: entries[...index].map { Entry(item: $0.item, replay: true) } + rest,
                                   sequence: Array(sequence.dropFirst(answered + 1)))
            }
            seen += 1
        }
        return nil
    }

    /// The weight of `item` towards ``maxWeight``: its text's bytes, or its file's size.
    static func weight(of item: BatchItem) -> Int {
        guard let path = item.textFile else { return item.text.utf8.count }
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : maxWeight
    }
}

/// The render worker: a process started by ``BatchRenderer`` that reads settings, then one
/// ``RenderChunk`` per line, and answers one ``WorkerResult`` line per item to render.
///
/// espeak-ng keeps hidden state from one synthesis to the next (wavegen's pitch-flutter phase,
/// gain and filter memories), so the same text spoken after different texts comes out
/// different. The worker loads everything once, never synthesizes itself, and forks a child
/// per chunk: each chunk starts from the same pristine engine and speaks the same items in
/// the same order, whichever worker renders it, so output is byte-identical for any `--jobs`.
/// On resume, items of a chunk that are already done are replayed (spoken, audio discarded)
/// before the missing ones, which therefore come out as in an uninterrupted run. A crash
/// inside espeak-ng costs one item, not the worker.
enum RenderWorker {
    static func main() -> Int32 {
        signal(SIGINT, SIG_IGN)  // Ctrl-C reaches the whole process group: the parent decides.
        signal(SIGPIPE, SIG_IGN)
        var input = LineReader(fd: 0, name: "the render worker's input")
        guard let first = try? input.next(),
              let settings = try? JSONDecoder().decode(RenderSettings.self, from: Data(first))
        else {
            send(WorkerResult(id: "", ok: false, fatal: "the render worker got no settings"))
            return 2
        }
        let renderer: ItemRenderer
        do {
            renderer = try ItemRenderer(settings)
        } catch {
            send(WorkerResult(id: "", ok: false, fatal: "\(error)"))
            return 1
        }
        // The ready line also warms the JSON encoder's type lookups, which children inherit.
        send(WorkerResult(id: "", ok: true))
        while let line = try? input.next() {
            guard let chunk = try? JSONDecoder().decode(RenderChunk.self, from: Data(line)) else {
                // The parent cannot know how many answers to wait for: end, and be replaced.
                _ = writeFully(2, Array("parla render worker: a malformed request\n".utf8))
                return 2
            }
            guard render(chunk, renderer) else { break }  // the parent is gone
        }
        var children = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &children)
        send(WorkerResult(id: "", ok: true, peakBytes: max(peakResidentBytes(), Int(children.ru_maxrss) * 1024)))
        return 0
    }

    /// Plans the chunk's items here (a bad item fails without touching the engine), then
    /// speaks them in a child forked from this pristine process, sending each result on as it
    /// arrives. The engine's state before every item is "pristine, then each earlier item of
    /// the chunk spoken" (whole, or up to the point where the engine or the item's own input
    /// failed, which is the same in every run; see ``ItemRenderer/render(_:_:)``). If the
    /// child dies, a new child replays the items before the one it died on, leaves that one
    /// out, and goes on. Returns false if the parent is gone.
    static func render(_ chunk: RenderChunk, _ renderer: ItemRenderer) -> Bool {
        let plans: [Result<PreparedItem, any Error>] = chunk.entries.map { entry in Result { try renderer.prepare(entry.item) } }
        let replay = chunk.entries.map(\.replay)
        var excluded = Set<Int>()
        var next = 0  // the first entry whose result has not been sent
        while next < chunk.entries.count {
            let order = chunk.entries.indices.filter { !excluded.contains($0) }
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else {
                let reason = "cannot create a pipe: \(String(cString: strerror(errno)))"
                return (next..<chunk.entries.count).allSatisfy { i in replay[i] || send(WorkerResult(id: chunk.entries[i].item.id, ok: false, error: reason)) }
            }
            let pid = parla_fork()
            if pid == 0 {
                parla_item_child_setup()
                close(fds[0])
                for i in order {
                    let entry = chunk.entries[i]
                    let result: WorkerResult
                    switch plans[i] {
                    case .failure(let error):
                        result = WorkerResult(id: entry.item.id, ok: false, error: "\(error)")
                    case .success(let prepared):
                        if replay[i] || i < next {
                            renderer.replay(entry.item, prepared)
                            result = WorkerResult(id: entry.item.id, ok: true)
                        } else {
                            result = renderer.render(entry.item, prepared)
                        }
                    }
                    guard writeLine(result, to: fds[1]) else { _exit(1) }
                }
                _exit(0)
            }
            close(fds[1])
            guard pid > 0 else {
                close(fds[0])
                let reason = "cannot start a process for the item: \(String(cString: strerror(errno)))"
                return (next..<chunk.entries.count).allSatisfy { i in replay[i] || send(WorkerResult(id: chunk.entries[i].item.id, ok: false, error: reason)) }
            }
            var reader = LineReader(fd: fds[0], name: "the item's process")
            var died: Int?  // the entry the child died on
            for i in order {
                // Passed on as it is (the parent decodes it): a line cut short by the child's
                // death lacks its closing brace.
                guard let line = try? reader.next(), line.last == UInt8(ascii: "}") else {
                    died = i
                    break
                }
                guard i >= next else { continue }  // replayed
                next = i + 1
                if !replay[i] {
                    guard writeFully(1, line + [0x0A]) else {
                        // The batch is gone: so is the rest of this chunk, and what it wrote.
                        kill(pid, SIGKILL)
                        close(fds[0])
                        while waitpid(pid, nil, 0) < 0 && errno == EINTR {}
                        renderer.removeTemporaryFiles(writtenBy: pid)
                        return false
                    }
                }
            }
            close(fds[0])
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            if let i = died {
                renderer.removeTemporaryFiles(writtenBy: pid)
                excluded.insert(i)
                if i >= next {
                    next = i + 1
                    if !replay[i] {
                        let signal = status & 0x7F
                        let how = signal != 0 ? "signal \(signal)\(signal == SIGKILL ? ", killed" : signal == SIGSEGV ? ", a crash in the speech engine" : "")" : "exit status \((status >> 8) & 0xFF)"
                        guard send(WorkerResult(id: chunk.entries[i].item.id, ok: false, error: "the process rendering this item died (\(how)) before it was complete; run the same command again to render it again")) else { return false }
                    }
                }
            }
        }
        return true
    }

    @discardableResult
    static func send(_ result: WorkerResult) -> Bool { writeLine(result, to: 1) }

    static func writeLine(_ result: WorkerResult, to fd: Int32) -> Bool {
        writeFully(fd, result.jsonLine)
    }
}

@_cdecl("parla_render_worker_main")
func parlaRenderWorkerMain() -> Int32 { RenderWorker.main() }

/// An item checked and planned by the worker, ready for its forked child to speak.
enum PreparedItem {
    /// A text item and its plan.
    case text(SpeechPlan, inputText: String, isMarkup: Bool)
    /// A text file, planned paragraph by paragraph as it is read.
    case file(String)
}

/// Renders one item to its files, on the calling thread, with the process's espeak-ng.
final class ItemRenderer {
    let settings: RenderSettings
    let catalog: VoiceCatalog
    /// Loaded on first need, in the worker (never in a child, where it would be lost): a
    /// batch whose items all give their language never pays for the model, nor copies its
    /// pages at every fork.
    private var detector: LanguageDetector?
    private var detectorLoaded = false
    let engine = ESpeakDirectEngine()
    let sampleRate: Int
    let language: LanguageTag?
    let voice: SpeechVoice?

    /// The longest line of a text file, and the longest item text.
    static let maxLineBytes = 1 << 20
    /// Paragraphs of a text file longer than this are spoken in pieces cut at line ends.
    static let maxPieceBytes = 64 << 10

    init(_ settings: RenderSettings) throws(ParlaError) {
        self.settings = settings
        let catalog = try VoiceCatalog.load(from: settings.voicesDirectory, userDirectory: settings.userVoicesDirectory)
        self.catalog = catalog
        language = try settings.language.map { l throws(ParlaError) in try LanguageTag(parsing: l) }
        voice = try settings.voice.map { v throws(ParlaError) in try catalog.voice(identifier: v) }
        sampleRate = try engine.start()
        warmUp()
    }

    /// Runs the Swift side of a rendering once, without the engine: the runtime's type and
    /// conformance caches filled here are inherited by every forked child, which would
    /// otherwise fill them again for each item (about 1% of the batch's CPU time).
    private func warmUp() {
        guard let plan = try? SpeechPlan(Utterance(string: "Warm up, one two. Three.", language: "en"), catalog: catalog) else { return }
        var timeline = SpeechTimeline(sampleRate: sampleRate)
        var builder = TimelineBuilder(plan: plan, sampleRate: sampleRate) { timeline.record($0) }
        builder.silence(plan.leadingSilence)
        for index in plan.runs.indices {
            _ = builder.beginRun(index)
            builder.audio([Int16](repeating: 0, count: 2205))
            builder.word(position: 0, length: 4, runSample: 2205)
            builder.audio([Int16](repeating: 1000, count: 2205))
            builder.sentence(position: 0, runSample: 2205)
            builder.audio([Int16](repeating: 0, count: 2205))
            builder.endRun()
        }
        builder.silence(plan.trailingSilence)
        builder.finish()
        _ = timeline.json()
        _ = WAVHeader.bytes(sampleRate: sampleRate, dataBytes: timeline.sampleCount * 2)
    }

    /// Removes what a child that died left under temporary names (`.ID.wav.parla-PID-….tmp`).
    func removeTemporaryFiles(writtenBy pid: pid_t) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: settings.output) else { return }
        for name in names where name.hasPrefix(".") && name.contains(".parla-\(pid)-") && name.hasSuffix(".tmp") {
            unlink(settings.output + "/" + name)
        }
    }

    /// Checks and plans `item` (in the worker, before forking).
    func prepare(_ item: BatchItem) throws -> PreparedItem {
        if let path = item.textFile {
            if item.language == nil && language == nil { try loadDetector() }  // paragraphs are planned in the child
            return .file(path)
        }
        if item.text.utf8.count > Self.maxLineBytes {
            throw ParlaError.invalidInput("the text is longer than 1 MB: split it into several items, or give it as a file of a directory input")
        }
        let u = try utterance(item.isSSML ? try Utterance(ssml: item.text) : Utterance(string: item.text), item: item)
        return .text(try plan(u), inputText: u.inputText, isMarkup: u.source != nil)
    }

    /// Renders a prepared item to its files (in the forked child).
    ///
    /// Whatever happens to the files, the engine ends as after ``replay(_:_:)`` of the item,
    /// so the items spoken after it in the same process come out as in any other run: files
    /// that cannot be created or written (a full disk) do not stop the synthesis, whose audio
    /// is then discarded. Only the engine itself or the item's own input (a line of its file
    /// that is not UTF-8, say) stops it early, at the same point in every run.
    func render(_ item: BatchItem, _ prepared: PreparedItem) -> WorkerResult {
        do {
            return try renderFiles(item, prepared)
        } catch {
            return WorkerResult(id: item.id, ok: false, error: "\(error)")
        }
    }

    /// Speaks a prepared item with its audio discarded: the engine ends in the same state as
    /// after ``render(_:_:)``. An error here is the one rendering met, and is ignored.
    func replay(_ item: BatchItem, _ prepared: PreparedItem) {
        var output = Output()
        _ = try? speak(item, prepared, into: &output)
    }

    private func renderFiles(_ item: BatchItem, _ prepared: PreparedItem) throws -> WorkerResult {
        let base = settings.output + "/" + item.id
        var output = Output()
        do {
            // Not synced one by one: the batch syncs the file system before recording results.
            output.wav = try WAVFileWriter(path: base + ".wav", sampleRate: sampleRate, durable: false)
            if settings.timings { output.timings = try TimingsFileWriter(path: base + ".json", sampleRate: sampleRate, durable: false) }
            if settings.captions { output.captions = try CaptionFileWriter(path: base + ".vtt", sampleRate: sampleRate, durable: false) }
        } catch {
            output.fail(error)
            replay(item, prepared)
            throw error
        }
        do {
            try speak(item, prepared, into: &output)
            if let error = output.writeError { throw error }
            guard let wav = output.wav else { throw ParlaError.engineFailure("the item's files were closed early") }
            try wav.finish()
            try output.timings?.commit(sampleCount: wav.sampleCount)
            try output.captions?.commit()
            return WorkerResult(
                id: item.id, ok: true, seconds: Double(wav.sampleCount) / Double(sampleRate),
                languages: output.languages, voices: output.voices)
        } catch {
            output.fail(error)
            throw error
        }
    }

    private func speak(_ item: BatchItem, _ prepared: PreparedItem, into output: inout Output) throws {
        switch prepared {
        case .file(let path):
            try speakFile(path, item: item, into: &output)
        case .text(let plan, let inputText, let isMarkup):
            try speak(plan, inputText: inputText, isMarkup: isMarkup, scalarOffset: 0, into: &output)
        }
    }

    /// Where an item's audio and marks go; all nil when it is replayed, or once writing failed.
    struct Output {
        var wav: WAVFileWriter?
        var timings: TimingsFileWriter?
        var captions: CaptionFileWriter?
        var languages: [String] = []
        var voices: [String] = []
        /// Samples spoken so far.
        var sampleCount = 0
        /// The first error writing the files met; the rest of the item is spoken to nowhere.
        var writeError: (any Error)?

        /// Records `error` and abandons the files (nothing appears under their final names).
        mutating func fail(_ error: any Error) {
            if writeError == nil { writeError = error }
            wav?.discard()
            timings?.discard()
            captions?.discard()
            wav = nil
            timings = nil
            captions = nil
        }
    }

    /// `base` with the item's and the batch's language, voice, rate and pitch.
    private func utterance(_ base: Utterance, item: BatchItem) throws -> Utterance {
        var u = base
        if let l = item.language { u.language = try LanguageTag(parsing: l) } else if u.language == nil, let language { u.language = language }
        if let v = item.voice { u.voice = try catalog.voice(identifier: v) } else if u.voice == nil, let voice { u.voice = voice }
        if let r = item.rate {
            guard SpeechPlan.rateRange.contains(r) else { throw ParlaError.parameterOutOfRange(name: "rate", value: r, range: SpeechPlan.rateRange) }
            u.rate = r
        }
        if let p = item.pitch {
            guard (0...99).contains(p) else { throw ParlaError.parameterOutOfRange(name: "pitch", value: p, range: 0...99) }
            u.pitchMultiplier = p / 50
        }
        return u
    }

    private func plan(_ u: Utterance) throws -> SpeechPlan {
        if u.language == nil { try loadDetector() }
        return try SpeechPlan(u, catalog: catalog, defaultLanguage: "en", detector: u.language == nil ? detector : nil)
    }

    private func loadDetector() throws(ParlaError) {
        guard !detectorLoaded else { return }
        detector = settings.detectsLanguages ? try LanguageDetector.load(catalog: catalog) : nil
        detectorLoaded = true
    }

    /// Speaks one piece, appending its audio and marks to `output`.
    private func speak(_ plan: SpeechPlan, inputText: String, isMarkup: Bool, scalarOffset: Int, into output: inout Output) throws {
        var wav = output.wav
        let start = output.sampleCount
        var timeline = SpeechTimeline(sampleRate: sampleRate)
        var writeError: ParlaError?
        let marksWords = output.timings != nil || output.captions != nil
        let produced = try engine.synthesize(plan, stop: StopFlag(), marksWords: marksWords) { event in
            if case .audio(let b) = event, let w = wav {
                do throws(ParlaError) { try w.append(b.samples) } catch {
                    writeError = error  // a full disk: go on speaking, to nowhere
                    wav = nil
                }
            }
            timeline.record(event)
        }
        output.sampleCount = start + produced
        if let writeError { output.fail(writeError) }
        if marksWords, let broken = timeline.invariantViolation(input: inputText) {
            output.fail(ParlaError.invalidTimeline(broken))
        }
        do {
            try output.timings?.add(timeline, scalarOffset: scalarOffset, sampleOffset: start)
            try output.captions?.add(timeline.sentences, text: inputText, isMarkup: isMarkup, sampleOffset: start)
        } catch {
            output.fail(error)
        }
        for s in timeline.segments {
            if !output.languages.contains(s.language.identifier) { output.languages.append(s.language.identifier) }
            if !output.voices.contains(s.voice) { output.voices.append(s.voice) }
        }
    }

    /// Speaks a UTF-8 text file paragraph by paragraph (a blank line ends a paragraph; a
    /// paragraph over 64 KiB is cut at a line end), holding one paragraph in memory.
    private func speakFile(_ path: String, item: BatchItem, into output: inout Output) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ParlaError.unreadableInput(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var reader = LineReader(fd: fd, name: path, limit: Self.maxLineBytes)
        var piece = ""
        var pieceBytes = 0
        var pieceStart = 0  // scalar offset of `piece` in the file
        var offset = 0      // scalar offset of the next line
        var byteOffset = 0
        var lineNumber = 0
        var spoke = false
        func flush() throws {
            if !piece.allSatisfy(\.isWhitespace) {
                let u = try utterance(Utterance(string: piece), item: item)
                try speak(plan(u), inputText: piece, isMarkup: false, scalarOffset: pieceStart, into: &output)
                spoke = true
            }
            piece = ""
            pieceBytes = 0
        }
        while let bytes = try reader.next() {
            lineNumber += 1
            guard !reader.lastLineWasCut else {
                throw ParlaError.invalidInput("line \(lineNumber) of \(path) is longer than 1 MB: break it into lines or paragraphs")
            }
            guard let line = String(validating: bytes, as: UTF8.self) else {
                let bad = byteOffset + (TextInput.firstInvalidUTF8Offset(bytes) ?? 0)
                throw ParlaError.invalidUTF8(source: path, byteOffset: bad)
            }
            byteOffset += bytes.count + 1
            let blank = line.allSatisfy(\.isWhitespace)
            if blank || pieceBytes + bytes.count > Self.maxPieceBytes { try flush() }
            if piece.isEmpty { pieceStart = offset }
            if !blank {
                piece += line + "\n"
                pieceBytes += bytes.count + 1
            }
            offset += line.unicodeScalars.count + 1
        }
        try flush()
        guard spoke else { throw ParlaError.invalidInput("\(path) has nothing to say: it is empty or holds only whitespace") }
    }
}
