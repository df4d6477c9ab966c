import Foundation
import Parla
import ParlaAudioTestSupport
import ParlaEngine
import ParlaIO
import Testing

extension LiveSpeechTests {
    /// A private PulseAudio and a synthesizer whose English voice is joe, loaded.
    func piperSynth() async throws -> (TestAudioServer, VoiceCatalog, SpeechSynthesizer) {
        if let missing = PiperFixture.missing { Issue.record(Comment(rawValue: missing)) }
        let server = try await TestAudioServer.start()
        let catalog = try VoiceCatalog.default().adding(piperVoicesAt: [PiperFixture.voiceDirectory])
        let synth = SpeechSynthesizer(
            catalog: catalog, audioOutput: AudioOutputOptions(device: server.sink, server: server.server), engine: SynthesisEngine())
        try await synth.prepareToSpeak()
        return (server, catalog, synth)
    }

    /// SSML marks in joe's speech, live: each arrives just before the word after it, when that
    /// word is heard (the word is timed by the model, a chunk at a time), and one after the last
    /// word just before `finished`.
    @Test func aPiperVoicesMarksArriveWhenTheirWordIsHeard() async throws {
        let (server, _, synth) = try await piperSynth()
        defer { withExtendedLifetime(server) {} }
        let log = EventLog(synth)
        let ssml =
            #"<speak xml:lang="en"><voice name="piper.en_US-joe-medium"><mark name="w0"/>Hello <mark name="w1"/>big wide <mark name="w3"/>world.<mark name="end"/></voice></speak>"#
        let end = await synth.speakAndWait(try Utterance(ssml: ssml))
        guard case .finished = end.kind else { Issue.record("ended with \(end.kind)"); return }
        #expect(await log.wait { log.terminal(end.utterance) != nil })
        let sequence = log.marksAndWords(end.utterance)
        #expect(sequence == ["mark:w0", "Hello", "mark:w1", "big", "wide", "mark:w3", "world", "mark:end", "finished"], "\(sequence)")
        let events = log.of(end.utterance)
        let marks = events.compactMap { e -> (String, UInt64)? in if case .mark(let n) = e.kind { (n, e.time.nanoseconds) } else { nil } }
        let words = events.compactMap { e -> (String, UInt64)? in
            if case .willSpeakWord(let r) = e.kind { (r.text, e.time.nanoseconds) } else { nil }
        }
        for (mark, word) in [("w0", "Hello"), ("w1", "big"), ("w3", "world")] {
            let m = marks.first { $0.0 == mark }?.1 ?? 0, w = words.first { $0.0 == word }?.1 ?? .max
            #expect(w >= m && w - m < 5_000_000, "\(mark) at \(m), \(word) at \(w)")
        }
        #expect((marks.last?.1 ?? 0) > (words.last?.1 ?? .max) + 100_000_000)
    }

    /// joe, live, through a private PulseAudio: pause at once, continue from the same word, a
    /// live rate change, and stop. (scripts/test runs the Piper live tests alone: beside the
    /// other live tests, the model on one core can fall behind the stream.)
    @Test func aPiperVoicePausesContinuesChangesRateAndStops() async throws {
        let (server, _, synth) = try await piperSynth()
        let log = EventLog(synth)
        let id = synth.speak(Utterance(string: longText, language: "en"))
        #expect(await log.wait { log.words(id).count >= 3 })
        #expect(synth.pause())
        let paused = monotonicNanoseconds()
        try await Task.sleep(for: .milliseconds(600))
        let resumed = monotonicNanoseconds()
        #expect(synth.continue())
        #expect(
            await log.wait {
                let kinds = log.of(id).map(\.kind.name)
                guard let c = kinds.firstIndex(of: "continued") else { return false }
                return kinds[c...].filter { $0 == "word" }.count >= 2
            })
        // From 175 words a minute to 800, mid-sentence: the model at 1.5 times its speed and
        // the time-stretch the rest.
        let before = log.words(id).count
        try synth.setRate(800.0 / 175)
        #expect(await log.wait { log.words(id).count >= before + 5 })
        let change = try #require(synth.recentProsodyChanges.last { $0.utterance == id })
        let words = log.words(id)
        let first = try #require(words.firstIndex { $0.scalarRange == change.word })
        let slow = meanWordLength(Array(words[..<first])), fast = meanWordLength(Array(words[first...]))
        #expect(fast < 0.4 * slow, "mean word length \(slow) samples before word \(first), \(fast) after")
        synth.stop()
        #expect(await log.wait { log.terminal(id) != nil })
        #expect(isCancelled(log.terminal(id), .interrupted))
        let kinds = log.of(id).map(\.kind.name)
        if let p = kinds.firstIndex(of: "paused"), let c = kinds.firstIndex(of: "continued") {
            #expect(p < c && !kinds[p..<c].contains("word"))
        } else {
            Issue.record("no paused or continued event: \(kinds)")
        }
        // No word repeated or skipped, across the pause and the rate change.
        let expected = longText.split(whereSeparator: { $0 == " " || $0 == "." }).map(String.init)
        let heard = log.words(id).map(\.text)
        #expect(heard == Array(expected.prefix(heard.count)), "\(heard)")
        // The sink was silent while paused.
        let loud = server.recorder.loudSampleTimes()
        #expect(loud.filter { $0 > paused + silenceAfterStop && $0 < resumed }.count < silenceTolerance)
        #expect(loud.count > 5000)
    }
}

extension LiveSpeechTests {
    /// joe, live: a pause at a word waits for the word's end, and an interrupting announcement
    /// (joe too) suspends the reading, which then carries on from its sentence with the
    /// original offsets: every word after the resume point once and in order.
    @Test func aPiperVoicePausesAtAWordAndResumesAfterAnAnnouncement() async throws {
        let (server, catalog, synth) = try await piperSynth()
        #expect((try? catalog.voice(for: "en"))?.engine == SpeechVoice.piperEngine)
        let log = EventLog(synth)
        var u = Utterance(string: Self.reading, language: "en")
        u.resumesAfterInterruption = true
        let id = synth.speak(u)

        // Pause at a word: the word being heard ends, then nothing more until continue.
        #expect(await log.wait { log.words(id).count >= 2 })
        #expect(synth.pause(at: .word))
        #expect(await log.wait { log.of(id).contains { $0.kind.name == "paused" } })
        let count = log.words(id).count
        try await Task.sleep(for: .milliseconds(300))
        #expect(log.words(id).count == count)
        #expect(synth.continue())

        // An interrupting announcement, then the reading carries on from its sentence.
        #expect(await log.wait(timeout: 20) { log.words(id).contains { $0.text == "has" } })
        let result = await synth.announce("New message from Ana")
        #expect(result.wasSuccessful)
        #expect(await log.wait(timeout: 40) { log.terminal(id) != nil })
        guard case .finished = log.terminal(id)?.kind else {
            Issue.record("the reading did not finish: \(log.of(id).map(\.kind.name))")
            return
        }
        let r = resumed(log, id)
        #expect(r.count == 1)
        let sentenceStarts = ["The first", "The second", "The third", "The fourth", "The fifth"].map { scalarOffset(of: $0, in: Self.reading) }
        let start = try #require(r.first?.scalarRange.lowerBound)
        #expect(sentenceStarts.contains(start), "resumed at \(String(describing: r.first))")
        let reference = try await synth.write(u) { _ in }.words.map(\.range).filter { $0.lowerBound >= start }
        let events = log.of(id)
        let resumeIndex = try #require(events.firstIndex { $0.kind.name == "resumed" })
        let after = events[resumeIndex...].compactMap { e -> Range<Int>? in
            if case .willSpeakWord(let w) = e.kind { return w.scalarRange } else { return nil }
        }
        #expect(after == reference)
        #expect(server.recorder.loudSampleTimes(after: events[resumeIndex].time.nanoseconds).count > 5000)
    }
}
