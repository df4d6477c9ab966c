internal import CParlaWorker
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
#if canImport(Glibc)
    import Glibc
#endif

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
    let engine = InProcessEngine()
    let sampleRate: Int
    let language: LanguageTag?
    let voice: SpeechVoice?

    /// The longest line of a text file, and the longest item text.
    static let maxLineBytes = 1 << 20
    /// Paragraphs of a text file longer than this are spoken in pieces cut at line ends.
    static let maxPieceBytes = 64 << 10

    init(_ settings: RenderSettings) throws(ParlaError) {
        self.settings = settings
        var preferences: [LanguageTag: String] = [:]
        for (tag, voice) in settings.preferredVoices { preferences[try LanguageTag(parsing: tag)] = voice }
        let catalog = try VoiceCatalog.load(fromPath: settings.voicesDirectory, userPath: settings.userVoicesDirectory)
            .adding(piperVoicesAt: settings.piperVoiceDirectories).preferring(preferences)
        self.catalog = catalog
        language = try settings.language.map { l throws(ParlaError) in try LanguageTag(parsing: l) }
        voice = settings.voice
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
        if let file = item.textFile {
            if item.language == nil && language == nil { try loadDetector() }  // paragraphs are planned in the child
            return .file(file.path(percentEncoded: false))
        }
        if item.text.utf8.count > Self.maxLineBytes {
            throw ParlaError.invalidInput(
                "the text is longer than 1 MB: split it into several items, or give it as a file of a directory input")
        }
        let u = try utterance(item.isSSML ? try Utterance(ssml: item.text) : Utterance(string: item.text), item: item)
        return .text(try plan(u), inputText: u.inputText, isMarkup: u.source != nil)
    }

    /// Loads the Piper voices the prepared items speak with, in this process, so that the
    /// children forked for chunks have them loaded (a voice loads once per worker). A voice that
    /// cannot load is left for its items to fail on, each with the reason.
    func preload(_ items: [PreparedItem]) {
        var voices: [String] = []
        for case .text(let plan, _, _) in items {
            for run in plan.runs where run.voice.engine == SpeechVoice.piperEngine && !voices.contains(run.voice.engineVoiceName) {
                voices.append(run.voice.engineVoiceName)
            }
        }
        if !voices.isEmpty { try? engine.prepare(voices: voices) }
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
        if let l = item.language {
            u.language = l
        } else if u.language == nil, let language {
            u.language = language
        }
        if let v = item.voice { u.voice = v } else if u.voice == nil, let voice { u.voice = voice }
        if let r = item.wordsPerMinute {
            guard SpeechPlan.rateRange.contains(r) else {
                throw ParlaError.parameterOutOfRange(name: "rate", value: r, range: SpeechPlan.rateRange)
            }
            u.wordsPerMinute = r
        }
        if let p = item.pitch {
            guard (0...2).contains(p) else { throw ParlaError.parameterOutOfRange(name: "pitch multiplier", value: p, range: 0...2) }
            u.pitch = p
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
        guard fd >= 0 else { throw ParlaError.unreadableInput(path: path, reason: systemErrorMessage()) }
        defer { close(fd) }
        var reader = LineReader(fd: fd, name: path, limit: Self.maxLineBytes)
        var piece = ""
        var pieceBytes = 0
        var pieceStart = 0  // scalar offset of `piece` in the file
        var offset = 0  // scalar offset of the next line
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
