import ParlaAudioTestSupport
import ParlaESpeak
import ParlaPulseAudio
import Testing

@testable import Parla

extension LiveSpeechTests {
    /// `warmUp(audioOutput:)` connects before any synthesizer exists; the first synthesizer
    /// made with the same options adopts that connection and speaks through it, and only the
    /// first: the next one makes its own, as does one with other options.
    @Test(arguments: SoundServer.allCases)
    func aWarmedUpConnectionIsAdoptedOnceAndPlays(_ kind: SoundServer) async throws {
        let server = try await TestAudioServer.start(kind)
        let options = AudioOutputOptions(device: server.sink, server: server.server, serverTimeout: .seconds(3))
        SpeechSynthesizer.warmUp(audioOutput: options)
        SpeechSynthesizer.warmUp(audioOutput: options)  // a second call changes nothing

        let other = SpeechSynthesizer(audioOutput: AudioOutputOptions(device: "elsewhere"), engine: ESpeakEngine())
        #expect(other.givenOutput == nil)
        let synth = SpeechSynthesizer(audioOutput: options, engine: ESpeakEngine())
        let adopted = try #require(synth.givenOutput)
        #expect(adopted.options == options)
        #expect(SpeechSynthesizer(audioOutput: options, engine: ESpeakEngine()).givenOutput == nil)

        let end = await synth.speakAndWait(Utterance(string: "Warmed up."))
        guard case .finished = end.kind else { Issue.record("ended with \(end.kind)"); return }
        #expect(synth.live.output as? PulseAudioOutput === adopted)
        #expect(server.recorder.loudSampleTimes().count > 5000)
    }
}
