import Parla
import ParlaTesting
import Testing

/// ParlaTesting's rig, as an app's tests use it: only the public API, exact events, no sound
/// server and no sleeping on a timer.
@Suite("SpeechTestRig", .timeLimit(.minutes(1)))
struct SpeechTestRigTests {
    /// The README's example.
    @Test func anAppsSpeechIsHeardWordByWord() async throws {
        let rig = try SpeechTestRig()
        rig.synthesizer.speak("Battery low.")
        await rig.listenUntilIdle()
        #expect(rig.heardWords == ["Battery", "low"])
        #expect(rig.events.map(\.kind.name) == ["started", "sentence", "word", "word", "finished"])
    }

    @Test func eachWordIsHeardAtItsSample() async throws {
        let rig = try SpeechTestRig()
        let id = rig.synthesizer.speak("one two three")
        await rig.listen(for: .milliseconds(1))
        #expect(rig.heardWords == ["one"])
        let started = try #require(rig.events.first { $0.kind == .started }?.time)
        await rig.listen(for: .milliseconds(118))
        #expect(rig.heardWords == ["one"], "the first word lasts 120 samples")
        await rig.listen(for: .milliseconds(1))
        #expect(rig.heardWords == ["one", "two"])
        let two = try #require(rig.events.last)
        #expect(two.utterance == id && two.time - started == .milliseconds(119))
        await rig.listenUntilIdle()
        #expect(rig.heardWords == ["one", "two", "three"])
        #expect(rig.events.last?.kind == .finished && rig.sink.streamCount == 1)
    }

    @Test func anAnnouncementInterruptsAndThenTheQueueGoesOn() async throws {
        let rig = try SpeechTestRig()
        let long = rig.synthesizer.speak("one two three four five six")
        let next = rig.synthesizer.speak("seven")
        await rig.listen(for: .milliseconds(250))
        #expect(rig.heardWords == ["one", "two", "three"])
        let alert = rig.synthesizer.beginAnnouncement(Utterance(string: "Battery low"))
        await rig.listenUntilIdle()
        #expect(rig.heardWords == ["one", "two", "three", "Battery", "low", "seven"])
        let ends = rig.events.filter(\.kind.isTerminal).map { ($0.utterance, $0.kind) }
        #expect(ends.map(\.0) == [long, alert, next])
        #expect(ends.map(\.1) == [.cancelled(.interrupted), .finished, .finished])
        #expect(rig.events.first { $0.utterance == alert && $0.kind.isTerminal }?.announcement?.wasSuccessful == true)
    }

    @Test func pausedSpeechIsNotHeardUntilItContinues() async throws {
        let rig = try SpeechTestRig()
        rig.synthesizer.speak("one two three")
        await rig.listen(for: .milliseconds(130))
        #expect(rig.synthesizer.pause(at: .word))
        await rig.listen(for: .milliseconds(500))
        #expect(rig.heardWords == ["one", "two"] && rig.synthesizer.isPaused)
        #expect(rig.synthesizer.continue())
        await rig.listenUntilIdle()
        #expect(rig.heardWords == ["one", "two", "three"])
        #expect(rig.events.map(\.kind.name).contains("paused") && rig.events.map(\.kind.name).contains("continued"))
    }

    @Test func aServerThatRefusesTheStreamFailsTheUtterance() async throws {
        let rig = try SpeechTestRig()
        rig.sink.failNextOpen(.audioFailure("No such entity"))
        let id = rig.synthesizer.speak("unheard")
        await rig.listenUntilIdle()
        let end = try #require(rig.events.last)
        #expect(end.utterance == id && end.kind == .failed(.audioFailure("No such entity")))
        #expect(rig.heardWords.isEmpty)
    }
}
