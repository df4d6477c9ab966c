import Foundation
import Testing
import Parla
import ParlaAudioTestSupport
import ParlaEngine

/// Piper's neural voices end to end, with the real joe model and ONNX Runtime (scripts/setup):
/// word times from the model's own phoneme lengths, one timeline across engines, the same
/// samples for the same text, and voices that are broken in each way a user's can be.
@Suite("Piper voices", .serialized)
struct PiperTests {
    let catalog: VoiceCatalog
    let synth: SpeechSynthesizer

    init() throws {
        if let missing = PiperFixture.missing { Issue.record(Comment(rawValue: missing)) }
        catalog = try VoiceCatalog.default().adding(piperVoicesAt: [PiperFixture.voiceDirectory])
        synth = SpeechSynthesizer(catalog: catalog, engine: Self.engine)
    }

    /// An engine of the suite's own (see SynthesisTests.engine).
    static let engine = SynthesisEngine()

    func render(_ u: Utterance, with synth: SpeechSynthesizer? = nil) async throws -> (samples: [Int16], timeline: SpeechTimeline) {
        let audio = AudioCollector()
        let timeline = try await (synth ?? self.synth).write(u) { event in
            if case .audio(let b) = event { audio.append(b) }
        }
        return (audio.samples, timeline)
    }

    /// Synthesis for playback as it comes (`parla_synthesize_for_playback`, the Spiel provider)
    /// makes a Piper voice's audio as live speech does: a long first sentence cut at a word
    /// after 100 phoneme ids, so that it is heard sooner (the same words, about as long), from
    /// a 16-frame first chunk; a file's audio is left whole.
    @Test func synthesisForPlaybackIsMadeAsLiveSpeechIs() async throws {
        let long = try joe(
            "Screen reader users choose a voice by how fast it answers so the natural voice now makes its audio a little at a time and plays the first part while it is still working on the rest of this sentence."
        )
        var heard: [Bool: (samples: [Int16], words: [String])] = [:]
        for playback in [false, true] {
            let audio = AudioCollector()
            let timeline = try await synth.write(long, forPlayback: playback) { event in
                if case .audio(let b) = event { audio.append(b) }
            }
            heard[playback] = (audio.samples, timeline.words.map(\.word))
        }
        let file = try #require(heard[false]), played = try #require(heard[true])
        #expect(played.words == file.words && file.words.count == 40, "\(played.words)")
        #expect(played.samples != file.samples, "the first sentence is cut for playback")
        let ratio = Double(played.samples.count) / Double(file.samples.count)
        #expect(abs(ratio - 1) < 0.1, "\(played.samples.count) samples for playback, \(file.samples.count) for a file")
    }

    func joe(_ text: String) throws -> Utterance {
        var u = Utterance(string: text, language: "en")
        u.voice = try catalog.voice(identifier: PiperFixture.voice)
        return u
    }

    @Test func theVoiceIsListedAndIsEnglishsDefault() throws {
        let voice = try catalog.voice(identifier: PiperFixture.voice)
        #expect(voice.engine == "piper")
        #expect(voice.quality == "medium")
        #expect(voice.sampleRate == 22050)
        #expect(voice.languages.map(\.identifier) == ["en-US", "en"])
        #expect(try catalog.voice(for: "en").identifier == PiperFixture.voice)
        #expect(try catalog.voice(for: "el").engine == "espeak-ng")
    }

    @Test func wordsAreTimedByTheModel() async throws {
        let text = "Hello world. This is Joe, speaking through Parla."
        let (samples, timeline) = try await render(try joe(text))
        #expect(timeline.words.map(\.word) == ["Hello", "world", "This", "is", "Joe", "speaking", "through", "Parla"])
        #expect(timeline.words.allSatisfy { !$0.isEstimated }, "\(timeline.words)")
        #expect(timeline.sentences.count == 2)
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
        #expect(samples.count == timeline.sampleCount)
        // Real speech: some seconds of it, with each word starting after the one before.
        #expect(samples.count > 22050 * 2 && samples.count < 22050 * 6)
        let starts = timeline.words.map(\.startSample)
        #expect(zip(starts, starts.dropFirst()).allSatisfy { $0 < $1 })
        // The first word starts where the sound does, give or take the model's first phonemes.
        let firstSound = samples.firstIndex { abs(Int($0)) > 1000 } ?? 0
        #expect(abs(firstSound - starts[0]) < 22050 / 10, "sound at \(firstSound), first word at \(starts[0])")
    }

    /// espeak-ng speaks the text once, fast, for the phoneme events that give each phoneme its
    /// word (piper_phonemes.c): its events must still match its phonemes one for one, where
    /// its spoken words are not the written ones too (numbers, a title, a currency, a time).
    @Test func spokenWordsThatAreNotTheWrittenOnesAreMatchedExactly() async throws {
        let text = "In 1984, Dr. Smith paid $3.50 for 12 eggs at 5:30, and 2,000 people saw it."
        let (_, timeline) = try await render(try joe(text))
        #expect(!timeline.words.isEmpty)
        #expect(timeline.words.allSatisfy { !$0.isEstimated }, "\(timeline.words.filter(\.isEstimated))")
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
    }

    /// espeak-ng speaks some words as one with the word before ("in the", "to be", "p.m.") and
    /// names only the first in its events, or names the second at a place inside the first ("too
    /// much"). Each such word is split off its neighbour's phonemes where they end as it does, so
    /// it is timed by the model too; "e.g.", spoken "for example", matches nothing and stays a guess.
    @Test func wordsSpokenJoinedToTheOneBeforeAreTimedExactly() async throws {
        let text = "To be in the U.S.A. at 5 p.m. with the others is too much, e.g. for us."
        let (_, timeline) = try await render(try joe(text))
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
        let words = timeline.words.map(\.word)
        #expect(words == ["To", "be", "in", "the", "U", "S", "A", "at", "5", "p", "m", "with", "the", "others", "is", "too", "much", "e", "g", "for", "us"])
        let estimated = timeline.words.filter(\.isEstimated).map(\.word)
        #expect(estimated == ["g"], "\(estimated)")
        let phonemes = Dictionary(timeline.words.map { ($0.word + "@\($0.range.lowerBound)", $0.phonemes ?? "") }, uniquingKeysWith: { a, _ in a })
        #expect(phonemes["the@9"]?.hasPrefix("ð") == true, "\(phonemes)")
        #expect(phonemes["m@27"]?.contains("m") == true && phonemes["p@25"]?.contains("m") == false, "\(phonemes)")
        #expect(phonemes["much@53"]?.hasPrefix("m") == true && phonemes["too@49"]?.contains("m") == false, "\(phonemes)")
        // Each word starts after the one before: a split never reorders them.
        for (a, b) in zip(timeline.words, timeline.words.dropFirst()) { #expect(a.startSample <= b.startSample) }
    }

    @Test func theSameTextGivesTheSameSamples() async throws {
        let u = try joe("The same noise, every time.")
        let (a, _) = try await render(u)
        let (b, _) = try await render(u)
        #expect(a.count > 0)
        #expect(a == b)
    }

    /// After a Piper utterance the engine host forks a riser beside its spare: a child that gives
    /// the voice sessions with threads of their own, then replaces the one-thread spare and
    /// speaks the next utterance. Its samples are the spare's, and it is the one that speaks.
    @Test(.enabled(if: ProcessInfo.processInfo.activeProcessorCount > 1, "live Piper sessions get threads only on 2 cores or more"))
    func theRisersThreadedSessionsGiveTheSameSamples() async throws {
        let engine = SynthesisEngine()
        let synth = SpeechSynthesizer(catalog: catalog, engine: engine)
        let u = try joe("The same noise, every time.")
        let (spoken, _) = try await render(u, with: synth)  // by the spare, on one thread a session
        let host = try #require(await engine.hostProcessID())
        func children() -> [Int32] {
            let list = (try? String(contentsOfFile: "/proc/\(host)/task/\(host)/children", encoding: .utf8)) ?? ""
            return list.split(separator: " ").compactMap { Int32($0) }
        }
        func threads(_ pid: Int32) -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("Threads:") }
            return line.flatMap { Int($0.split(separator: "\t").last ?? "") } ?? 0
        }
        // The riser has replaced the spare: the host's one waiting child, with ONNX Runtime's
        // threads, for a second on end (after an utterance, the host waits up to 100 ms before it
        // forks the next spare; until the riser is ready, the spare waits beside it).
        var riser: Int32?
        var since = Date()
        let deadline = Date().addingTimeInterval(30)
        while riser == nil && Date() < deadline {
            let waiting = children()
            let alone = waiting.count == 1 && threads(waiting[0]) > 1 ? waiting[0] : nil
            if alone == nil { since = Date() } else if Date().timeIntervalSince(since) > 1 { riser = alone }
            try await Task.sleep(for: .milliseconds(20))
        }
        let rose = try #require(riser, "no riser replaced the spare: children \(children()) with \(children().map(threads)) threads")
        let (again, _) = try await render(u, with: synth)
        // It spoke, and was reaped (a riser not used would wait on).
        let reaped = Date().addingTimeInterval(10)
        while children().contains(rose) && Date() < reaped { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!children().contains(rose), "the riser \(rose) did not speak the utterance: it is still waiting")
        #expect(again.count == spoken.count)
        let largest = zip(spoken, again).map { abs(Int($0) - Int($1)) }.max() ?? 0
        #expect(largest <= 2, "the threaded sessions' samples differ from the spare's by up to \(largest)")
        await engine.shutDown()
    }

    /// The engine host keeps four Piper voices loaded, letting the oldest go for a fifth: a voice
    /// it let go is loaded there again when it is spoken with, not by each child that speaks.
    @Test func aVoiceTheHostLetGoIsLoadedThereAgain() async throws {
        let dir = try makeTemporaryDirectory()
        let names = (1...5).map { "en_US-joe\($0)-medium" }
        defer { PiperFixture.removeAlteredVoice(dir) }  // and the prepared copies, named after each
        for name in names {
            try FileManager.default.createSymbolicLink(atPath: dir.path + "/" + name + ".onnx", withDestinationPath: PiperFixture.model)
            try FileManager.default.createSymbolicLink(atPath: dir.path + "/" + name + ".onnx.json", withDestinationPath: PiperFixture.model + ".json")
        }
        let catalog = try VoiceCatalog.default().adding(piperVoicesAt: [dir.path])
        func speak(_ voices: [String], with engine: SynthesisEngine) async throws {
            let synth = SpeechSynthesizer(catalog: catalog, engine: engine)
            for name in voices {
                var u = Utterance(string: "Hello.", language: "en")
                u.voice = try catalog.voice(identifier: "piper." + name)
                let (samples, _) = try await render(u, with: synth)
                #expect(samples.count > 0)
            }
        }
        // Once, so that each has its prepared copy, which a host then maps under the voice's name.
        let preparing = SynthesisEngine()
        try await speak(names, with: preparing)
        await preparing.shutDown()
        let engine = SynthesisEngine()
        try await speak(names + [names[0]], with: engine)
        let host = try #require(await engine.hostProcessID())
        let maps = (try? String(contentsOfFile: "/proc/\(host)/maps", encoding: .utf8)) ?? ""
        let loaded = names.map { maps.contains($0 + "-") }
        #expect(loaded == [true, false, true, true, true], "the host's Piper voices: \(zip(names, loaded).filter(\.1).map(\.0))")
        await engine.shutDown()
    }

    @Test func enginesMixInOneTimeline() async throws {
        let text = "The revolutionary phone… Το επαναστατικό τηλέφωνο… هاتف ثوري"
        let (samples, timeline) = try await render(Utterance(string: text))
        #expect(timeline.segments.map(\.voice) == [PiperFixture.voice, "espeak-ng.el", "espeak-ng.ar"])
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
        for (a, b) in zip(timeline.segments, timeline.segments.dropFirst()) { #expect(a.endSample == b.startSample) }
        #expect(timeline.segments.last?.endSample == samples.count)
        #expect(timeline.words.filter { $0.segment == 0 }.map(\.word) == ["The", "revolutionary", "phone"])
    }

    /// A slice of the seeded property texts, with English (and English-looking text) spoken by
    /// joe and the rest by espeak-ng: the timeline rules hold across both.
    @Test func randomTextsKeepTheTimelineRules() async throws {
        var generator = TextCaseGenerator(seed: 20261126)
        for n in 0..<24 {
            let c = generator.next()
            guard
                let u = try?
                    (c.isSSML ? Utterance(ssml: c.text) : Utterance(string: c.text, language: c.language.flatMap(LanguageTag.init)))
            else { continue }
            // (Written without `catch ParlaError.emptyText`: with the typed throw, Swift 6.3.1's
            // SILGen crashes on that pattern here.)
            let timeline: SpeechTimeline
            do {
                timeline = try await synth.write(u) { _ in }
            } catch {
                if error == .emptyText { continue }
                throw error
            }
            let problem = timeline.invariantViolation(input: u.inputText)
            #expect(problem == nil, "case \(n): \(problem ?? "") in \(c)")
        }
    }

    @Test func aDamagedModelFailsOnlyItsUtterance() async throws {
        let dir = try PiperFixture.alteredVoice(named: "damaged", model: { $0.prefix(1 << 20) })
        defer { PiperFixture.removeAlteredVoice(dir) }
        let catalog = try VoiceCatalog.default().adding(piperVoicesIn: [dir])
        var u = Utterance(string: "Hello there.", language: "en")
        u.voice = try catalog.voice(identifier: "piper.damaged")
        let error = await #expect(throws: ParlaError.self) { try await render(u, with: SpeechSynthesizer(catalog: catalog, engine: Self.engine)) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("damaged"), "\(String(describing: error))")
        // Its own kind of failure, naming the voice: not the engine's, nor a missing runtime.
        #expect(error?.code == .voiceUnavailable && error?.subject == "piper.damaged", "\(String(describing: error))")
        // The next utterance speaks.
        let (samples, _) = try await render(try joe("Still here."))
        #expect(samples.count > 10000)
    }

    @Test func aConfigThatIsNotTheModelsSaysSo() async throws {
        // Ids beyond the model's table of phonemes.
        let dir = try PiperFixture.alteredVoice(
            named: "mismatch",
            config: { $0.replacingOccurrences(of: "\"phoneme_id_map\": {", with: "\"phoneme_id_map\": {\"ə\": [900], \"ɐ\": [901],") })
        defer { PiperFixture.removeAlteredVoice(dir) }
        let catalog = try VoiceCatalog.default().adding(piperVoicesIn: [dir])
        var u = Utterance(string: "Hello there, a test.", language: "en")
        u.voice = try catalog.voice(identifier: "piper.mismatch")
        let error = await #expect(throws: ParlaError.self) { try await render(u, with: SpeechSynthesizer(catalog: catalog, engine: Self.engine)) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("may not belong to its model"), "\(String(describing: error))")
    }

    /// A phoneme the voice has no id for is left out, as Piper does (voices learn espeak-ng
    /// 1.52's phonemes; 1.51 gives a few others): the sentence is spoken, its words timed.
    @Test func aPhonemeTheVoiceLacksIsLeftOut() async throws {
        // "ə" becomes a phoneme espeak-ng never gives (☃), so the voice has no id for ə.
        let dir = try PiperFixture.alteredVoice(named: "noschwa", config: { $0.replacingOccurrences(of: "\"ə\":", with: "\"☃\":") })
        defer { PiperFixture.removeAlteredVoice(dir) }
        let catalog = try VoiceCatalog.default().adding(piperVoicesIn: [dir])
        let text = "Hello there, this is a test of the other sound."
        var u = Utterance(string: text, language: "en")
        u.voice = try catalog.voice(identifier: "piper.noschwa")
        let (samples, timeline) = try await render(u, with: SpeechSynthesizer(catalog: catalog, engine: Self.engine))
        let (full, fullTimeline) = try await render(joe(text))
        #expect(samples.count > 22050 / 2)
        #expect(samples != full)  // the schwas are gone
        #expect(timeline.words.map(\.word) == ["Hello", "there", "this", "is", "a", "test", "of", "the", "other", "sound"])
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
        // Timed as the whole voice times them (espeak-ng joins "of the" into one word, whose
        // second half is estimated either way).
        #expect(timeline.words.map(\.isEstimated) == fullTimeline.words.map(\.isEstimated))
    }

    /// A voice whose map lacks most of espeak-ng's phonemes is not for them: the utterance
    /// fails and says so, instead of speaking a few sounds.
    @Test func aVoiceWithoutEspeakPhonemesFails() async throws {
        let lost = ["ə", "ɪ", "ɛ", "æ", "ʌ", "i", "o", "a", "e", "l", "h", "ð", "s", "t", "n", "ɹ", "ˈ"]
        let dir = try PiperFixture.alteredVoice(
            named: "otherphonemes",
            config: { config in
                var c = config
                for (k, p) in lost.enumerated() {
                    let stand = String(Character(Unicode.Scalar(0x2600 + UInt32(k)) ?? "☃"))
                    c = c.replacingOccurrences(of: "\"\(p)\":", with: "\"\(stand)\":")
                }
                return c
            })
        defer { PiperFixture.removeAlteredVoice(dir) }
        let catalog = try VoiceCatalog.default().adding(piperVoicesIn: [dir])
        var u = Utterance(string: "Hello there, this is a test.", language: "en")
        u.voice = try catalog.voice(identifier: "piper.otherphonemes")
        let error = await #expect(throws: ParlaError.self) { try await render(u, with: SpeechSynthesizer(catalog: catalog, engine: Self.engine)) }
        let message = "\(error.map { "\($0)" } ?? "")"
        #expect(message.contains("phonemes espeak-ng gave") && message.contains("not for espeak-ng's IPA phonemes"), "\(message)")
    }

    @Test func aModelWithoutDurationsIsEstimatedNotWrong() async throws {
        // The Ceil node's op type becomes Relu (the same length, and near it the same values):
        // the model still speaks, but Parla cannot read its durations.
        let dir = try PiperFixture.alteredVoice(
            named: "noceil",
            model: { data in
                var bytes = [UInt8](data)
                let needle: [UInt8] = [0x22, 0x04] + Array("Ceil".utf8)
                var i = 0
                while i + needle.count <= bytes.count {
                    if bytes[i] == needle[0], Array(bytes[i..<(i + needle.count)]) == needle {
                        bytes.replaceSubrange((i + 2)..<(i + 6), with: Array("Relu".utf8))
                    }
                    i += 1
                }
                return Data(bytes)
            })
        defer { PiperFixture.removeAlteredVoice(dir) }
        let catalog = try VoiceCatalog.default().adding(piperVoicesIn: [dir])
        let text = "Hello world, without durations."
        var u = Utterance(string: text, language: "en")
        u.voice = try catalog.voice(identifier: "piper.noceil")
        let (samples, timeline) = try await render(u, with: SpeechSynthesizer(catalog: catalog, engine: Self.engine))
        #expect(samples.count > 10000)
        #expect(timeline.words.map(\.word) == ["Hello", "world", "without", "durations"])
        #expect(timeline.words.allSatisfy { $0.isEstimated })
        #expect(timeline.invariantViolation(input: text) == nil)
    }

    /// A voice at another rate than espeak-ng's is resampled: one stream, one timeline, and the
    /// words where the resampled audio puts them. (joe's config says 16,000 Hz here: the
    /// samples are then read at the wrong rate, which is enough to exercise the path.)
    @Test func aVoiceAtAnotherRateJoinsTheTimeline() async throws {
        let dir = try PiperFixture.alteredVoice(
            named: "sixteen", config: { $0.replacingOccurrences(of: "\"sample_rate\": 22050", with: "\"sample_rate\": 16000") })
        defer { PiperFixture.removeAlteredVoice(dir) }
        let catalog = try VoiceCatalog.default().adding(piperVoicesIn: [dir]).preferring(["en": "piper.sixteen"])
        #expect(try catalog.voice(identifier: "piper.sixteen").sampleRate == 16000)
        let text = "Hello world. Καλημέρα κόσμε."
        let (samples, timeline) = try await render(Utterance(string: text), with: SpeechSynthesizer(catalog: catalog, engine: Self.engine))
        #expect(timeline.sampleRate == 22050)
        #expect(timeline.segments.map(\.voice) == ["piper.sixteen", "espeak-ng.el"])
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
        #expect(samples.count == timeline.sampleCount)
        let hello = try await render(try joe("Hello world."))
        // 22,050 / 16,000 times as many samples as joe's own (the noise is the same: one seed).
        let english = timeline.segments[0].endSample - timeline.segments[0].startSample
        let ratio: Double = Double(english) / Double(hello.samples.count)
        let expected: Double = 22050.0 / 16000.0
        #expect(abs(ratio - expected) < 0.1, "\(english) vs \(hello.samples.count)")
    }

    @Test func ssmlVoiceNamesAndPreferencesChooseTheVoice() async throws {
        let ssml = "<speak><voice name=\"espeak-ng.en-us\">Robot.</voice> <voice name=\"\(PiperFixture.voice)\">Natural.</voice></speak>"
        let (_, timeline) = try await render(try Utterance(ssml: ssml))
        #expect(timeline.segments.map(\.voice) == ["espeak-ng.en-us", PiperFixture.voice])
        let unknown = try Utterance(ssml: "<speak><voice name=\"piper.nobody\">Who?</voice></speak>")
        await #expect(throws: ParlaError.unknownVoice("piper.nobody")) { try await render(unknown) }
        // A preference by language, on the utterance and on the catalog.
        var u = Utterance(string: "Preferred, not default.")
        u.preferredVoices = ["en": try catalog.voice(identifier: "espeak-ng.en-gb-x-rp")]
        #expect(try await render(u).timeline.segments.map(\.voice) == ["espeak-ng.en-gb-x-rp"])
        let preferring = SpeechSynthesizer(catalog: try catalog.preferring(["en": "espeak-ng.en-us"]))
        #expect(try await render(Utterance(string: "Robot again."), with: preferring).timeline.segments.map(\.voice) == ["espeak-ng.en-us"])
    }

    @Test func spelledOutSpansInAPiperVoiceAreSpelledByEspeak() async throws {
        var text = AttributedString("Call ")
        var letters = AttributedString("ABC")
        letters.speechSpellOut = true
        text.append(letters)
        text.append(AttributedString(" now."))
        var u = Utterance(text)
        u.language = "en"
        let (_, timeline) = try await render(u)
        #expect(timeline.segments.map(\.voice) == [PiperFixture.voice, "espeak-ng.en-us", PiperFixture.voice])
        #expect(timeline.invariantViolation(input: u.inputText) == nil)
    }
}
