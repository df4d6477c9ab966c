import Foundation
import Parla
import ParlaAudioTestSupport
import ParlaEngine
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

    /// Renders each utterance (with `synth`, else the default voices) and returns what broke,
    /// as "line: problem", and how many segments each voice spoke.
    func check(
        _ utterances: [(label: String, utterance: Utterance)], with given: SpeechSynthesizer? = nil
    ) async -> (problems: [String], voices: [String: Int]) {
        // Each test an engine of its own: on the shared one they queued on one engine thread.
        let synth = given ?? SpeechSynthesizer(engine: SynthesisEngine())
        var problems: [String] = []
        var voices: [String: Int] = [:]
        for (label, u) in utterances {
            do {
                let timeline = try await synth.write(u) { _ in }
                for segment in timeline.segments { voices[segment.voice, default: 0] += 1 }
                if let v = timeline.invariantViolation(input: u.inputText) { problems.append("\(label): \(v)") }
                let scalars = Array(u.inputText.unicodeScalars)
                for w in timeline.words where String(String.UnicodeScalarView(scalars[w.range])) != w.word {
                    problems.append("\(label): the range of \(w.word.debugDescription) covers other text")
                }
            } catch {
                problems.append("\(label): \(error)")
            }
        }
        return (problems, voices)
    }

    @Test func languageTestSetRendersWithValidTimelines() async throws {
        let rows = try Self.rows("langid-test.tsv")
        #expect(rows.count >= 20_000 / Self.step)
        let (problems, _) = await check(rows.enumerated().map { (i, f) in ("langid-test line \(i * Self.step + 1) (\(f[0]))", Utterance(string: String(f[2]))) })
        #expect(problems.isEmpty, "\(problems.count) of \(rows.count) failed: \(problems.prefix(5))")
        print("real text: \(rows.count) strings of langid-test.tsv, \(problems.count) failed")
    }

    @Test(arguments: ["render-corpus.tsv", "render-corpus-short.tsv"])
    func renderCorporaRenderWithValidTimelines(file: String) async throws {
        let rows = try Self.rows(file)
        let (problems, _) = await check(rows.map { f in ("\(file) \(f[0])", Utterance(string: String(f[2]), language: LanguageTag(String(f[1])))) })
        #expect(problems.isEmpty, "\(problems.count) of \(rows.count) failed: \(problems.prefix(5))")
        print("real text: \(rows.count) lines of \(file), \(problems.count) failed")
    }

    /// The same with Piper's joe voice installed, where it is English's default: every 10th of
    /// the 200 quotations `bench-piper` renders, and every 8th string of this slice of the
    /// language test set, detected (its English strings go to joe, the rest to espeak-ng).
    @Test func realTextRendersWithValidTimelinesOnAPiperVoice() async throws {
        if let missing = PiperFixture.missing { Issue.record(Comment(rawValue: missing)) }
        let catalog = try VoiceCatalog.default().adding(piperVoicesAt: [PiperFixture.voiceDirectory])
        let quotations = try String(contentsOf: Self.bench.appendingPathComponent("piper-quotations.tsv"), encoding: .utf8)
            .split(separator: "\n").enumerated().filter { $0.offset % 10 == 0 }.map { $0.element.split(separator: "\t") }
        var utterances = quotations.map { f in ("piper-quotations \(f[0])", Utterance(string: String(f[2]), language: "en")) }
        let strings = try Self.rows("langid-test.tsv").enumerated().filter { $0.offset % 8 == 0 }
        utterances += strings.map { (i, f) in ("langid-test string \(i) (\(f[0]))", Utterance(string: String(f[2]))) }
        let (problems, voices) = await check(utterances, with: SpeechSynthesizer(catalog: catalog, engine: SynthesisEngine()))
        #expect(problems.isEmpty, "\(problems.count) of \(utterances.count) failed: \(problems.prefix(5))")
        #expect((voices[PiperFixture.voice] ?? 0) >= quotations.count, "joe spoke \(voices[PiperFixture.voice] ?? 0) segments")
        #expect(voices.keys.contains { $0.hasPrefix("espeak-ng.") }, "other languages fell to espeak-ng: \(voices)")
        print("real text with joe: \(utterances.count) strings, \(voices[PiperFixture.voice] ?? 0) segments spoken by joe, \(problems.count) failed")
    }
}
