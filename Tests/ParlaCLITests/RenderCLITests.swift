import Foundation
import ParlaAudioTestSupport
import Testing

/// `parla render`: batches of texts to WAV files.
@Suite("parla render", .serialized)
struct RenderCLITests {
    func render(_ args: [String]) async throws -> ProcessResult {
        // Unpinned: the suites that render run side by side, and pinned workers of theirs all
        // land on the first CPU (aKilledWorkerCostsOneItemAndIsReplaced checks the pinning).
        try await offPool { try runProcess(CLITests.binary, ["render"] + args + ["--no-pin"], environment: ["LANG": "C.UTF-8", "LANGUAGE": nil]) }
    }

    /// The lines of DIR/results.jsonl, or of a shard's results-K-of-N.jsonl files where there is none.
    func results(_ dir: URL) throws -> [[String: Any]] {
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("results") && $0.hasSuffix(".jsonl") }
        var text = ""
        for name in names.contains("results.jsonl") ? ["results.jsonl"] : names.sorted() {
            text += try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
        }
        return try text.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
    }

    /// `parla say --ipa` with an espeak-ng voice: each word's phonemes from espeak-ng's phoneme
    /// events (which carry no stress marks: `espeak-ng --ipa` prints "həlˈoʊ wˈɜːld"), a
    /// sentence a line, and in the timings JSON.
    @Test func ipaWithAnEspeakVoice() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let out = dir.appendingPathComponent("ipa.wav"), timings = dir.appendingPathComponent("ipa.json")
        let r = try await offPool {
            try runProcess(
                CLITests.binary,
                ["say", "-v", "espeak-ng.en-us", "Hello world. Good morning.", "-o", out.path, "--timings", timings.path, "--ipa"],
                environment: ["LANG": "C.UTF-8", "LANGUAGE": nil])
        }
        #expect(r.status == 0, "\(r.error)")
        #expect(r.output == "həloʊ wɜːld\nɡʊd mɔːɹnɪŋ\n", "\(r.output)")
        let json = try String(contentsOf: timings, encoding: .utf8)
        #expect(json.contains("\"phonemes\": \"həloʊ\""), "\(json)")
    }

    /// Real multilingual text in a batch with timings: every 50th line of the language test
    /// set (77 languages) and of both render corpora, with no failed item. (Every line:
    /// `scripts/check-real-text`.)
    @Test func realTextBatchHasNoFailedItem() async throws {
        let bench = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("bench")
        var lines: [String] = []
        for (name, languageField) in [("langid-test.tsv", 0), ("render-corpus.tsv", 1), ("render-corpus-short.tsv", 1)] {
            let rows = try String(contentsOf: bench.appendingPathComponent(name), encoding: .utf8).split(separator: "\n")
            for (i, row) in rows.enumerated() where i % 50 == 0 {
                let f = row.split(separator: "\t", omittingEmptySubsequences: false)
                lines.append("\(name.prefix(6))-\(i)\t\(f[languageField])\t\(f[2])")
            }
        }
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let tsv = dir.appendingPathComponent("real.tsv")
        try (lines.joined(separator: "\n") + "\n").write(to: tsv, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let run = try await render([tsv.path, "-o", out.path, "--timings"])
        let r = try results(out)
        let failed = r.filter { $0["status"] as? String != "ok" }
        #expect(run.status == 0 && failed.isEmpty, "\(failed.count) of \(r.count) failed: \(failed.prefix(3)) \(run.error.suffix(500))")
        #expect(r.count == lines.count)
    }

    @Test func mixedFormatsOverridesAndBadItems() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let tsv = dir.appendingPathComponent("in.tsv")
        try "a1\tHello world\nb2\tfr\tBonjour à tous\n../bad\tNope\nc3\tΚαλημέρα κόσμε\n".write(to: tsv, atomically: true, encoding: .utf8)
        let jsonl = dir.appendingPathComponent("in.jsonl")
        try """
            {"id": "j1", "text": "Hello from JSON", "rate": 200, "pitch": 70}
            {"id": "j2", "text": "<speak>SSML <break time=\\"200ms\\"/> works</speak>", "ssml": true}
            {"id": "j3", "text": "x", "voice": "espeak-ng.nope"}
            not json

            {"id": "j4", "text": "   "}
            {"id": "j5", "text": "<speak>unclosed", "ssml": true}
            """.write(to: jsonl, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let a = try await render([tsv.path, "-o", out.path, "--timings"])
        #expect(a.status == 1)
        #expect(a.error.contains("error: item line-3"))
        let b = try await render([jsonl.path, "-o", out.path])
        #expect(b.status == 1)
        let r = try results(out)
        let status = Dictionary(r.map { ($0["id"] as! String, $0["status"] as! String) }, uniquingKeysWith: { $1 })
        #expect(status == ["a1": "ok", "b2": "ok", "c3": "ok", "line-3": "failed", "j1": "ok", "j2": "ok", "j3": "failed", "line-4": "failed", "j4": "failed", "j5": "failed"])
        let b2 = r.first { $0["id"] as? String == "b2" }!
        #expect(b2["languages"] as? [String] == ["fr"])
        #expect(b2["voices"] as? [String] == ["espeak-ng.fr"])
        #expect((b2["duration_s"] as? Double ?? 0) > 0.5)
        let files = try leftovers(in: out)
        #expect(files == ["a1.json", "a1.wav", "b2.json", "b2.wav", "c3.json", "c3.wav", "j1.wav", "j2.wav", "render.json", "results.jsonl"])
        // A rerun skips what is done and reports only the bad item again.
        let again = try await render([tsv.path, "-o", out.path, "--timings"])
        #expect(again.error.contains("0 rendered, 1 failed, 3 already done"))
        let forced = try await render([tsv.path, "-o", out.path, "--timings", "--force"])
        #expect(forced.error.contains("3 rendered, 1 failed, 0 already done"))
    }

    /// Every file in `dir` (its results files and render.json aside), name → contents.
    func outputs(_ dir: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try leftovers(in: dir) where !(name.hasPrefix("results") && name.hasSuffix(".jsonl")) && name != "render.json" {
            files[name] = try Data(contentsOf: dir.appendingPathComponent(name))
        }
        return files
    }

    func isCompleteWAV(_ data: Data) -> Bool {
        let riff = data.count >= 8 ? Int(data[4]) | Int(data[5]) << 8 | Int(data[6]) << 16 | Int(data[7]) << 24 : -1
        return riff + 8 == data.count
    }

    /// Starts `parla render args`, waits until `count` WAV files exist in `out`, sends `sig`,
    /// and returns the exit status and standard error, once the command's workers have exited
    /// too (they finish their item after the command is gone).
    func interrupt(_ args: [String], out: URL, after count: Int, with sig: Int32) async throws -> (Int32, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLITests.binary)
        p.arguments = ["render"] + args + ["--progress", "none", "--no-pin"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let pid = p.processIdentifier
        let workers = try await whenWAVs(in: out, reach: count, of: p) { () -> [Int32]? in
            let children = Self.childProcesses(of: pid)
            return kill(pid, sig) == 0 ? children : nil
        }
        let reader = err.fileHandleForReading
        let message = try await offPool { String(decoding: reader.readDataToEndOfFile(), as: UTF8.self) }
        let status = await exitStatus(p)
        let gone = try await offPool { () -> Bool in
            for _ in 0..<4000 {
                if (workers ?? []).allSatisfy({ kill($0, 0) != 0 && errno == ESRCH }) { return true }
                usleep(5_000)
            }
            return false
        }
        #expect(gone, "the workers \(workers ?? []) of the interrupted command are still running after 20 s")
        return (status, message)
    }

    /// Polls `out` until it holds `count` finished WAV files, then calls `action` until it gives
    /// a value; nil if `p` ends first or after 20 s. The polling runs on a thread of its own:
    /// on the test pool it could stall for seconds behind other tests' blocking waits and miss
    /// the whole batch.
    func whenWAVs<T: Sendable>(in out: URL, reach count: Int, of p: Process, _ action: @escaping @Sendable () -> T?) async throws -> T? {
        let pid = p.processIdentifier
        return try await offPool {
            for _ in 0..<4000 where kill(pid, 0) == 0 {
                let wavs = (try? FileManager.default.contentsOfDirectory(atPath: out.path))?.filter { $0.hasSuffix(".wav") && !$0.hasPrefix(".") } ?? []
                if wavs.count >= count, let value = action() { return value }
                usleep(5_000)
            }
            return nil
        }
    }

    @Test func interruptedAndKilledRunsResumeToTheSameFilesAsACleanRun() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("lines.txt")
        let lines = (1...360).map { n in
            ["Line number \(n) of the batch, with a few more words to say.",
             "Ceci est la ligne \(n), avec quelques mots de plus à dire.",
             "Αυτή είναι η γραμμή \(n), με μερικές ακόμη λέξεις."][n % 3]
        }
        try lines.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let args = [input.path, "-o", out.path, "--timings", "--vtt", "--jobs", "2"]

        // Ctrl-C: stops after the items in flight, says how to resume, leaves complete files only.
        let (status, message) = try await interrupt(args, out: out, after: 4, with: SIGINT)
        #expect(status == 130)
        #expect(message.contains("Run the same command again to resume"), "\(message)")
        let partial = try outputs(out)
        #expect(partial.count < 1080, "the batch was not interrupted")
        #expect(partial.keys.allSatisfy { !$0.hasPrefix(".") }, "temporary files left: \(partial.keys.sorted())")
        #expect(partial.filter { $0.key.hasSuffix(".wav") }.allSatisfy { isCompleteWAV($0.value) })

        // kill -9 of the whole command at an arbitrary moment: no partial file under a final name.
        let (killed, _) = try await interrupt(args, out: out, after: partial.count / 3 + 2, with: SIGKILL)
        #expect(killed == -SIGKILL)
        #expect(try outputs(out).filter { $0.key.hasSuffix(".wav") }.allSatisfy { isCompleteWAV($0.value) })

        let resumed = try await render(args)
        #expect(resumed.status == 0, "\(resumed.error)")
        #expect(!resumed.error.contains(" 0 already done"), "\(resumed.error)")
        #expect(Set(try results(out).map { $0["id"] as! String }).count == 360)

        // The resumed output equals a clean uninterrupted run, byte for byte.
        let clean = dir.appendingPathComponent("clean")
        let fresh = try await render([input.path, "-o", clean.path, "--timings", "--vtt", "--jobs", "1"])
        #expect(fresh.status == 0, "\(fresh.error)")
        let a = try outputs(out), b = try outputs(clean)
        #expect(a.count == 1080)
        #expect(a.keys.sorted() == b.keys.sorted())
        for (name, data) in b where a[name] != data { Issue.record("\(name) differs from the clean run") }
    }

    @Test func aKilledWorkerCostsOneItemAndIsReplaced() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("lines.txt")
        try (1...40).map { "Line \($0) of a batch whose worker is killed, with more words to say." }
            .joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLITests.binary)
        p.arguments = ["render", input.path, "-o", out.path, "--jobs", "1", "--progress", "none"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        // Once a few files exist, kill -9 this run's worker (a child of the command).
        let command = p.processIdentifier
        let killedWorkersCPUs = try await whenWAVs(in: out, reach: 3, of: p) { () -> String?? in
            for pid in Self.childProcesses(of: command) {
                let cmdline = (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? ""
                if cmdline.contains("(parla render worker)") {
                    let cpus = Self.cpusAllowed(pid)
                    if kill(pid, SIGKILL) == 0 { return .some(cpus) }
                }
            }
            return nil
        }
        #expect(killedWorkersCPUs != nil, "the worker was not killed")
        // The one worker ran on the first CPU this process may use.
        #expect(killedWorkersCPUs == .some(Self.cpusAllowed(getpid()).map { String($0.prefix { $0.isNumber }) }))
        // (Off the cooperative pool: the command renders 37 more items before its stderr ends.)
        let reader = err.fileHandleForReading
        let message = try await offPool { String(decoding: reader.readDataToEndOfFile(), as: UTF8.self) }
        #expect(await exitStatus(p) == 1, "\(message)")
        #expect(message.contains("39 rendered, 1 failed"), "\(message)")
        #expect(message.contains("the render worker stopped while rendering this item"))
        // The items the replacement worker rendered keep their places in results.jsonl.
        #expect(try results(out).compactMap { $0["line"] as? Int } == Array(1...40))
        let again = try await render([input.path, "-o", out.path])
        #expect(again.status == 0)
        #expect(again.error.contains("1 rendered, 0 failed, 39 already done"), "\(again.error)")
        // The rest of the chunk went to a new worker after a replay of what came before it,
        // the failed item included: every file equals a clean run's.
        let clean = dir.appendingPathComponent("clean")
        #expect(try await render([input.path, "-o", clean.path, "--jobs", "1"]).status == 0)
        // Files are written unnamed (O_TMPFILE) until complete, so the process killed with its
        // worker left nothing behind. (Where the file system cannot do that, it may leave a
        // hidden temporary file, which a later run removes once it is 10 minutes old.)
        let unnamed = supportsUnnamedFiles(out)
        let a = try outputs(out).filter { unnamed || !$0.key.hasPrefix(".") }, b = try outputs(clean)
        #expect(a.keys.sorted() == b.keys.sorted())
        for (name, data) in b where a[name] != data { Issue.record("\(name) differs from the clean run") }
    }

    /// The CPUs `pid` may run on, as /proc writes them ("0-1", "3").
    static func cpusAllowed(_ pid: Int32) -> String? {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }
            .map { $0.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces) }
    }

    /// The processes whose parent is `pid`.
    static func childProcesses(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { child in
            guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid
        }
    }

    @Test func twoJobsWriteTheSameBytesAsOne() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("in.jsonl")
        var items: [String] = []
        for n in 1...120 {  // several chunks, so both workers take some
            switch n % 4 {
            case 0: items.append("{\"id\": \"i\(n)\", \"text\": \"Hello \(n), Καλημέρα, and مرحبا بكم in one line.\"}")
            case 1: items.append("{\"id\": \"i\(n)\", \"text\": \"Nummer \(n) ist hier.\", \"language\": \"de\", \"rate\": \(150 + n)}")
            case 2: items.append("{\"id\": \"i\(n)\", \"text\": \"<speak>Item \(n) <break time=\\\"100ms\\\"/> in SSML.</speak>\", \"ssml\": true, \"pitch\": 60}")
            default: items.append("{\"id\": \"i\(n)\", \"text\": \"Le numéro \(n). Deux phrases ici.\", \"voice\": \"espeak-ng.fr\"}")
            }
        }
        items.insert("{\"id\": \"bad\", \"text\": }", at: 60)  // its line too has its place in results.jsonl
        try items.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        var runs: [[String: Data]] = [], logs: [String] = []
        for jobs in ["1", "2"] {
            let out = dir.appendingPathComponent("jobs\(jobs)")
            let r = try await render([input.path, "-o", out.path, "--timings", "--vtt", "--jobs", jobs])
            #expect(r.status == 1, "\(r.error)")
            #expect(r.error.contains("120 rendered, 1 failed"), "\(r.error)")
            runs.append(try outputs(out))
            logs.append(try String(contentsOf: out.appendingPathComponent("results.jsonl"), encoding: .utf8))
        }
        #expect(runs[0].count == 360)
        #expect(runs[0].keys.sorted() == runs[1].keys.sorted())
        for (name, data) in runs[0] where runs[1][name] != data { Issue.record("\(name) differs between --jobs 1 and --jobs 2") }
        // results.jsonl too: its lines are in input order, whichever worker finished first.
        #expect(logs[0] == logs[1])
        let lines = logs[1].split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.compactMap { $0["line"] as? Int } == Array(1...121))
        #expect(lines.count == 121 && lines[60]["status"] as? String == "failed")
        // Captions: one cue per sentence, markup stripped.
        let vtt = String(decoding: runs[0]["i3.vtt"] ?? Data(), as: UTF8.self)
        #expect(vtt.hasPrefix("WEBVTT\n\n1\n00:00:00."))
        let fr = String(decoding: runs[0]["i3.vtt"] ?? Data(), as: UTF8.self)
        #expect(fr.contains("Le numéro 3.") && fr.contains("Deux phrases ici."))
        let ssml = String(decoding: runs[0]["i2.vtt"] ?? Data(), as: UTF8.self)
        #expect(ssml.contains("Item 2") && ssml.contains("in SSML.") && !ssml.contains("<"), "\(ssml)")
    }

    /// Items are spoken in chunks of consecutive items by one process each, and espeak-ng's
    /// hidden state carries over from item to item: an item missing from the middle of a chunk
    /// is rendered after a replay of the items before it, so it comes out as in a whole run.
    @Test func aMissingItemIsRenderedAsInAWholeRun() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("lines.tsv")
        let lines = (1...40).map { n in
            ["l\(n)\ten\tSentence \(n), spoken in English.", "l\(n)\tel\tΠρόταση \(n), στα ελληνικά.", "l\(n)\tar\tالجملة رقم \(n) بالعربية."][n % 3]
        }
        try lines.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let args = [input.path, "-o", out.path, "--timings", "--jobs", "1"]
        let whole = try await render(args)
        #expect(whole.status == 0, "\(whole.error)")
        let before = try outputs(out)
        try FileManager.default.removeItem(at: out.appendingPathComponent("l20.wav"))
        try FileManager.default.removeItem(at: out.appendingPathComponent("l31.json"))
        let again = try await render(args)
        #expect(again.error.contains("2 rendered, 0 failed, 38 already done"), "\(again.error)")
        let after = try outputs(out)
        for name in ["l20.wav", "l20.json", "l31.wav", "l31.json"] {
            #expect(after[name] != nil && after[name] == before[name], "\(name) differs from the whole run")
        }
        // Why the replay is needed: the same item spoken by itself comes out different.
        let alone = dir.appendingPathComponent("alone")
        try lines[19].write(to: dir.appendingPathComponent("one.tsv"), atomically: true, encoding: .utf8)
        #expect(try await render([dir.appendingPathComponent("one.tsv").path, "-o", alone.path]).status == 0)
        #expect(try outputs(alone)["l20.wav"] != before["l20.wav"])
    }
}
