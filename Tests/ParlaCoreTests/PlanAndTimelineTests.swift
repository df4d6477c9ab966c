import Testing
import FoundationEssentials
@testable import ParlaCore

/// A small in-memory catalog, so these tests need no files and no engine.
let testCatalog = VoiceCatalog(
    voices: [
        SpeechVoice(identifier: "t.en", name: "English", engineVoice: "en-us", languages: ["en-US", "en"]),
        SpeechVoice(identifier: "t.el", name: "Greek", engineVoice: "el", languages: ["el"]),
        SpeechVoice(identifier: "t.ar", name: "Arabic", engineVoice: "ar", languages: ["ar"]),
        SpeechVoice(identifier: "t.fr", name: "French", engineVoice: "fr-fr", languages: ["fr-FR", "fr"]),
    ],
    variants: ["f2"], languageDefaults: ["en": "t.en"])

/// An attributed string from parts, each with an optional language attribute.
func attributed(_ parts: [(String, LanguageTag?)]) -> AttributedString {
    var s = AttributedString()
    for (text, lang) in parts {
        var p = AttributedString(text)
        if let lang { p.speechLanguage = lang }
        s.append(p)
    }
    return s
}

@Suite("Speech plan")
struct SpeechPlanTests {

    @Test func languageSpansBecomeSegmentsAndSpacesJoinANeighbour() throws {
        let text = attributed([("Hello ", nil), ("Γειά", "el"), (" ", nil), ("مرحبا", "ar")])
        let plan = try SpeechPlan(Utterance(text), catalog: testCatalog)
        #expect(plan.runs.map(\.voice.identifier) == ["t.en", "t.el", "t.ar"])
        #expect(plan.segments.map(\.range) == [0..<6, 6..<11, 11..<16])
    }

    @Test func proseodyMultipliesAndClamps() throws {
        var text = AttributedString("slow fast")
        text[text.range(of: "fast")!].speechRate = 6
        var u = Utterance(text)
        u.wordsPerMinute = 200
        u.pitch = 1.5
        let plan = try SpeechPlan(u, catalog: testCatalog)
        #expect(plan.runs.map(\.rate) == [200, 1000])  // 1,200 capped
        #expect(plan.runs.allSatisfy { $0.pitch == 75 })
    }

    /// One unit for rate everywhere: `rate` multiplies the voice's words per minute (or
    /// `wordsPerMinute`) and the span's `speechRate`, and the result stays within 80–1,000.
    @Test func rateIsAMultiplierOfTheVoicesRate() throws {
        var text = AttributedString("plain doubled")
        text[text.range(of: "doubled")!].speechRate = 2
        var u = Utterance(text, language: "en")
        u.rate = 1.5
        #expect(try SpeechPlan(u, catalog: testCatalog).runs.map(\.rate) == [263, 525])  // 175 × 1.5; 175 × 3
        u.wordsPerMinute = 100
        #expect(try SpeechPlan(u, catalog: testCatalog).runs.map(\.rate) == [150, 300])
        u.rate = 0.5
        #expect(try SpeechPlan(u, catalog: testCatalog).runs.map(\.rate) == [80, 100])  // 50 raised to 80
        for bad in [0.2, 6.5, .nan, .infinity] {
            u.rate = bad
            #expect(throws: ParlaError.self) { try SpeechPlan(u, catalog: testCatalog) }
        }
    }

    @Test func pausesSplitRuns() throws {
        var u = Utterance(string: "one two")
        u.pauses = [.init(offset: 4, duration: .milliseconds(300)), .init(offset: 7, duration: .seconds(1))]
        u.preUtteranceDelay = .milliseconds(100)
        let plan = try SpeechPlan(u, catalog: testCatalog)
        #expect(plan.runs.map(\.range) == [0..<4, 4..<7])
        #expect(plan.runs[1].silenceBefore == .milliseconds(300))
        #expect(plan.leadingSilence == .milliseconds(100))
        #expect(plan.trailingSilence == .seconds(1))
    }

    @Test func badInputIsRejected() {
        #expect(throws: ParlaError.emptyText) { try SpeechPlan(Utterance(string: " \n\t"), catalog: testCatalog) }
        #expect(throws: ParlaError.noVoiceForLanguage("xx")) { try SpeechPlan(Utterance(string: "hi", language: "xx"), catalog: testCatalog) }
        var u = Utterance(string: "hi")
        u.wordsPerMinute = 20
        #expect(throws: ParlaError.parameterOutOfRange(name: "Rate (words per minute)", value: 20, range: 80...1000)) {
            try SpeechPlan(u, catalog: testCatalog)
        }
    }

    @Test func nonFiniteAttributesAndOutlandishPausesAreRejected() throws {
        func plan(_ edit: (inout Utterance) -> Void) throws {
            var u = Utterance(string: "some text")
            edit(&u)
            _ = try SpeechPlan(u, catalog: testCatalog)
        }
        for value in [Double.nan, .infinity, -1, 1e9] {
            #expect(throws: ParlaError.self) { try plan { $0.text.speechRate = value } }
            #expect(throws: ParlaError.self) { try plan { $0.text.speechPitch = value } }
            #expect(throws: ParlaError.self) { try plan { $0.text.speechVolume = value } }
        }
        #expect(throws: ParlaError.self) { try plan { $0.pitch = .nan } }
        #expect(throws: ParlaError.self) { try plan { $0.preUtteranceDelay = .seconds(-1) } }
        #expect(throws: ParlaError.self) { try plan { $0.postUtteranceDelay = .seconds(7200) } }
        #expect(throws: ParlaError.self) { try plan { $0.pauses = [.init(offset: 2, duration: .seconds(Int64.max))] } }
        // In range, they are fine.
        try plan {
            $0.text.speechRate = 2
            $0.pauses = [.init(offset: 2, duration: .milliseconds(300))]
        }
        // Non-finite SSML prosody is an SSML error, not a trap.
        for bad in [#"rate="nan%""#, #"rate="inf""#, #"volume="infdB""#, #"pitch="-inf%""#] {
            #expect(throws: ParlaError.self) { try Utterance(ssml: "<speak><prosody \(bad)>x</prosody></speak>") }
        }
    }

    @Test func voiceLookup() throws {
        #expect(try testCatalog.voice(for: "fr-CA").identifier == "t.fr")
        #expect(try testCatalog.voice(identifier: "T.FR+f2").engineVoiceName == "fr-fr+f2")
        #expect(throws: ParlaError.unknownVoice("t.fr+nope")) { try testCatalog.voice(identifier: "t.fr+nope") }
        #expect(throws: ParlaError.unknownVoice("nope")) { try testCatalog.voice(identifier: "nope") }
    }
}

@Suite("Engine input and word alignment")
struct AlignmentTests {
    @Test func spellOutEscapesMapBack() {
        let text = "a&<b"
        let input = EngineInput(text: Substring(text).unicodeScalars, range: 10..<14, spellOut: true)
        #expect(input.isMarkup)
        #expect(input.text == #"<speak><say-as interpret-as="characters">a&amp;&lt;b</say-as></speak>"#)
        let prefix = 41
        #expect(input.textOffset(ofEnginePosition: prefix) == 10)       // a
        #expect(input.textOffset(ofEnginePosition: prefix + 3) == 11)   // inside &amp;
        #expect(input.textOffset(ofEnginePosition: prefix + 6) == 12)   // &lt;
        #expect(input.textOffset(ofEnginePosition: prefix + 9) == 12)   // still &lt;
        #expect(input.textOffset(ofEnginePosition: prefix + 10) == 13)  // b
        #expect(input.textOffset(ofEnginePosition: 0) == 10)            // markup maps forward
    }

    /// Drives a TimelineBuilder with scripted engine events.
    func timeline(_ text: String, events: [(pos: Int, len: Int, sample: Int)], samples: Int = 10_000) throws -> [WordMark] {
        let plan = try SpeechPlan(Utterance(string: text), catalog: testCatalog)
        var words: [WordMark] = []
        var b = TimelineBuilder(plan: plan, sampleRate: 10_000) { if case .word(let w) = $0 { words.append(w) } }
        b.beginRun(0, input: EngineInput(text: Substring(text).unicodeScalars, range: 0..<text.unicodeScalars.count, spellOut: false))
        b.audio(Array(repeating: 1000, count: samples))
        for e in events { b.word(position: e.pos, length: e.len, runSample: e.sample) }
        b.finish()
        return words
    }

    /// The engine's events for `"Better." J. R.` as espeak-ng 1.51 reports them: the last
    /// sentence event goes back (13 after 14). It trapped the builder (issue 15).
    @Test func sentenceEventsThatGoBackAreDropped() throws {
        let text = "\"Better.\" J. R."
        let plan = try SpeechPlan(Utterance(string: text), catalog: testCatalog)
        var timeline = SpeechTimeline(sampleRate: 22050)
        var b = TimelineBuilder(plan: plan, sampleRate: 22050) { timeline.record($0) }
        b.beginRun(0, input: EngineInput(text: Substring(text).unicodeScalars, range: 0..<text.unicodeScalars.count, spellOut: false))
        b.audio(Array(repeating: 1000, count: 28858))
        b.sentence(position: 2, runSample: 2424)
        b.word(position: 2, length: 6, runSample: 2424)
        b.sentence(position: 11, runSample: 18472)
        b.word(position: 11, length: 1, runSample: 18472)
        b.sentence(position: 14, runSample: 24298)
        b.word(position: 14, length: 1, runSample: 24298)
        b.sentence(position: 13, runSample: 28858)  // behind the last one
        b.word(position: 13, length: 0, runSample: 28858)
        b.finish()
        #expect(timeline.invariantViolation(input: text) == nil)
        #expect(timeline.words.map(\.word) == ["Better", "J", "R"])
        #expect(timeline.sentences.map(\.range) == [0..<9, 10..<12, 13..<15])
    }

    /// Live speech drops the engine's zeros before the first sound. Events in them move to the
    /// first sound, later ones move back by as much; zeros after the sound, a planned pause,
    /// and an utterance that makes no sound at all keep their samples.
    @Test func leadingSilenceIsSkippedWithItsEvents() throws {
        let text = "one two"
        let plan = try SpeechPlan(Utterance(string: text), catalog: testCatalog)
        func build(pause: Bool, _ blocks: [[Int16]], words: [(afterBlock: Int, position: Int, sample: Int)]) -> (SpeechTimeline, [Int16]) {
            var timeline = SpeechTimeline(sampleRate: 10_000)
            var audio: [Int16] = []
            var b = TimelineBuilder(plan: plan, sampleRate: 10_000) { e in
                timeline.record(e)
                if case .audio(let a) = e { audio += a.samples }
            }
            b.skipsLeadingSilence = true
            if pause { b.silence(.milliseconds(5)) }
            b.beginRun(0, input: EngineInput(text: Substring(text).unicodeScalars, range: 0..<7, spellOut: false))
            for (i, block) in blocks.enumerated() {
                b.engineAudio(block)
                for w in words where w.afterBlock == i { b.word(position: w.position, length: 3, runSample: w.sample) }
            }
            b.endRun()
            b.endEngineAudio()
            b.finish()
            return (timeline, audio)
        }
        let zeros = [Int16](repeating: 0, count: 300), loud = [Int16](repeating: 1000, count: 2000)
        let blocks = [zeros, Array(zeros[..<200]) + loud, zeros]
        let events = [(afterBlock: 0, position: 1, sample: 100), (afterBlock: 1, position: 5, sample: 1500)]
        let (timeline, audio) = build(pause: false, blocks, words: events)
        #expect(audio.count == 2300)
        #expect(audio.first == 1000 && audio.last == 0)
        #expect(timeline.words.map(\.startSample) == [0, 1000])
        #expect(timeline.words.map(\.isEstimated) == [false, false])
        #expect(timeline.invariantViolation(input: text) == nil)
        // After a planned pause nothing is skipped: the engine's times count from the run's start.
        let (paused, pausedAudio) = build(pause: true, blocks, words: events)
        #expect(pausedAudio.count == 50 + 2800)
        #expect(paused.words.map(\.startSample) == [150, 1550])
        // No sound at all: the silence is given back.
        let (_, silent) = build(pause: false, [zeros, zeros], words: [])
        #expect(silent.count == 600)
    }

    /// Live speech also drops the engine's silence after the last sound: the utterance ends when
    /// its last sound is heard. Silence followed by more sound, by an event or by a planned pause
    /// is kept, and a threshold makes a faint noise (a Piper voice's silence) count as silence.
    @Test func trailingSilenceIsDroppedButNothingElse() throws {
        let text = "one two"
        let plan = try SpeechPlan(Utterance(string: text), catalog: testCatalog)
        func build(threshold: Int16, _ blocks: [[Int16]], wordAfter: Int? = nil, pause: Bool = false) -> (SpeechTimeline, [Int16]) {
            var timeline = SpeechTimeline(sampleRate: 10_000)
            var audio: [Int16] = []
            var b = TimelineBuilder(plan: plan, sampleRate: 10_000) { e in
                timeline.record(e)
                if case .audio(let a) = e { audio += a.samples }
            }
            b.skipsLeadingSilence = true
            b.skipsTrailingSilence = true
            b.silenceThreshold = threshold
            b.beginRun(0, input: EngineInput(text: Substring(text).unicodeScalars, range: 0..<7, spellOut: false))
            for (i, block) in blocks.enumerated() {
                b.engineAudio(block)
                if wordAfter == i { b.word(position: 5, length: 3, runSample: 1200) }
            }
            b.endRun()
            b.endEngineAudio()
            if pause { b.silence(.milliseconds(10)) }
            b.finish()
            return (timeline, audio)
        }
        let loud = [Int16](repeating: 1000, count: 1000), zeros = [Int16](repeating: 0, count: 500)
        let faint = (0..<500).map { Int16($0 % 20) - 10 }
        // The tail goes but for 10 ms (100 samples here); the gap between two sounds stays.
        let (t1, a1) = build(threshold: 0, [loud, zeros, loud, zeros, zeros])
        #expect(a1.count == 2600)
        #expect(t1.sampleCount == 2600)
        #expect(t1.segments.last?.endSample == 2600)
        // A word reported in held-back silence keeps its time (the silence is passed on first).
        let (t2, a2) = build(threshold: 0, [loud, zeros, loud, zeros], wordAfter: 1)
        #expect(a2.count == 2600)
        #expect(t2.words.last?.startSample == 1200)
        #expect(t2.words.last?.isEstimated == false)
        #expect(t2.invariantViolation(input: text) == nil)
        // A planned pause after the utterance is kept.
        let (_, a3) = build(threshold: 0, [loud, zeros], pause: true)
        #expect(a3.count == 1000 + 100 + 100)
        // Faint noise counts as silence with a threshold, at both ends; not without one.
        let (_, a4) = build(threshold: 32, [faint, loud, faint])
        #expect(a4.count == 1100)
        let (_, a5) = build(threshold: 0, [faint, loud, faint])
        #expect(a5.count > 1000)
    }

    /// Hostile samples: before the run, past the audio, far past Int32; and a sentence before
    /// any word. Times stay inside the audio, and moved ones are marked estimated.
    @Test func samplesOutsideTheAudioAreClampedAndMarked() throws {
        let text = "one two three"
        let plan = try SpeechPlan(Utterance(string: text), catalog: testCatalog)
        var timeline = SpeechTimeline(sampleRate: 10_000)
        var b = TimelineBuilder(plan: plan, sampleRate: 10_000) { timeline.record($0) }
        b.beginRun(0, input: EngineInput(text: Substring(text).unicodeScalars, range: 0..<13, spellOut: false))
        b.sentence(position: 9, runSample: Int(Int32.max))
        b.audio(Array(repeating: 1000, count: 3000))
        b.word(position: 1, length: 3, runSample: -500)
        b.word(position: 5, length: 3, runSample: 1_000_000)
        b.word(position: 9, length: 5, runSample: Int(Int32.min))
        b.finish()
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
        #expect(timeline.words.map(\.isEstimated) == [true, true, true])
        #expect(timeline.words.allSatisfy { $0.endSample <= 3000 })
    }

    @Test func missingDuplicateAndSymbolEventsAreRepaired() throws {
        // "77" reported twice, "known" never, "&" is a symbol word.
        let words = try timeline("Tom & well-known 77", events: [(1, 3, 0), (5, 1, 1000), (7, 4, 2000), (18, 2, 5000), (19, 2, 6000)])
        #expect(words.map(\.word) == ["Tom", "&", "well", "known", "77"])
        #expect(words.map(\.isEstimated) == [false, false, false, true, false])
        #expect(words[3].startSample > 2000 && words[3].startSample < 5000)
        #expect(words.map(\.startSample) == words.map(\.startSample).sorted())
        #expect(words[4].endSample == 10_000)
    }

    @Test func rangesNeverSplitGraphemes() throws {
        // The engine points into the middle of a ZWJ emoji and at a combining mark.
        let text = "👩‍👩‍👧 cafe\u{301} 日本"
        let words = try timeline(text, events: [(3, 1, 0), (9, 1, 100), (11, 2, 200), (11, 2, 300)])
        let scalars = Array(text.unicodeScalars)
        let boundaries = Set(text.indices.map { text.unicodeScalars.distance(from: text.unicodeScalars.startIndex, to: $0) } + [scalars.count])
        #expect(words.map(\.word) == ["👩‍👩‍👧", "café", "日", "本"])
        for w in words {
            #expect(boundaries.contains(w.range.lowerBound) && boundaries.contains(w.range.upperBound))
            #expect(String(String.UnicodeScalarView(scalars[w.range])) == w.word)
        }
    }

    @Test func sentenceEndsLookPastClosingQuotesAndKnowOtherScripts() {
        for ended in ["Stop.", #"He said "Stop.""#, "(see above.)", "„Halt.“", "« Arrête. »", "「はい。」", "है।", "ہے۔", "Wait…", "Really?!  ", "", "  "] {
            #expect(TimelineBuilder.endsSentence(ended.unicodeScalars), "\(ended)")
        }
        for open in ["Hello there", "Dear Sir,", #"He said "Stop""#, "(see above)", "one; two", "x:"] {
            #expect(!TimelineBuilder.endsSentence(open.unicodeScalars), "\(open)")
        }
    }

    @Test func noEventsAtAllStillGivesEveryWordATime() throws {
        let words = try timeline("one two three", events: [])
        #expect(words.map(\.word) == ["one", "two", "three"])
        #expect(words.allSatisfy { $0.isEstimated })
        #expect(words.first?.startSample == 0)
    }
}
