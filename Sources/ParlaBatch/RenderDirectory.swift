import FoundationEssentials
import ParlaCore
import ParlaIO
#if canImport(Glibc)
    import Glibc
#endif

/// What a render directory holds besides the audio: `render.json`, the settings its audio is
/// made with; a results file per run (`results.jsonl`, or `results-K-of-N.jsonl` for shard K of
/// N, so that the shards of one job can share a directory on shared storage without sharing a
/// file); and, after ``RenderMerge``, one `results.jsonl` in input order and, for a data set,
/// `metadata.jsonl`.
public enum RenderDirectory {
    /// The results file of a run of `shard` (nil: the whole input).
    public static func resultsName(shard: BatchShard?) -> String {
        shard.map { "results-\($0.index)-of-\($0.count).jsonl" } ?? "results.jsonl"
    }

    /// The settings that change the audio a run writes, or make the directory a data set, one
    /// `"key": value` line each, in a fixed order. Not the shard, the jobs or --force (shards of
    /// one job share a directory, and the bytes are the same for any number of jobs), nor
    /// --timings and --vtt, whose files come beside the same audio.
    static func settingsLines(_ options: BatchRenderOptions) -> [String] {
        let preferred = options.preferredVoices.map { "\($0.key.identifier)=\($0.value.identifier)" }.sorted()
        return [
            "\"isolate\": \(options.isolatesItems)",
            "\"dataset\": \(options.dataset)",
            "\"language\": \(options.language.map { JSONText.quoted($0.identifier) } ?? "null")",
            "\"voice\": \(options.voice.map { JSONText.quoted($0.identifier) } ?? "null")",
            "\"prefer_voices\": [\(preferred.map(JSONText.quoted).joined(separator: ", "))]",
            "\"detect_languages\": \(options.detectsLanguages)",
        ]
    }

    /// Records the run's settings in `directory/render.json`, or checks them against those
    /// recorded there: a run with other settings is refused before any audio is written, since
    /// its files would not match the ones already there. Two runs starting at once agree on one
    /// file (it is linked into place, never overwritten).
    /// - Throws: ``/ParlaCore/ParlaError/invalidInput(_:)`` naming the settings that differ;
    ///   ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``.
    static func claim(_ directory: String, options: BatchRenderOptions) throws(ParlaError) {
        let path = directory + "/render.json"
        let mine = settingsLines(options)
        let text = "{\n  \"parla_render\": 1,\n  " + mine.joined(separator: ",\n  ") + "\n}\n"
        if access(path, F_OK) != 0 {
            let temporary = directory + "/.render.json.parla-\(getpid()).tmp"
            defer { unlink(temporary) }
            guard writeFile(temporary, Array(text.utf8)) else {
                throw .unwritableOutput(path: path, reason: systemErrorMessage())
            }
            if link(temporary, path) == 0 { return }
            guard errno == EEXIST else { throw .unwritableOutput(path: path, reason: systemErrorMessage()) }
        }
        guard let recorded = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw .unreadableInput(path: path, reason: "it cannot be read as UTF-8 text")
        }
        let theirs = recorded.split(separator: "\n").map { $0.trimmed.trimmingSuffix(",") }
        let differ = mine.filter { !theirs.contains($0) }.map { line in
            let key = String(line.prefix { $0 != ":" })
            let before = theirs.first { $0.hasPrefix(key + ":") }.map { $0.dropFirst(key.count + 1).trimmed }
            return "\(key.dropFirst().dropLast()) \(before ?? "(not recorded)") there, \(line.dropFirst(key.count + 1).trimmed) now"
        }
        guard differ.isEmpty else {
            throw .invalidInput(
                "\(directory) holds audio rendered with other settings (\(differ.joined(separator: "; "))). Use the settings in \(path) to resume or add shards, or render into another directory."
            )
        }
    }

    private static func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return writeFully(fd, bytes) && fsync(fd) == 0
    }

    /// Whether `directory/ID.wav` is complete: a RIFF header whose size is the file's.
    static func isCompleteWAV(_ directory: String, _ id: String) -> Bool {
        let f = open(directory + "/" + id + ".wav", O_RDONLY | O_CLOEXEC)
        guard f >= 0 else { return false }
        defer { close(f) }
        var header = [UInt8](repeating: 0, count: 44)
        guard read(f, &header, 44) == 44 else { return false }
        var st = stat()
        guard fstat(f, &st) == 0 else { return false }
        let riff = Int(header[4]) | Int(header[5]) << 8 | Int(header[6]) << 16 | Int(header[7]) << 24
        return header[0..<4] == [0x52, 0x49, 0x46, 0x46] && riff + 8 == Int(st.st_size)
    }
}

extension StringProtocol {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : String(self)
    }
    fileprivate var trimmed: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}

/// Finishing a render: the results of its runs (the shards' `results-K-of-N.jsonl`, or one
/// `results.jsonl`) checked against the input, joined into one `results.jsonl` in input order,
/// and for a data set `metadata.jsonl` in the `audiofolder` layout. Audio is read, never
/// changed or removed, and running it again gives the same files.
public enum RenderMerge {
    /// What a merge found.
    public struct Report: Sendable {
        /// Items in the input.
        public var items = 0
        /// Items rendered, with complete audio.
        public var rendered = 0
        /// Items whose last result says failed (id, the error).
        public var failed: [(id: String, error: String)] = []
        /// Items no run has a result for.
        public var missing: [String] = []
        /// Items rendered by more than one run (overlapping shards: another N), with the files.
        public var twice: [(id: String, files: [String])] = []
        /// Items marked rendered whose WAV is missing or incomplete.
        public var incomplete: [String] = []
        /// Items that a data set lacks the word timings of (`ID.json`).
        public var withoutTimings: [String] = []
        /// Shards of an N seen that have no results file (`results-K-of-N.jsonl`).
        public var shardsNotRun: [String] = []
        /// The results files read.
        public var sources: [String] = []
        /// Rows written to `metadata.jsonl` (nil: no data set asked for).
        public var datasetRows: Int?
        /// Whether every item is rendered exactly once.
        public var isComplete: Bool {
            failed.isEmpty && missing.isEmpty && twice.isEmpty && incomplete.isEmpty && withoutTimings.isEmpty && shardsNotRun.isEmpty
        }
    }

    private struct Line: Decodable {
        var id: String
        var status: String
        var duration_s: Double?
        var languages: [String]?
        var voices: [String]?
        var error: String?
    }

    private struct Recorded {
        var line: String
        var entry: Line
        var file: String
    }

    /// Merges the results in `directory` against the input `entries`.
    /// - Parameters:
    ///   - directory: the render's output directory.
    ///   - next: the input's entries, one per call, nil at the end.
    ///   - dataset: also write `metadata.jsonl`, a row per rendered item with its text and word
    ///     alignment (from `ID.json`).
    /// - Returns: what was found: items rendered, missing, failed, incomplete, rendered twice.
    /// - Throws: ``/ParlaCore/ParlaError/unreadableInput(path:reason:)`` and
    ///   ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``; a problem with items is in the
    ///   report, not thrown.
    public static func run(directory: String, entries next: () throws -> BatchEntry?, dataset: Bool) throws -> Report {
        var report = Report()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var shardFiles: [(name: String, shard: BatchShard)] = []
        for name in names.sorted() {
            guard name.hasPrefix("results-"), name.hasSuffix(".jsonl") else { continue }
            let parts = name.dropFirst(8).dropLast(6).split(separator: "-")
            if parts.count == 3, parts[1] == "of", let k = Int(parts[0]), let n = Int(parts[2]), let shard = BatchShard(index: k, count: n)
            {
                shardFiles.append((name, shard))
            }
        }
        for n in Set(shardFiles.map(\.shard.count)).sorted() {
            for k in 0..<n where !shardFiles.contains(where: { $0.shard == BatchShard(index: k, count: n) }) {
                report.shardsNotRun.append("results-\(k)-of-\(n).jsonl")
            }
        }
        // Each file: the last line for an id wins, as when a run resumes.
        let sources = shardFiles.isEmpty ? ["results.jsonl"] : shardFiles.map(\.name)
        report.sources = sources
        var byID: [String: [Recorded]] = [:]
        let decoder = JSONDecoder()
        for name in sources {
            let path = directory + "/" + name
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                if errno == ENOENT && shardFiles.isEmpty { continue }
                throw ParlaError.unreadableInput(path: path, reason: systemErrorMessage())
            }
            defer { close(fd) }
            var reader = LineReader(fd: fd, name: path, limit: 1 << 20)
            var last: [String: Recorded] = [:]
            while let bytes = try reader.next() {
                guard !reader.lastLineWasCut, !bytes.isEmpty, let entry = try? decoder.decode(Line.self, from: Data(bytes)) else {
                    continue
                }
                last[entry.id] = Recorded(line: String(decoding: bytes, as: UTF8.self), entry: entry, file: name)
            }
            for (id, r) in last { byID[id, default: []].append(r) }
        }
        var merged: [String] = []
        var rows: [String] = []
        var seen: Set<String> = []
        while let entry = try next() {
            let id: String
            var item: BatchItem?
            switch entry {
            case .item(let i):
                id = i.id
                item = i
            case .invalid(let e): id = e.id
            }
            guard seen.insert(id).inserted else { continue }  // a repeated id is one item (its first line)
            report.items += 1
            let records = byID[id] ?? []
            let ok = records.filter { $0.entry.status == "ok" }
            if ok.count > 1 { report.twice.append((id, ok.map(\.file))) }
            guard let chosen = ok.first ?? records.first else {
                report.missing.append(id)
                continue
            }
            merged.append(chosen.line)
            guard chosen.entry.status == "ok" else {
                report.failed.append((id, chosen.entry.error ?? "failed"))
                continue
            }
            guard RenderDirectory.isCompleteWAV(directory, id) else {
                report.incomplete.append(id)
                continue
            }
            report.rendered += 1
            if dataset, let item {
                if let row = try datasetRow(directory: directory, item: item, entry: chosen.entry) {
                    rows.append(row)
                } else {
                    report.withoutTimings.append(id)
                }
            }
        }
        // Shard files: one results.jsonl in input order (a single results.jsonl is that already).
        if !shardFiles.isEmpty {
            try AtomicFile.write(
                Array((merged.joined(separator: "\n") + (merged.isEmpty ? "" : "\n")).utf8), to: directory + "/results.jsonl")
        }
        if dataset {
            try AtomicFile.write(Array((rows.joined(separator: "\n") + (rows.isEmpty ? "" : "\n")).utf8), to: directory + "/metadata.jsonl")
            report.datasetRows = rows.count
        }
        return report
    }

    private struct Timings: Decodable {
        struct Word: Decodable {
            var start: Int
            var end: Int
            var word: String
            var startMs: Double
            var endMs: Double
        }
        var words: [Word]
    }

    /// A `metadata.jsonl` row: `file_name`, `id`, `text`, `language`, `voice`, `duration` (s),
    /// and `words`: each word's text, `start` and `end` in seconds, and `char_start` and
    /// `char_end`, its place in `text` in Unicode scalars (Python's string indices). Nil if the
    /// item has no timings file.
    private static func datasetRow(directory: String, item: BatchItem, entry: Line) throws -> String? {
        let timingsPath = directory + "/" + item.id + ".json"
        guard let data = try? Data(contentsOf: URL(filePath: timingsPath)),
            let timings = try? JSONDecoder().decode(Timings.self, from: data)
        else {
            return nil
        }
        var text = item.text
        if let file = item.textFile {
            do {
                text = try String(contentsOf: file, encoding: .utf8)
            } catch {
                throw ParlaError.unreadableInput(path: file.path(percentEncoded: false), reason: "\(error)")
            }
        }
        let words = timings.words.map { w in
            "{\"word\": \(JSONText.quoted(w.word)), \"start\": \(JSONText.threeDecimals(w.startMs / 1000)), \"end\": \(JSONText.threeDecimals(w.endMs / 1000)), \"char_start\": \(w.start), \"char_end\": \(w.end)}"
        }
        return
            "{\"file_name\": \(JSONText.quoted(item.id + ".wav")), \"id\": \(JSONText.quoted(item.id)), \"text\": \(JSONText.quoted(text))"
            + ", \"language\": \(JSONText.quoted(entry.languages?.first ?? "")), \"voice\": \(JSONText.quoted(entry.voices?.first ?? ""))"
            + ", \"duration\": \(JSONText.threeDecimals(entry.duration_s ?? 0)), \"words\": [\(words.joined(separator: ", "))]}"
    }
}
