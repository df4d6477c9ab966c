import Foundation
import Parla
@testable import ParlaBatch
import ParlaAudioTestSupport
import Testing

/// The lines a render worker's processes exchange.
@Suite("Render worker protocol")
struct WorkerProtocolTests {
    @Test func handWrittenResultLinesDecodeToTheSameResult() throws {
        let results = [
            WorkerResult(id: "a\"b\\c\u{1}é😀", ok: true, seconds: 25.542040816326532, languages: ["en", "zh"], voices: ["espeak-ng.en-US", "espeak-ng.cmn"]),
            WorkerResult(id: "x", ok: false, error: "line 3: \"bad\"\nnext\tline"),
            WorkerResult(id: "", ok: true, peakBytes: 22_000_000),
            WorkerResult(id: "", ok: false, fatal: "no voices"),
            WorkerResult(id: "tiny", ok: true, seconds: 1e-05),
        ]
        for result in results {
            let line = result.jsonLine
            #expect(line.last == 0x0A && !line.dropLast().contains(0x0A))
            #expect(line.dropLast().last == UInt8(ascii: "}"))  // what the worker checks
            let decoded = try JSONDecoder().decode(WorkerResult.self, from: Data(line.dropLast()))
            #expect(decoded == result)
            #expect(WorkerResult.decode(Array(line.dropLast())) == result)
        }
        // Lines without escapes are read directly (the same result as JSONDecoder's), others
        // by JSONDecoder; anything else is not a result.
        #expect(WorkerResult.direct(Array(results[0].jsonLine.dropLast())) == nil)  // escapes
        for result in results.dropFirst(2) {
            #expect(WorkerResult.direct(Array(result.jsonLine.dropLast())) == result)
        }
        let other = #"{ "voices": ["v"], "ok": true, "id": "z", "seconds": 0, "languages": [] }"#
        #expect(WorkerResult.direct(Array(other.utf8)) == nil)
        #expect(WorkerResult.decode(Array(other.utf8)) == WorkerResult(id: "z", ok: true, voices: ["v"]))
        // Numbers JSON does not allow are not results either.
        for number in ["+1", "01", ".5", "1.", "1e", "1e400", "- 1"] {
            #expect(WorkerResult.direct(Array(#"{"id":"a","ok":true,"seconds":\#(number),"languages":[],"voices":[]}"#.utf8)) == nil, "\(number)")
        }
        for number in ["0", "-0.0", "12.5", "1e-05", "2E+3"] {
            #expect(WorkerResult.direct(Array(#"{"id":"a","ok":true,"seconds":\#(number),"languages":[],"voices":[]}"#.utf8))?.seconds == Double(number), "\(number)")
        }
        for junk in [#"{"id":"a","ok":true"#, #"{"id":"a","ok":maybe}"#, "", #"{"id":"a","ok":true,"seconds":1,"languages":["x"],"voices":[]}x"#] {
            #expect(WorkerResult.decode(Array(junk.utf8)) == nil, "\(junk)")
        }
    }

    /// An input line's fields become the item's units where it is read: a language tag, a
    /// voice of the catalog, words per minute, a pitch multiplier (the file's 0–99 over 50).
    /// What cannot be converted makes the line invalid, naming the field.
    @Test func inputLinesBecomeItemsInTheAPIsUnits() throws {
        let catalog = try VoiceCatalog.default()
        func read(_ line: String, _ format: BatchInput.Format = .jsonl) -> Result<BatchItem, BatchInput.LineError>? {
            BatchInput.item(fromLine: Substring(line), number: 3, format: format, catalog: catalog)
        }
        let item = try #require(
            try read(#"{"id": "a", "text": "Bonjour", "language": "FR-ca", "voice": "espeak-ng.fr", "rate": 200, "pitch": 75}"#)?.get())
        #expect(item.language == LanguageTag("fr-CA"))
        #expect(item.voice?.identifier == "espeak-ng.fr")
        #expect(item.wordsPerMinute == 200)
        #expect(item.pitch == 1.5)
        #expect(try read("b\tel\tΚαλημέρα", .tsv)?.get().language == "el")
        let bad = [
            (#"{"id": "c", "text": "x", "voice": "espeak-ng.nope"}"#, BatchInput.Format.jsonl, "espeak-ng.nope"),
            (#"{"id": "d", "text": "x", "pitch": 120}"#, .jsonl, "pitch"),
            (#"{"id": "e", "text": "x", "language": "not a tag"}"#, .jsonl, "not a tag"),
            ("f\tnot a tag\tx", .tsv, "not a tag"),
        ]
        for (line, format, named) in bad {
            guard case .failure(let error)? = read(line, format) else {
                Issue.record("\(line) was read as an item")
                continue
            }
            #expect(error.line == 3 && error.reason.contains(named), "\(error.reason)")
        }
    }

    @Test func aDeadWorkersChunkIsResentWithWhatCameBeforeReplayed() {
        let items = (0..<5).map { BatchItem(id: "i\($0)", text: "t") }
        // i0 was done before (replay), i1 answered, i2 in progress when the worker died.
        let chunk = RenderChunk(entries: items.enumerated().map { RenderChunk.Entry(item: $1, replay: $0 == 0) }, sequence: [])
        let rest = chunk.remainder(afterAnswering: 1)
        #expect(rest?.entries.map(\.item.id) == ["i0", "i1", "i2", "i3", "i4"])
        #expect(rest?.entries.map(\.replay) == [true, true, true, false, false])
        #expect(rest?.rendered.map(\.id) == ["i3", "i4"])
        // Their places among the results lines go with them.
        let placed = RenderChunk(entries: chunk.entries, sequence: [10, 11, 12, 13])
        #expect(placed.remainder(afterAnswering: 1)?.sequence == [12, 13])
        #expect(chunk.remainder(afterAnswering: 3) == nil)  // i4 failed, nothing after it
    }

    /// `results.jsonl` says which ids are done: the last line for an id wins, lines Parla writes
    /// and lines any JSON writer produces are read alike, and junk is skipped.
    @Test func theResultsLogKnowsWhatIsDone() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let lines = [
            ResultsLog.line(id: "plain", line: 1, seconds: 1, languages: ["en"], voices: ["v"], timings: false, captions: false),
            ResultsLog.line(id: "quo\"te é", line: 2, seconds: 1, languages: ["en"], voices: ["v"], timings: true, captions: true),
            #"{"status":"ok","id":"reordered"}"#,
            ResultsLog.line(id: "redone", line: 3, error: "unknown voice"),
            ResultsLog.line(id: "redone", line: 3, seconds: 2, languages: [], voices: [], timings: false, captions: false),
            ResultsLog.line(id: "broke", line: 4, seconds: 2, languages: [], voices: [], timings: false, captions: false),
            ResultsLog.line(id: "broke", line: 4, error: "disk full"),
            "not json at all",
            #"{"id": "cut", "status": "ok", "line": 7, "wav": "cut.w"#,
            #"{"id": "bad-status", "status": "okay"}"#,
            #"{"id": "long", "status": "ok", "pad": ""# + String(repeating: "x", count: 2 << 20) + #""}"#,
            #"{"id": "torn", "status": "o"#,
        ]
        let path = dir.path + "/results.jsonl"
        try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: path))
        let log = try ResultsLog(directory: dir.path, name: "results.jsonl")
        #expect(log.done == ["plain", "quo\"te é", "reordered", "redone"])
        // The torn last line was ended, so the next line appended stands alone.
        try log.append(ResultsLog.line(id: "torn", line: 9, seconds: 1, languages: [], voices: [], timings: false, captions: false))
        #expect(try ResultsLog(directory: dir.path, name: "results.jsonl").done.contains("torn"))
    }
}
