import Foundation
import ParlaAudioTestSupport
import Testing

/// Sharded renders in one shared directory, `--merge`, the settings every shard must share, and
/// `--dataset`'s metadata.jsonl.
extension RenderCLITests {
    func mixedLines(_ count: Int) -> [String] {
        (1...count).map { n in
            ["item-\(n)\ten\tNumber \(n), with a pause, then more words.", "item-\(n)\tfr\tLe numéro \(n), puis une phrase.",
             "item-\(n)\tel\tΑριθμός \(n), και άλλες λέξεις."][n % 3]
        }
    }

    /// Three shards share one directory, each with its own results file; --merge names what is
    /// missing until every shard has run, then writes results.jsonl in input order: the same
    /// bytes as one whole run's (--isolate), with the same audio. Merging again changes nothing.
    @Test func shardsInOneDirectoryMergeIntoTheWholeRun() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("in.tsv")
        try mixedLines(24).joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let whole = dir.appendingPathComponent("whole"), shared = dir.appendingPathComponent("shared")
        #expect(try await render([input.path, "-o", whole.path, "--isolate", "--progress", "none"]).status == 0)
        for k in 0..<2 {
            let r = try await render([input.path, "-o", shared.path, "--isolate", "--shard", "\(k)/3"])
            #expect(r.status == 0, "\(r.error)")
            #expect(r.error.contains("results in \(shared.path)/results-\(k)-of-3.jsonl"), "\(r.error)")
        }
        let early = try await render([input.path, "-o", shared.path, "--isolate", "--merge"])
        #expect(early.status == 1)
        #expect(early.error.contains("not run: results-2-of-3.jsonl"), "\(early.error)")
        let third = try results(shared).count
        #expect(early.error.contains("\(24 - third) missing"), "\(early.error)")
        #expect(try await render([input.path, "-o", shared.path, "--isolate", "--shard", "2/3"]).status == 0)
        let merged = try await render([input.path, "-o", shared.path, "--isolate", "--merge"])
        #expect(merged.status == 0, "\(merged.error)")
        #expect(merged.error.contains("24 items: 24 rendered, 0 failed, 0 missing"), "\(merged.error)")
        let wholeResults = try Data(contentsOf: whole.appendingPathComponent("results.jsonl"))
        #expect(try Data(contentsOf: shared.appendingPathComponent("results.jsonl")) == wholeResults)
        #expect(try outputs(shared) == outputs(whole))
        let wav = shared.appendingPathComponent("item-5.wav").path
        let before = try FileManager.default.attributesOfItem(atPath: wav)[.modificationDate] as? Date
        let again = try await render([input.path, "-o", shared.path, "--isolate", "--merge"])
        #expect(again.status == 0 && again.error == merged.error, "\(again.error)")
        #expect(try Data(contentsOf: shared.appendingPathComponent("results.jsonl")) == wholeResults)
        #expect(try FileManager.default.attributesOfItem(atPath: wav)[.modificationDate] as? Date == before)
        // Shards of another N in the same directory: the items rendered twice are named.
        #expect(try await render([input.path, "-o", shared.path, "--isolate", "--shard", "0/2"]).status == 0)
        let overlapping = try await render([input.path, "-o", shared.path, "--isolate", "--merge"])
        #expect(overlapping.status == 1)
        #expect(overlapping.error.contains("rendered twice: item-"), "\(overlapping.error)")
        #expect(overlapping.error.contains("results-0-of-2.jsonl and results-") || overlapping.error.contains("-of-3.jsonl and results-0-of-2.jsonl"))
        #expect(overlapping.error.contains("not run: results-1-of-2.jsonl"), "\(overlapping.error)")
    }

    /// A shard with other settings than the directory's is refused before it writes anything;
    /// a killed shard's items are missing until it runs again.
    @Test func aShardWithOtherSettingsIsRefusedBeforeWriting() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("in.tsv")
        try mixedLines(9).joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        #expect(try await render([input.path, "-o", out.path, "--isolate", "--shard", "0/2"]).status == 0)
        let files = try leftovers(in: out)
        let other = try await render([input.path, "-o", out.path, "--shard", "1/2", "--voice", "espeak-ng.en-us"])
        #expect(other.status != 0)
        #expect(other.error.contains("holds audio rendered with other settings"), "\(other.error)")
        #expect(other.error.contains("isolate true there, false now"), "\(other.error)")
        #expect(other.error.contains("voice null there, \"espeak-ng.en-us\" now"), "\(other.error)")
        #expect(try leftovers(in: out) == files)
        let recorded = try String(contentsOf: out.appendingPathComponent("render.json"), encoding: .utf8)
        #expect(recorded.contains("\"isolate\": true"))
    }

    /// --dataset: metadata.jsonl in the audiofolder layout, a row per item in input order, whose
    /// file is complete, whose duration is the WAV's, and whose word alignment lies in the text
    /// (character offsets, as Python counts them) and in the audio.
    @Test func aDataSetsRowsMatchTheirAudio() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("in.tsv")
        var lines = mixedLines(5)
        lines.append("emoji\ten\tHello 👋🏽 world, café au lait.")
        lines.append("arabic\tar\tمرحبا بالعالم، كيف حالك؟")
        try lines.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out")
        let r = try await render([input.path, "-o", out.path, "--dataset", "--jobs", "2"])
        #expect(r.status == 0, "\(r.error)")
        #expect(r.error.contains("data set: 7 rows in \(out.path)/metadata.jsonl"), "\(r.error)")
        let rows = try String(contentsOf: out.appendingPathComponent("metadata.jsonl"), encoding: .utf8).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
        #expect(rows.map { $0["id"] as? String } == lines.map { String($0.split(separator: "\t")[0]) })
        for (row, line) in zip(rows, lines) {
            let text = String(line.split(separator: "\t")[2])
            #expect(row["text"] as? String == text)
            #expect(row["file_name"] as? String == (row["id"] as? String ?? "") + ".wav")
            let wav = try Data(contentsOf: out.appendingPathComponent(row["file_name"] as? String ?? ""))
            #expect(isCompleteWAV(wav))
            let rate = wav[24..<28].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            let seconds = Double(wav.count - 44) / 2 / Double(rate)
            let duration = row["duration"] as? Double ?? -1
            #expect(abs(duration - seconds) < 0.002, "\(row["id"]!): \(duration) s against the WAV's \(seconds)")
            #expect(row["language"] as? String == String(line.split(separator: "\t")[1]))
            #expect((row["voice"] as? String ?? "").hasPrefix("espeak-ng."))
            let words = row["words"] as? [[String: Any]] ?? []
            #expect(words.count >= 3)
            let scalars = Array(text.unicodeScalars)
            var last = 0.0
            for w in words {
                let a = w["char_start"] as? Int ?? -1, b = w["char_end"] as? Int ?? -1
                let start = w["start"] as? Double ?? -1, end = w["end"] as? Double ?? -1
                #expect(0 <= a && a < b && b <= scalars.count)
                if 0 <= a && a < b && b <= scalars.count {
                    #expect(String(String.UnicodeScalarView(scalars[a..<b])) == w["word"] as? String)
                }
                #expect(last <= start && start <= end && end <= duration + 0.001, "\(w)")
                last = start
            }
        }
    }
}
