import Foundation
import Testing
import Parla
import ParlaAudioTestSupport
import ParlaEngine

/// Property tests over the real engine: random compositions of the text that breaks
/// timelines (``TextCaseGenerator``) are rendered with timings through the library, and every
/// timeline rule is checked (``SpeechTimeline/invariantViolation(input:)``).
///
/// The seed and number of cases come from `PARLA_PROPERTY_SEED` and `PARLA_PROPERTY_CASES`
/// (CI runs a fixed slice); `PARLA_PROPERTY_SECONDS` runs for a time instead of a count.
/// Before each case its text is written to `PARLA_PROPERTY_LOG` (default
/// `$TMPDIR/parla-property-case.txt`), so a case that kills the process can be replayed.
/// A failing case prints its seed and a minimised text.
@Suite("Timeline properties over the real engine", .serialized)
struct TimelinePropertyTests {
    /// An engine of the suite's own (see SynthesisTests.engine).
    static let engine = SynthesisEngine()
    let synth = SpeechSynthesizer(engine: TimelinePropertyTests.engine)

    /// What rendering `c` breaks, or nil.
    func failure(of c: TextCase) async -> String? {
        let utterance: Utterance
        do {
            utterance = c.isSSML ? try Utterance(ssml: c.text) : Utterance(string: c.text, language: c.language.flatMap(LanguageTag.init))
        } catch {
            return nil  // malformed markup is rejected with an error: that is the right outcome
        }
        let timeline: SpeechTimeline
        do {
            timeline = try await synth.write(utterance) { _ in }
        } catch ParlaError.emptyText {
            return nil
        } catch {
            return "rendering failed: \(error)"
        }
        if let v = timeline.invariantViolation(input: utterance.inputText) { return v }
        if !c.isSSML {
            let scalars = Array(utterance.inputText.unicodeScalars)
            for w in timeline.words where w.range.upperBound <= scalars.count {
                let covered = String(String.UnicodeScalarView(scalars[w.range]))
                if covered != w.word { return "the range of word \(w.word.debugDescription) covers \(covered.debugDescription)" }
            }
        }
        return nil
    }

    @Test func randomTextsRenderWithValidTimelines() async throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["PARLA_PROPERTY_SEED"].flatMap { UInt64($0) } ?? 20261123
        let cases = env["PARLA_PROPERTY_CASES"].flatMap { Int($0) } ?? 160
        let seconds = env["PARLA_PROPERTY_SECONDS"].flatMap { Double($0) }
        let log = env["PARLA_PROPERTY_LOG"] ?? FileManager.default.temporaryDirectory.appendingPathComponent("parla-property-case.txt").path
        let started = Date()
        var generator = TextCaseGenerator(seed: seed)
        var n = 0
        while seconds.map({ Date().timeIntervalSince(started) < $0 }) ?? (n < cases) {
            let c = generator.next()
            try? "seed \(seed) case \(n)\n\(c)\n".write(toFile: log, atomically: false, encoding: .utf8)
            if let dump = env["PARLA_PROPERTY_DUMP"] {
                // One file per case (the text, and its language on the first line), to replay
                // each in a process of its own.
                try? ((c.isSSML ? "ssml" : "text") + " " + (c.language ?? "-") + "\n" + c.text)
                    .write(toFile: dump + "/case-\(n).txt", atomically: false, encoding: .utf8)
            }
            if let problem = await failure(of: c) {
                let small = await c.minimised { await failure(of: $0) != nil }
                let smallProblem = await failure(of: small) ?? problem
                Issue.record("""
                    seed \(seed), case \(n): \(problem)
                      text: \(c)
                      minimised: \(small)
                      which breaks: \(smallProblem)
                    """)
                return
            }
            n += 1
        }
        print("timeline properties: \(n) cases from seed \(seed) passed in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    /// The texts of issue 15, which trapped in the timeline builder, and their neighbours.
    @Test(arguments: [
        "\"Better.\" J. R.",
        "\"Cabbages are better.\" -- J. R. R. Tolkien",
        "((\"nested.\" [quotes.] {here.})) J. R.",
        "tab\there. \"x.\"\r\nJ. R.",
        "«Mieux.» J. R.",
        "„Besser.“ J. R. R.",
        "「いい。」J. R.",
    ])
    func quotationsFollowedByInitialsRender(text: String) async throws {
        let u = Utterance(string: text, language: "en")
        let timeline = try await synth.write(u) { _ in }
        #expect(!timeline.words.isEmpty)
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
    }
}
