import Foundation
import ParlaTestSupport
import Testing

/// `parla render`: batches of texts to WAV files.
@Suite("parla render", .serialized)
struct RenderCLITests {
    func render(_ args: [String]) async throws -> ProcessResult {
        try await offPool { try runProcess(CLITests.binary, ["render"] + args, environment: ["LANG": "C.UTF-8", "LANGUAGE": nil]) }
    }

    func results(_ dir: URL) throws -> [[String: Any]] {
        let text = try String(contentsOf: dir.appendingPathComponent("results.jsonl"), encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
    }

    @Test func mixedFormatsOverridesAndBadItems() async throws {
        let dir = try makeTemporaryDirectory()
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
        #expect(files == ["a1.json", "a1.wav", "b2.json", "b2.wav", "c3.json", "c3.wav", "j1.wav", "j2.wav", "results.jsonl"])
        // A rerun skips what is done and reports only the bad item again.
        let again = try await render([tsv.path, "-o", out.path, "--timings"])
        #expect(again.error.contains("0 rendered, 1 failed, 3 already done"))
        let forced = try await render([tsv.path, "-o", out.path, "--timings", "--force"])
        #expect(forced.error.contains("3 rendered, 1 failed, 0 already done"))
    }

    @Test func interruptedRunResumesWhereItStopped() async throws {
        let dir = try makeTemporaryDirectory()
        let input = dir.appendingPathComponent("lines.txt")
        let lines = (1...40).map { "Line number \($0) of the batch, with a few more words to say." }
        try lines.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLITests.binary)
        p.arguments = ["render", input.path, "-o", out.path, "--progress", "none"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        // Interrupt once a few items are done.
        let resultsPath = out.appendingPathComponent("results.jsonl").path
        for _ in 0..<500 {
            if let t = try? String(contentsOfFile: resultsPath, encoding: .utf8), t.split(separator: "\n").count >= 3 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(p.processIdentifier, SIGINT)
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(await exitStatus(p) == 130)
        #expect(message.contains("Run the same command again to resume"))
        let partial = try leftovers(in: out)
        #expect(partial.count < 41)
        #expect(partial.allSatisfy { $0 == "results.jsonl" || ($0.hasSuffix(".wav") && !$0.hasPrefix(".")) })
        var before: [String: Data] = [:]
        for name in partial where name.hasSuffix(".wav") { before[name] = try Data(contentsOf: out.appendingPathComponent(name)) }
        let resumed = try await render([input.path, "-o", out.path])
        #expect(resumed.status == 0, "\(resumed.error)")
        #expect(resumed.error.contains("\(before.count) already done"))
        // Every item is there once, as a complete WAV; what was done before was not redone.
        let names = try leftovers(in: out).filter { $0.hasSuffix(".wav") }
        #expect(names == (1...40).map { String(format: "%06d.wav", $0) })
        for name in names {
            let data = try Data(contentsOf: out.appendingPathComponent(name))
            let riff = data.count >= 8 ? Int(data[4]) | Int(data[5]) << 8 | Int(data[6]) << 16 | Int(data[7]) << 24 : -1
            #expect(riff + 8 == data.count, "\(name) is not a complete WAV")
            if let old = before[name] { #expect(old == data, "\(name) was rendered again") }
        }
        #expect(Set(try results(out).map { $0["id"] as! String }).count == 40)
    }

    @Test func shardsCoverEveryItemExactlyOnce() async throws {
        let dir = try makeTemporaryDirectory()
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

    @Test func invalidUTF8AndHugeLinesFailAloneWithClearErrors() async throws {
        let dir = try makeTemporaryDirectory()
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
        #expect(r.error.contains("line 2 is not valid UTF-8 (byte 3 of the line)"))
        #expect(r.error.contains("longer than 1 MB"))
    }
}
