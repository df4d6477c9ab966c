// The checks behind Parla's two libFuzzer targets (`scripts/fuzz`), shared with the unit tests
// that replay the seed corpus and every crash found (`FuzzReplayTests`). Built two ways: as
// the `ParlaFuzzChecks` target on top of ParlaCore, and by `scripts/fuzz` in one module with
// ParlaCore's sources.
#if canImport(ParlaCore)
import ParlaCore
#endif

/// Reads structured choices from fuzzer bytes; an exhausted input reads zeros.
struct FuzzInput {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isExhausted: Bool { index >= bytes.count }

    mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func int(below n: Int) -> Int { n <= 0 ? 0 : Int(byte()) % n }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    /// A number around `center`: usually close to it, sometimes far off, negative or extreme.
    mutating func hostile(around center: Int) -> Int {
        switch byte() % 16 {
        case 0: return Int(Int32.max)
        case 1: return Int(Int32.min)
        case 2: return -Int(byte())
        case 3: return center + Int(byte()) * 1000
        default: return center + Int(Int8(bitPattern: byte()))
        }
    }
}

/// Parla's fuzz properties: each returns what broke, or nil.
public enum FuzzChecks {
    /// The SSML reader on arbitrary bytes: it may reject the markup (with an error) but never
    /// traps, and what it accepts maps every spoken scalar into the markup, in order.
    public static func ssml(_ data: [UInt8]) -> String? {
        let markup = String(decoding: data, as: UTF8.self)
        guard let utterance = try? Utterance(ssml: markup), let source = utterance.source else { return nil }
        let markupCount = markup.unicodeScalars.count
        let spoken = utterance.string.unicodeScalars.count
        guard source.starts.count == spoken, source.ends.count == spoken else {
            return "the source map has \(source.starts.count) entries for \(spoken) spoken scalars"
        }
        var last = 0
        for i in 0..<spoken {
            let r = source.markupRange(of: i..<(i + 1))
            guard r.lowerBound >= 0, r.upperBound <= markupCount else { return "scalar \(i) maps to \(r), outside the markup" }
            guard r.lowerBound >= last else { return "scalar \(i) maps to \(r), before scalar \(i - 1)" }
            last = r.lowerBound
        }
        for p in utterance.pauses where p.offset < 0 || p.offset > spoken {
            return "a pause at \(p.offset) lies outside the text"
        }
        return nil
    }

    /// Scalars that break timelines: letters, marks with and without a base, joiners, emoji
    /// pieces, CJK, RTL, quotes, sentence punctuation and every kind of space.
    static let alphabet: [Unicode.Scalar] = [
        "a", "Z", "J", "R", "1", ".", ".", "\"", "'", "’", "«", "»", " ", " ", "\n", "\t", "\r", "\u{A0}",
        "\u{2028}", "\u{301}", "\u{64E}", "\u{94D}", "\u{200D}", "\u{200C}", "\u{FE0F}", "😀", "\u{1F3FD}",
        "中", "。", "ب", "ש", "क", "ष", "!", "?", "…", "-", "e", "é", "\u{202E}", "\u{2069}", "\u{FEFF}",
    ]

    static let voiceA = SpeechVoice(identifier: "fuzz.a", name: "A", engineVoice: "a", languages: ["en"])
    static let voiceB = SpeechVoice(identifier: "fuzz.b", name: "B", engineVoice: "b", languages: ["fr"])

    /// The timeline builder fed a hostile engine: events at positions that go backwards, repeat,
    /// point past the text or into a cluster, with zero or negative lengths, samples outside the
    /// audio, sentences before words and after the end, over plain text or SSML split into runs
    /// anywhere. The timeline must keep every rule (``SpeechTimeline/invariantViolation(input:)``)
    /// and mark as estimated every word whose time no engine event gave.
    public static func timeline(_ data: [UInt8]) -> String? {
        var trace: String?
        return timeline(data, trace: &trace)
    }

    /// ``timeline(_:)``, and what happened: the text, the runs, the events fed and the marks out.
    public static func timelineTrace(_ data: [UInt8]) -> String {
        var trace: String? = ""
        let problem = timeline(data, trace: &trace)
        return (trace ?? "") + "result: \(problem ?? "ok")\n"
    }

    static func timeline(_ data: [UInt8], trace: inout String?) -> String? {
        var input = FuzzInput(data)
        // The text: plain, or SSML made of balanced pieces.
        var scalars = String.UnicodeScalarView()
        for _ in 0..<(1 + input.int(below: 40)) { scalars.append(alphabet[input.int(below: alphabet.count)]) }
        let plain = String(scalars)
        var text = plain
        var source: SourceMap?
        if input.int(below: 3) == 0 {
            var markup = "<speak>"
            var piece = ""
            for s in plain.unicodeScalars {
                piece.unicodeScalars.append(s)
                if input.int(below: 4) == 0 {
                    let escaped = piece.replacing("&", with: "&amp;").replacing("<", with: "&lt;")
                    switch input.int(below: 6) {
                    case 0: markup += "<s>\(escaped)</s>"
                    case 1: markup += escaped + "<break time=\"10ms\"/>"
                    case 2: markup += "<voice xml:lang=\"fr\">\(escaped)</voice>"
                    case 3: markup += "<sub alias=\"xy\">\(escaped)</sub>"
                    case 4: markup += "<mark name=\"m\"/>" + escaped
                    default: markup += escaped
                    }
                    piece = ""
                }
            }
            markup += piece.replacing("&", with: "&amp;").replacing("<", with: "&lt;") + "</speak>"
            guard let u = try? Utterance(ssml: markup), !u.string.isEmpty else { return nil }
            text = u.string
            source = u.source
        }
        let count = text.unicodeScalars.count
        guard count > 0 else { return nil }
        // Runs: cut anywhere (inside clusters too), two voices, some spelled out.
        var cuts = Set<Int>()
        for _ in 0..<input.int(below: 4) { cuts.insert(1 + input.int(below: max(1, count - 1))) }
        let bounds = [0] + cuts.filter { $0 < count }.sorted() + [count]
        var runs: [SpeechPlan.Run] = []
        for (lo, hi) in zip(bounds, bounds.dropFirst()) where lo < hi {
            let b = input.bool()
            runs.append(SpeechPlan.Run(
                range: lo..<hi, language: b ? "fr" : "en", voice: b ? voiceB : voiceA, rate: 175, pitch: 50, volume: 100,
                punctuation: .none, spellOut: input.int(below: 5) == 0, silenceBefore: input.int(below: 6) == 0 ? .milliseconds(20) : .zero))
        }
        let plan = SpeechPlan(text: text, runs: runs, leadingSilence: input.bool() ? .milliseconds(5) : .zero, source: source)
        trace? += "text: \(text.unicodeScalars.map { String($0.value, radix: 16) })\n" + (source.map { "markup: \($0.markup.debugDescription)\n" } ?? "")
        trace? += "runs: \(runs.map { "\($0.range)\($0.spellOut ? " spelled" : "")" })\n"
        var timeline = SpeechTimeline(sampleRate: 22050)
        var builder = TimelineBuilder(plan: plan, sampleRate: 22050) { timeline.record($0) }
        builder.marksWords = input.int(below: 8) != 0
        builder.skipsLeadingSilence = input.int(below: 3) == 0
        builder.silence(plan.leadingSilence)
        // The times the engine gave to words, as the builder may use them (moved into the run's audio).
        var wordTimes = Set<Int>()
        for index in plan.runs.indices {
            builder.silence(plan.runs[index].silenceBefore)
            let engineText = builder.beginRun(index)
            let runStart = builder.sampleCount
            let engineCount = engineText.text.unicodeScalars.count
            trace? += "run \(index) from sample \(runStart): engine text \(engineText.text.debugDescription)\n"
            var position = 1
            var runSample = 0
            var runSkipped = 0  // the engine's zeros skipped before the utterance's first sound
            for _ in 0..<input.int(below: 24) {
                switch input.int(below: 6) {
                case 0, 1:
                    let n = input.int(below: 64) * 16
                    let kind = input.int(below: 3)
                    let block = (0..<n).map { i in
                        kind == 0 ? Int16(truncatingIfNeeded: (i % 40) * 500 - 10000) : kind == 1 ? Int16(i % 7) : 0
                    }
                    if builder.skipsLeadingSilence, builder.sampleCount == 0 { runSkipped += block.prefix { $0 == 0 }.count }
                    builder.engineAudio(block)
                    trace? += "  audio \(n) \(["loud", "quiet", "silent"][kind])\n"
                    runSample += n
                case 2, 3:
                    position = input.hostile(around: position + 1)
                    let sample = input.hostile(around: runSample)
                    let length = input.hostile(around: 3)
                    builder.word(position: position, length: length, runSample: sample)
                    trace? += "  word at \(position) length \(length) sample \(sample)\n"
                    if sample >= 0, sample < runSkipped {
                        wordTimes.insert(runStart)
                    } else {
                        let moved = sample >= 0 ? sample - runSkipped : sample
                        let (sum, overflow) = runStart.addingReportingOverflow(moved)
                        wordTimes.insert(
                            overflow ? (moved < 0 ? runStart : builder.sampleCount) : min(max(sum, runStart), builder.sampleCount))
                    }
                case 4:
                    let (at, sample) = (input.hostile(around: position), input.hostile(around: runSample))
                    builder.sentence(position: at, runSample: sample)
                    trace? += "  sentence at \(at) sample \(sample)\n"
                default:
                    position = input.int(below: engineCount + 2)
                }
                if input.isExhausted { break }
            }
            builder.endRun()
        }
        builder.endEngineAudio()
        builder.finish()
        trace? += "words: \(timeline.words.map { "\($0.range)\($0.isEstimated ? "~" : "")@\($0.startSample)" })\n"
        trace? += "sentences: \(timeline.sentences.map { "\($0.range)@\($0.startSample)" })\n"
        trace? += "segments: \(timeline.segments.map { "\($0.range)" })\n"
        let inputText = source?.markup ?? text
        if let v = timeline.invariantViolation(input: inputText) { return v }
        for (i, w) in timeline.words.enumerated() where !w.isEstimated && !wordTimes.contains(w.startSample) {
            return "word \(i) (\(w.range)) is not marked estimated, but no engine event gave its time \(w.startSample)"
        }
        for s in timeline.sentences where s.endSample < s.startSample {
            return "a sentence ends before it starts"
        }
        return nil
    }
}
