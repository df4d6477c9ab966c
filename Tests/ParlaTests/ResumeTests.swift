import Foundation
import Parla
import ParlaAudioTestSupport
import Testing

/// The reading and the helpers that the resume tests here and Piper's in PiperLiveTests.swift share.
protocol ResumeReading {}

extension ResumeReading {
    /// Long enough after the second sentence (about 5 s) that an announcement made when its
    /// "has" is heard still finds it speaking on a loaded machine: once, with only one short
    /// sentence after it, the reading ended before the test's announcement was made.
    static var reading: String {
        "The first sentence is here. The second sentence has seven words. The third one is short. The fourth one gives the listener time. The fifth one ends it all."
    }

    /// Scalar offset of `needle` in `text`.
    func scalarOffset(of needle: String, in text: String) -> Int {
        text.unicodeScalars.count - text[text.range(of: needle)!.lowerBound...].unicodeScalars.count
    }

    func resumed(_ log: EventLog, _ id: UtteranceID) -> [SpokenRange] {
        log.of(id).compactMap { if case .resumed(let r) = $0.kind { return r } else { return nil } }
    }
}

extension LiveSpeechTests: ResumeReading {}

/// Resume after interruption, through a private sound server: an interrupting announcement
/// suspends a resumable utterance, which carries on after it from the sentence (or word) that
/// was being heard, with its original offsets. Serial, in ``LiveRecoveryTests``: run in
/// parallel with one another and with the rest of the test load, a queued utterance once
/// failed to finish.
extension LiveRecoveryTests: ResumeReading {
    @Test(arguments: SoundServer.allCases)
    func announcementSuspendsAndTheReadingCarriesOnFromItsSentence(_ kind: SoundServer) async throws {
        let server = try await TestAudioServer.start(kind)
        let synth = liveSynth(server)
        let log = EventLog(synth)
        var u = Utterance(string: Self.reading)
        u.resumesAfterInterruption = true
        let id = synth.speak(u)
        let later = synth.speak("Then this.")
        #expect(await log.wait { log.words(id).contains { $0.text == "has" } })
        let result = await synth.announce("New message from Ana")
        #expect(result.wasSuccessful)
        #expect(await log.wait(timeout: 30) { log.terminal(later) != nil })
        guard case .finished = log.terminal(id)?.kind else { Issue.record("the reading did not finish: \(log.of(id).map(\.kind.name))"); return }
        guard case .finished = log.terminal(later)?.kind else { Issue.record("queued speech did not finish: \(String(describing: log.terminal(later)?.kind)); \(log.events.map { "\($0.utterance):\($0.kind.name)" })"); return }

        // One resume, from the start of the sentence that was being heard when the
        // announcement came (on a loaded machine the test may make it a sentence or two after
        // "has": the last word heard before the announcement's first event says which).
        let r = resumed(log, id)
        #expect(r.count == 1)
        let announcementStart = try #require(log.events.firstIndex { $0.utterance != id && $0.utterance != later })
        let lastHeard = try #require(
            log.events[..<announcementStart].last { e in
                if case .willSpeakWord = e.kind { return e.utterance == id } else { return false }
            })
        guard case .willSpeakWord(let heard) = lastHeard.kind else { return }
        let sentenceStarts = ["The first", "The second", "The third", "The fourth", "The fifth"].map { scalarOffset(of: $0, in: Self.reading) }
        let second = try #require(sentenceStarts.last { $0 <= heard.scalarRange.lowerBound })
        #expect(heard.scalarRange.lowerBound >= sentenceStarts[1])
        #expect(r.first?.scalarRange.lowerBound == second, "resumed from \(String(describing: r.first)), last heard \(heard)")
        #expect(r.first?.text == "The")

        // Every word after the resume point, once and in order, in the original offsets:
        // exactly the words of the whole reading from that point on.
        let reference = try await synth.write(u) { _ in }.words.map(\.range).filter { $0.lowerBound >= second }
        let names = log.of(id).map(\.kind.name)
        let resumeIndex = try #require(names.firstIndex(of: "resumed"))
        let after = log.of(id)[resumeIndex...].compactMap { e -> Range<Int>? in
            if case .willSpeakWord(let w) = e.kind { return w.scalarRange } else { return nil }
        }
        #expect(after == reference)
        #expect(names.filter { $0 == "started" }.count == 1 && names.first == "started")

        // Order: the announcement plays between the suspension and the resume, "Then this." after.
        let announcementEnd = try #require(log.events.first { $0.announcement != nil })
        let resumedAt = log.of(id)[resumeIndex].time
        #expect(announcementEnd.time <= resumedAt)
        #expect((log.of(later).first?.time.nanoseconds ?? 0) >= (log.terminal(id)?.time.nanoseconds ?? .max))
        // And the resumed audio was heard.
        #expect(server.recorder.loudSampleTimes(after: resumedAt.nanoseconds).count > 5000)
    }

    @Test func resumePointCanBeTheWordAndTheAttributeTurnsItOn() async throws {
        let server = try await TestAudioServer.start()
        let synth = liveSynth(server)
        let log = EventLog(synth)
        var text = AttributedString(Self.reading)
        text.speechResumesAfterInterruption = true
        var u = Utterance(text)
        u.resumePoint = .word
        let id = synth.speak(u)
        #expect(await log.wait { log.words(id).contains { $0.text == "seven" } })
        let result = await synth.announce("New message")
        #expect(result.wasSuccessful)
        #expect(await log.wait(timeout: 30) { log.terminal(id) != nil })
        guard case .finished = log.terminal(id)?.kind else { Issue.record("the reading did not finish"); return }
        let events = log.of(id)
        let resumeIndex = try #require(events.firstIndex { $0.kind.name == "resumed" })
        // It resumes with the word that was being heard when the announcement began.
        let before = events[..<resumeIndex].compactMap { if case .willSpeakWord(let w) = $0.kind { return w } else { return nil } }
        let r = try #require(resumed(log, id).first)
        #expect(r.scalarRange == before.last?.scalarRange, "resumed at \(r.text), last heard \(before.last?.text ?? "-")")
        let after = events[resumeIndex...].compactMap { if case .willSpeakWord(let w) = $0.kind { return w } else { return nil } }
        #expect(after.first?.scalarRange == r.scalarRange)
    }

    /// stop() and a queued announcement end or wait as always; two announcements in a row give
    /// one resume, after the second.
    @Test func onlyAnInterruptingAnnouncementSuspendsAndOnlyOnce() async throws {
        let server = try await TestAudioServer.start()
        let synth = liveSynth(server)
        let log = EventLog(synth)
        var u = Utterance(string: "Short reading here. It has two sentences.")
        u.resumesAfterInterruption = true

        // A queued announcement waits for the end.
        let a = synth.speak(u)
        #expect(await log.wait { log.words(a).count >= 2 })
        var queued = AttributedString("Queued")
        queued.speechQueueAnnouncement = true
        #expect(await synth.announce(queued).wasSuccessful)
        guard case .finished = log.terminal(a)?.kind else { Issue.record("queued announcement cut the reading off"); return }
        #expect(resumed(log, a).isEmpty)

        // stop() ends it.
        let b = synth.speak(u)
        #expect(await log.wait { log.words(b).count >= 2 })
        _ = synth.stop()
        #expect(await log.wait { log.terminal(b) != nil })
        #expect(isCancelled(log.terminal(b), .interrupted))
        #expect(resumed(log, b).isEmpty)

        // Two interrupting announcements, the second cutting off the first: one resume.
        let c = synth.speak(u)
        #expect(await log.wait { log.words(c).count >= 2 })
        async let first = synth.announce("First announcement, which is cut off")
        #expect(await log.wait { log.events.contains { if case .willSpeakWord(let w) = $0.kind { w.text == "First" } else { false } } })
        let second = await synth.announce("Second")
        #expect(second.wasSuccessful)
        #expect(await first.wasSuccessful == false)
        #expect(await log.wait(timeout: 30) { log.terminal(c) != nil })
        guard case .finished = log.terminal(c)?.kind else { Issue.record("the reading did not finish"); return }
        #expect(resumed(log, c).count == 1)

        // A suspended reading that stop() drops was heard: it ends interrupted, not dropped.
        let d = synth.speak(u)
        #expect(await log.wait { log.words(d).count >= 2 })
        async let third = synth.announce("Third announcement, stopped")
        #expect(await log.wait { log.events.contains { if case .willSpeakWord(let w) = $0.kind { w.text == "Third" } else { false } } })
        _ = synth.stop()
        _ = await third
        #expect(await log.wait { log.terminal(d) != nil })
        #expect(isCancelled(log.terminal(d), .interrupted))
    }
}
