import ArgumentParser
import FoundationEssentials
import Parla
#if canImport(Glibc)
    import Glibc
#endif

/// `parla detect`: the language segments of text.
struct Detect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find the languages in text: which part is in which language, and the voice for it.",
        discussion: """
            Without --lines or --segments, prints the segments of the text (arguments, or all of standard input): offsets in Unicode scalars (end exclusive), language, confidence, voice and text; --json prints the same as one JSON object.

            --lines reads standard input one text per line and writes exactly one line per input line, as soon as it is read: the BCP 47 tag of the line's main language ('und' if it has none).

            --segments reads standard input one text per line and writes one line per input line: a JSON array of {"start": S, "end": E, "lang": "xx"} with S, E Unicode-scalar offsets into the line, end exclusive ('und' for a stretch of no language).

            Ties the text cannot break go to the preferred languages (--prefer, else $LANGUAGE and $LANG), then to the script's default language in voices/defaults.json. A line that is not valid UTF-8 is answered 'und' and reported, and the exit status is non-zero.

            Serbian in Latin script is answered 'sr-Latn' (the Serbian voice speaks it); Serbian in Cyrillic, 'sr'.

            Never detected: \(neverDetected.joined(separator: ", ")). Parla speaks these languages, but the openly licensed text it was trained on (from Debian's and PyPI's packages) holds too little of them for a class of their own, so their text is labelled as a neighbouring language, mostly with a low confidence: a segment's confidence falls when its text fits the language it was given far worse than that language's own text does. Ido is the exception: it is close enough to Esperanto that most Ido text reads as Esperanto, confidently. Give them with `parla say -l`, a language attribute or xml:lang.
            """
    )

    /// The languages of the voice catalog that the language model has no class for (a test
    /// keeps this equal to what the shipped catalog and model say).
    package static let neverDetected = [
        "ba", "bpy", "cv", "grc", "hak", "haw", "ht", "hyw", "io", "jbo", "kl", "la", "lfn", "ltg", "nci", "nog", "pap", "piqd", "py",
        "qdb", "quc", "qya", "shn", "sjn", "smj",
    ]

    @Argument(help: "The text (default: standard input).")
    var text: [String] = []

    @Flag(name: .customLong("json"), help: "Print the segments as JSON, with confidences and voices.")
    var json = false

    @Flag(name: .customLong("lines"), help: "Read lines from standard input; print each line's main language.")
    var lines = false

    @Flag(name: .customLong("segments"), help: "Read lines from standard input; print each line's segments as a JSON array.")
    var segments = false

    @Option(
        name: .customLong("prefer"),
        help: ArgumentHelp("Preferred languages, most preferred first (default: from $LANGUAGE/$LANG).", valueName: "fr,de"))
    var prefer: String?

    @Option(name: .customLong("only"), help: ArgumentHelp("Consider only these languages.", valueName: "en,fr,…"))
    var only: String?

    @OptionGroup var catalogOptions: CatalogOptions

    @Flag(
        name: .customLong("model-info"),
        help: ArgumentHelp("Print the model's languages, size, load time and memory as JSON (for the benchmark).", visibility: .hidden))
    var modelInfo = false

    @Option(
        name: .customLong("throughput"),
        help: ArgumentHelp(
            "Time detection over the lines of FILE, and over FILE as one text; print JSON (for the benchmark).", visibility: .hidden))
    var throughputFile: String?

    func validate() throws {
        if lines && segments { throw ValidationError("Use --lines or --segments, not both.") }
        if (lines || segments) && !text.isEmpty {
            throw ValidationError("--lines and --segments read standard input; do not pass text as arguments.")
        }
        if (lines || segments) && json {
            throw ValidationError("--json applies to the readable output; --lines and --segments have fixed formats.")
        }
    }

    func run() async throws {
        let catalog = try catalogOptions.load()
        if modelInfo { return try printModelInfo(catalog) }
        if let throughputFile { return try measureThroughput(catalog, throughputFile) }
        let detector = try makeDetector(catalog: catalog, prefer: prefer, only: only)
        if lines || segments {
            try streamLines(detector)
            return
        }
        if text.isEmpty && isatty(0) != 0 {
            throw ValidationError("Nothing to detect: give the text as arguments, or pipe it to standard input.")
        }
        let input = text.isEmpty || text == ["-"] ? try TextInput.readStandardInput() : text.joined(separator: " ")
        let found = detector.detect(input)
        if json {
            print(jsonObject(input, found, catalog))
        } else {
            for s in found {
                let lang = s.language?.identifier ?? "und"
                let voice = s.language.flatMap { try? catalog.voice(for: $0).identifier } ?? "-"
                let conf = String(Int((s.confidence * 100).rounded())) + "%"
                let range = "\(s.range.lowerBound)–\(s.range.upperBound)"
                print(
                    "\(range.padding(12)) \(lang.padding(4)) \(conf.padding(5, left: true))  \(voice.padding(18)) \(JSONText.quoted(String(input[s.indices])))"
                )
            }
        }
    }

    private func printModelInfo(_ catalog: VoiceCatalog) throws {
        let before = residentBytes()
        let clock = ContinuousClock()
        let t0 = clock.now
        let detector = try makeDetector(catalog: catalog, prefer: prefer, only: only)
        let elapsed = clock.now - t0
        let after = residentBytes()
        var languages = Set<String>()
        for group in detector.model.groups {
            for tag in group.languages { languages.insert(tag.language) }
        }
        for tag in catalog.scriptDefaults.values { languages.insert(tag.language) }
        let list = languages.sorted().map { JSONText.quoted($0) }.joined(separator: ", ")
        let ms = elapsed.inMilliseconds
        print(
            "{\"languages\": [\(list)], \"model_bytes\": \(detector.model.byteCount), \"load_ms\": \(ms), \"rss_delta_bytes\": \(after - before)}"
        )
    }

    private func measureThroughput(_ catalog: VoiceCatalog, _ path: String) throws {
        let detector = try makeDetector(catalog: catalog, prefer: prefer, only: only)
        let text = try TextInput.read(path: path)
        let lines = text.split(separator: "\n").map(String.init)
        let bytes = text.utf8.count
        let clock = ContinuousClock()
        func seconds(_ d: Duration) -> Double { d.inSeconds }
        var sink = 0
        var t0 = clock.now
        var rounds = 0
        repeat {
            for line in lines { sink &+= detector.mainLanguage(of: line)?.identifier.count ?? 0 }
            rounds += 1
        } while seconds(clock.now - t0) < 2
        let perLine = Double(bytes * rounds) / seconds(clock.now - t0) / 1e6
        t0 = clock.now
        rounds = 0
        repeat {
            sink &+= detector.detect(text).count
            rounds += 1
        } while seconds(clock.now - t0) < 2
        let whole = Double(bytes * rounds) / seconds(clock.now - t0) / 1e6
        // Peak resident memory of this program (VmHWM; getrusage would include the parent's
        // peak from before exec).
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let hwm =
            status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        print(
            "{\"bytes\": \(bytes), \"lines_mb_per_s\": \(perLine), \"text_mb_per_s\": \(whole), \"max_rss_bytes\": \(hwm * 1024), \"sink\": \(sink % 2)}"
        )
    }

    private func jsonObject(_ input: String, _ found: [DetectedSegment], _ catalog: VoiceCatalog) -> String {
        var out = "{\"text\": \(JSONText.quoted(input)), \"segments\": ["
        for (i, s) in found.enumerated() {
            if i > 0 { out += ", " }
            let voice = s.language.flatMap { try? catalog.voice(for: $0).identifier }
            out +=
                "{\"start\": \(s.range.lowerBound), \"end\": \(s.range.upperBound), \"lang\": \(JSONText.quoted(s.language?.identifier ?? "und"))"
            out += ", \"confidence\": \(Double(Int((s.confidence * 1000).rounded())) / 1000)"
            out += ", \"script\": " + (s.script.map(JSONText.quoted) ?? "null")
            out += ", \"voice\": " + (voice.map(JSONText.quoted) ?? "null")
            out += ", \"text\": \(JSONText.quoted(String(input[s.indices])))}"
        }
        return out + "]}"
    }

    /// Answers every line of standard input as soon as it has been read.
    private func streamLines(_ detector: LanguageDetector) throws {
        var reader = LineReader(fd: 0)
        var out = OutputBuffer()
        var lineNumber = 0
        var badLines: [Int] = []
        while let bytes = try reader.next() {
            lineNumber += 1
            var line = bytes
            if line.last == 0x0D { line.removeLast() }
            guard let text = String(validating: line, as: UTF8.self) else {
                badLines.append(lineNumber)
                printError("parla detect: line \(lineNumber) is not valid UTF-8; answering 'und' for it.")
                out.append(lines ? "und\n" : "[]\n")
                out.flushIfNeeded(reader.hasBufferedLine)
                continue
            }
            if lines {
                out.append((detector.mainLanguage(of: text)?.identifier ?? "und") + "\n")
            } else {
                var s = "["
                for (i, seg) in detector.detect(text).enumerated() {
                    if i > 0 { s += ", " }
                    s +=
                        "{\"start\": \(seg.range.lowerBound), \"end\": \(seg.range.upperBound), \"lang\": \"\(seg.language?.identifier ?? "und")\"}"
                }
                out.append(s + "]\n")
            }
            // Flush when no further line is already waiting, so a line-by-line producer gets
            // each answer at once while a file is still written in large blocks.
            out.flushIfNeeded(reader.hasBufferedLine)
        }
        out.flushIfNeeded(false)
        if !badLines.isEmpty {
            throw ValidationError(
                "\(badLines.count) line(s) were not valid UTF-8 (first: line \(badLines[0])); convert the input to UTF-8, e.g. with iconv.")
        }
    }
}

/// Resident set size of this process, from /proc/self/statm.
func residentBytes() -> Int {
    guard let s = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = s.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}

/// The detector for the command line: the catalog's model, `--prefer` (else the environment)
/// and `--only`.
func makeDetector(catalog: VoiceCatalog, prefer: String?, only: String?) throws -> LanguageDetector {
    var detector = try LanguageDetector.load(catalog: catalog)
    if let prefer {
        detector.preferences = LanguagePreferences(try parseTagList(prefer, option: "--prefer"))
    }
    if let only {
        detector.candidates = Set(try parseTagList(only, option: "--only").map(\.language))
    }
    return detector
}

func parseTagList(_ list: String, option: String) throws -> [LanguageTag] {
    let tags = try list.split(separator: ",").map { try LanguageTag(parsing: String($0.filter { $0 != " " })) }
    if tags.isEmpty { throw ValidationError("\(option) needs a comma-separated list of language tags, e.g. fr,de.") }
    return tags
}

/// Standard output written in blocks, flushed on demand.
struct OutputBuffer {
    private var bytes: [UInt8] = []
    mutating func append(_ s: String) { bytes += s.utf8 }
    mutating func flushIfNeeded(_ moreWaiting: Bool) {
        if moreWaiting && bytes.count < 65536 { return }
        if let error = writeAll(1, bytes) { exit(error == EPIPE ? 0 : 1) }
        bytes.removeAll(keepingCapacity: true)
    }
}

extension String {
    package func padding(_ width: Int, left: Bool = false) -> String {
        let pad = String(repeating: " ", count: max(0, width - count))
        return left ? pad + self : self + pad
    }
}
