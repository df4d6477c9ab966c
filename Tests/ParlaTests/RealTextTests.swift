import Foundation
import Parla
import ParlaAudioTestSupport
import Testing

/// Real text at scale: the strings of the language-identification test set
/// (`bench/langid-test.tsv`, 77 languages, spoken with detection) and both render corpora
/// (spoken in their given language) are rendered with timings in this process, and every
/// timeline is checked against the caller's text. CI renders every 25th line;
/// `PARLA_REALTEXT_STEP=1` (as `scripts/check-real-text` does) renders every line.
@Suite("Real text at scale")
struct RealTextTests {
    static let bench = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("bench")
    static var step: Int { ProcessInfo.processInfo.environment["PARLA_REALTEXT_STEP"].flatMap { Int($0) }.map { max($0, 1) } ?? 25 }

    /// Every `step`-th line of a TSV file, split into fields.
    static func rows(_ name: String) throws -> [[Substring]] {
        let text = try String(contentsOf: bench.appendingPathComponent(name), encoding: .utf8)
        return text.split(separator: "\n").enumerated().filter { $0.offset % step == 0 }.map { $0.element.split(separator: "\t", omittingEmptySubsequences: false) }
    }

    /// Renders each utterance and returns what broke, as "line: problem".
    func check(_ utterances: [(label: String, utterance: Utterance)]) async -> [String] {
        let synth = SpeechSynthesizer()
        var problems: [String] = []
        for (label, u) in utterances {
            do {
                let timeline = try await synth.write(u) { _ in }
                if let v = timeline.invariantViolation(input: u.inputText) { problems.append("\(label): \(v)") }
                let scalars = Array(u.inputText.unicodeScalars)
                for w in timeline.words where String(String.UnicodeScalarView(scalars[w.range])) != w.word {
                    problems.append("\(label): the range of \(w.word.debugDescription) covers other text")
                }
            } catch {
                problems.append("\(label): \(error)")
            }
        }
        return problems
    }

    @Test func languageTestSetRendersWithValidTimelines() async throws {
        let rows = try Self.rows("langid-test.tsv")
        #expect(rows.count >= 20_000 / Self.step)
        let problems = await check(rows.enumerated().map { (i, f) in ("langid-test line \(i * Self.step + 1) (\(f[0]))", Utterance(string: String(f[2]))) })
        #expect(problems.isEmpty, "\(problems.count) of \(rows.count) failed: \(problems.prefix(5))")
        print("real text: \(rows.count) strings of langid-test.tsv, \(problems.count) failed")
    }

    @Test(arguments: ["render-corpus.tsv", "render-corpus-short.tsv"])
    func renderCorporaRenderWithValidTimelines(file: String) async throws {
        let rows = try Self.rows(file)
        let problems = await check(rows.map { f in ("\(file) \(f[0])", Utterance(string: String(f[2]), language: LanguageTag(String(f[1])))) })
        #expect(problems.isEmpty, "\(problems.count) of \(rows.count) failed: \(problems.prefix(5))")
        print("real text: \(rows.count) lines of \(file), \(problems.count) failed")
    }
}
