import Foundation
import ParlaAudioTestSupport
import Testing

/// `parla render`'s inputs: directories of text files, a 5 MB input, shards and their order,
/// and input that is not UTF-8 or too long.
extension RenderCLITests {
    @Test func directoryOfTextFilesIsSpokenParagraphByParagraph() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let texts = dir.appendingPathComponent("texts")
        try FileManager.default.createDirectory(at: texts, withIntermediateDirectories: true)
        // A long file: 300 paragraphs (about 40 KB) in two languages.
        var book = ""
        for n in 1...300 {
            book += n % 2 == 0 ? "Paragraph \(n) begins here. It has two sentences.\n\n" : "Le paragraphe \(n) commence ici.\nIl continue sur une autre ligne.\n\n"
        }
        try book.write(to: texts.appendingPathComponent("book.txt"), atomically: true, encoding: .utf8)
        try "Short one.".write(to: texts.appendingPathComponent("short.txt"), atomically: true, encoding: .utf8)
        try "\n\n  \n".write(to: texts.appendingPathComponent("empty.txt"), atomically: true, encoding: .utf8)
        try "ignored".write(to: texts.appendingPathComponent("notes.md"), atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let r = try await render([texts.path, "-o", out.path, "--timings", "--vtt"])
        #expect(r.status == 1, "\(r.error)")  // empty.txt fails alone
        let status = Dictionary(try results(out).map { ($0["id"] as! String, $0["status"] as! String) }, uniquingKeysWith: { $1 })
        #expect(status == ["book": "ok", "short": "ok", "empty": "failed"])
        let timings = try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("book.json"))) as! [String: Any]
        let words = timings["words"] as! [[String: Any]]
        let scalars = Array(book.unicodeScalars)
        // Offsets are in the whole file, times run on across paragraphs.
        var lastStart = -1.0
        for w in words {
            let start = w["start"] as! Int, end = w["end"] as! Int
            #expect(String(String.UnicodeScalarView(scalars[start..<end])) == w["word"] as! String)
            #expect((w["startMs"] as! Double) >= lastStart)
            lastStart = w["startMs"] as! Double
        }
        #expect(words.count > 2500)
        #expect(Set((timings["segments"] as! [[String: Any]]).map { $0["language"] as! String }) == ["en", "fr"])
        let vtt = try String(contentsOf: out.appendingPathComponent("book.vtt"), encoding: .utf8)
        let cues = vtt.components(separatedBy: " --> ").count - 1
        #expect(cues == (timings["sentences"] as! [Any]).count)
        #expect(cues >= 590)
    }

    @Test func fiveMegabyteInputIsStreamedWithBoundedMemory() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("big.txt")
        var text = ""
        var n = 0
        while text.utf8.count < 5_000_000 {
            n += 1
            text += "Sentence number \(n) of a very large input file, streamed line by line and never read whole.\n"
        }
        try text.write(to: input, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        // All 5 MB are read and parsed; one item in 1000 is rendered (the whole file is about
        // 90 hours of speech).
        let r = try await render([input.path, "-o", out.path, "--shard", "7/1000"])
        #expect(r.status == 0, "\(r.error)")
        let summary = r.error.split(separator: "\n").last.map(String.init) ?? ""
        print("5 MB input (\(n) lines): \(summary)")
        let rendered = try results(out).count
        #expect(rendered > 20 && rendered < 100)
        // "peak memory A MB here, B MB per worker"
        let numbers = summary.split(separator: "peak memory ").last?.split(separator: " ").compactMap { Double($0) } ?? []
        #expect(numbers.count == 2)
        #expect(numbers.first ?? 999 < 100, "\(summary)")
        #expect(numbers.last ?? 999 < 60, "\(summary)")
    }

    @Test func shardsCoverEveryItemExactlyOnce() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("in.tsv")
        try (1...24).map { "item-\($0)\tHi \($0)" }.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        var seen: [String] = []
        for k in 0..<3 {
            let out = dir.appendingPathComponent("shard\(k)")
            let r = try await render([input.path, "-o", out.path, "--shard", "\(k)/3"])
            #expect(r.status == 0, "\(r.error)")
            seen += try results(out).map { $0["id"] as! String }
        }
        #expect(seen.sorted() == (1...24).map { "item-\($0)" }.sorted())
        let bad = try await render([input.path, "-o", dir.appendingPathComponent("x").path, "--shard", "3/3"])
        #expect(bad.status != 0)
        #expect(bad.error.contains("0 ≤ K < N"))
    }

    /// With --isolate every item is spoken from a fresh engine: sharded runs and a reversed
    /// input give the same files as one whole run. Without it, the engine's state carries over
    /// within a chunk, and the shards' files differ from the whole run's.
    @Test func isolatedItemsAreTheSameInAnyShardOrOrder() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let lines = (1...24).map { n in
            ["item-\(n)\ten\tNumber \(n), with a pause, then more words.", "item-\(n)\tfr\tLe numéro \(n), puis une phrase.",
             "item-\(n)\tel\tΑριθμός \(n), και άλλες λέξεις."][n % 3]
        }
        let input = dir.appendingPathComponent("in.tsv"), reversed = dir.appendingPathComponent("reversed.tsv")
        try lines.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        try lines.reversed().joined(separator: "\n").write(to: reversed, atomically: true, encoding: .utf8)
        func run(_ file: URL, _ name: String, _ extra: [String]) async throws -> [String: Data] {
            let out = dir.appendingPathComponent(name)
            let r = try await render([file.path, "-o", out.path, "--progress", "none"] + extra)
            #expect(r.status == 0, "\(r.error)")
            return try outputs(out)
        }
        let whole = try await run(input, "whole", ["--isolate"])
        #expect(whole.count == 24)
        var sharded: [String: Data] = [:], plainSharded: [String: Data] = [:]
        for k in 0..<3 {
            sharded.merge(try await run(input, "shard\(k)", ["--isolate", "--shard", "\(k)/3"])) { a, _ in a }
            plainSharded.merge(try await run(input, "plain\(k)", ["--shard", "\(k)/3"])) { a, _ in a }
        }
        let backwards = try await run(reversed, "reversed", ["--isolate", "--jobs", "1"])
        #expect(sharded.keys.sorted() == whole.keys.sorted() && backwards.keys.sorted() == whole.keys.sorted())
        for (name, data) in whole {
            if sharded[name] != data { Issue.record("\(name): the isolated shard's file differs from the whole run's") }
            if backwards[name] != data { Issue.record("\(name): the isolated reversed run's file differs from the whole run's") }
        }
        // Why the option exists: in chunks, the shards' files are not all the whole run's.
        let plainWhole = try await run(input, "plainWhole", [])
        #expect(plainWhole.contains { plainSharded[$0.key] != $0.value })
    }

    @Test func invalidUTF8AndHugeLinesFailAloneWithClearErrors() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("in.txt")
        var bytes = Data("Good line one.\n".utf8)
        bytes += Data([0x42, 0x61, 0x64, 0xC3, 0x28, 0x0A])  // "Bad" + an invalid sequence
        bytes += Data(String(repeating: "word ", count: 220_000).utf8) + Data("\n".utf8)
        bytes += Data("Good line four.\n".utf8)
        try bytes.write(to: input)
        let out = dir.appendingPathComponent("out")
        let r = try await render([input.path, "-o", out.path])
        #expect(r.status == 1)
        let status = Dictionary(try results(out).map { ($0["id"] as! String, $0["status"] as! String) }, uniquingKeysWith: { $1 })
        #expect(status == ["000001": "ok", "line-2": "failed", "000003": "failed", "000004": "ok"])
        #expect(r.error.contains("line 2: not valid UTF-8 (byte 3 of the line)"))
        #expect(r.error.contains("longer than 1 MB"))
    }
}
