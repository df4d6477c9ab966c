import Foundation
import Parla
import ParlaAudioTestSupport
import ParlaESpeak
import ParlaIO
import Testing

extension LiveSpeechTests {
    /// joe, live, through a private PulseAudio: pause at once, continue from the same word, a
    /// live rate change, and stop. (scripts/test runs the Piper live tests alone: beside the
    /// other live tests, the model on one core can fall behind the stream.)
    @Test func aPiperVoicePausesContinuesChangesRateAndStops() async throws {
        if let missing = PiperFixture.missing { Issue.record(Comment(rawValue: missing)) }
        let server = try await TestAudioServer.start()
        let catalog = try VoiceCatalog.default().adding(piperVoicesIn: [PiperFixture.voiceDirectory])
        let synth = SpeechSynthesizer(
            catalog: catalog, audioOutput: AudioOutputOptions(device: server.sink, server: server.server), engine: ESpeakEngine())
        try await synth.prepareToSpeak()
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
        try synth.setRate(1.5)
        let before = log.words(id).count
        #expect(await log.wait { log.words(id).count >= before + 3 })
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
