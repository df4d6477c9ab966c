import Foundation
import ParlaFuzzChecks
import ParlaTestSupport
import Testing

/// The libFuzzer targets' checks (`scripts/fuzz`), run in every test run: over the committed
/// seed corpus, every input a fuzzer ever failed on (`Tests/Fuzz/regressions`), and a slice of
/// seeded random inputs (`PARLA_FUZZ_CASES`, default 3000 per target).
@Suite("Fuzz targets replayed")
struct FuzzReplayTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func files(_ folder: String, _ target: String) -> [URL] {
        let dir = root.appendingPathComponent(folder).appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.sorted().map { dir.appendingPathComponent($0) }
    }

    static let targets: [(name: String, check: @Sendable ([UInt8]) -> String?)] = [
        ("ssml", FuzzChecks.ssml), ("timeline", FuzzChecks.timeline),
    ]

    @Test(arguments: ["ssml", "timeline"])
    func corpusAndRegressionsPass(target: String) throws {
        let check = try #require(Self.targets.first { $0.name == target }).check
        let inputs = Self.files("corpus", target) + Self.files("regressions", target)
        #expect(inputs.count >= 5, "no seed corpus for \(target) under \(Self.root.path)")
        for url in inputs {
            let bytes = try [UInt8](Data(contentsOf: url))
            if let problem = check(bytes) { Issue.record("\(url.lastPathComponent): \(problem)") }
        }
    }

    @Test(arguments: ["ssml", "timeline"])
    func seededRandomInputsPass(target: String) throws {
        let check = try #require(Self.targets.first { $0.name == target }).check
        let cases = ProcessInfo.processInfo.environment["PARLA_FUZZ_CASES"].flatMap { Int($0) } ?? 3000
        var rng = SeededGenerator(seed: 15)
        for n in 0..<cases {
            let count = Int(rng.next() % 200)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if target == "ssml" {
                // Mostly markup-like text, so the reader gets past the root element.
                let pieces = ["<speak>", "</speak>", "<s>", "</s>", "<p>", "</p>", "<break time=\"1s\"/>", "<sub alias=\"a\">", "</sub>",
                              "<voice xml:lang=\"fr\">", "</voice>", "&amp;", "&#x301;", "&#0;", "<!--", "-->", "<![CDATA[", "]]>", "x", " ", "é"]
                bytes = Array(("<speak>" + bytes.map { pieces[Int($0) % pieces.count] }.joined() + "</speak>").utf8)
            }
            if let problem = check(bytes) {
                Issue.record("case \(n) (\(bytes.count) bytes: \(bytes.map { String($0, radix: 16) }.joined(separator: " "))): \(problem)")
                return
            }
        }
    }
}

/// `PARLA_FUZZ_TRACE=FILE swift test --filter traceOneInput` prints what the timeline check
/// does with one input (for reading a finding).
@Test(.enabled(if: ProcessInfo.processInfo.environment["PARLA_FUZZ_TRACE"] != nil))
func traceOneInput() throws {
    let path = try #require(ProcessInfo.processInfo.environment["PARLA_FUZZ_TRACE"])
    print(FuzzChecks.timelineTrace([UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))))
}
