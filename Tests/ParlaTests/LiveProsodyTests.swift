import Foundation
import Parla
import ParlaAudioTestSupport
import ParlaCore
import ParlaEngine
import Testing

/// Live rate, pitch and volume, through a private sound server: a change applies to the speech
/// now playing, from the first word not yet at the server, with every word reported once, in
/// order, at its original offsets.
extension LiveSpeechTests {
    static let longReading =
        "The first sentence is here and it goes on for a while. The second sentence has seven words in it. The third one ends it all, slowly and calmly."

    /// Mean length in samples of the words `words` (from each start to the next).
    func meanWordLength(_ words: [SpokenRange]) -> Double {
        guard words.count > 1 else { return 0 }
        return Double(words[words.count - 1].audioSample - words[0].audioSample) / Double(words.count - 1)
    }

    /// A synthesizer whose synthesis runs at most `ahead` in front of the listener (nil: the
    /// default, 30 s, so the whole text is made before the change).
    func prosodySynth(_ server: TestAudioServer, ahead: Duration?) -> SpeechSynthesizer {
        SpeechSynthesizer(
            audioOutput: AudioOutputOptions(
                device: server.sink, server: server.server, maxBufferedAhead: ahead ?? .seconds(30)),
            engine: SynthesisEngine())
    }

    @Test(arguments: [(SoundServer.pulseaudio, false), (.pulseaudio, true), (.pipewire, false), (.pipewire, true)])
    func aRateChangeAppliesToTheSpeechNowPlayingWithEveryWordOnce(_ kind: SoundServer, whileSynthesizing: Bool) async throws {
        let server = try await TestAudioServer.start(kind)
        // With 0.1 s ahead (rounded up to 1 s of audio), the engine is still at work when the
        // change comes; with the default, it has finished and the change cuts what it made.
        let synth = prosodySynth(server, ahead: whileSynthesizing ? .milliseconds(100) : nil)
        let log = EventLog(synth)
        let u = Utterance(string: Self.longReading)
        let id = synth.speak(u)
        #expect(await log.wait(timeout: 30) { log.words(id).count >= 4 })
        let heardBefore = log.words(id).count
        try synth.setRate(2)
        #expect(synth.liveProsody.rate == 2)
        #expect(await log.wait(timeout: 30) { log.terminal(id) != nil })
        guard case .finished = log.terminal(id)?.kind else { Issue.record("it did not finish: \(log.of(id).map(\.kind.name))"); return }

        // Every word once, in order, at the offsets of the whole text rendered at one rate.
        let reference = try await synth.write(u) { _ in }
        let words = log.words(id)
        let ctx = "\(kind), whileSynthesizing \(whileSynthesizing): \(log.of(id).map(\.kind.name))"
        #expect(words.map(\.scalarRange) == reference.words.map(\.range), "\(ctx)")
        // Sentences too: each reported once, starting where the reference's do.
        let sentences = log.of(id).compactMap { if case .willSpeakSentence(let r) = $0.kind { return r.scalarRange } else { return nil } }
        #expect(sentences.map(\.lowerBound) == reference.sentences.map(\.range.lowerBound), "\(sentences)")

        // One change, which took effect at a word after those heard when it was asked for.
        let change = try #require(synth.recentProsodyChanges.last { $0.utterance == id })
        let first = try #require(words.firstIndex { $0.scalarRange == change.word })
        #expect(first >= heardBefore - 1, "change at word \(first), \(heardBefore) heard when asked; \(ctx)")
        #expect(change.latencyMilliseconds > 0 && change.latencyMilliseconds < 2000, "\(change.latencyMilliseconds) ms; \(ctx)")
        #expect(words[first].audioSample == change.sample, "\(ctx)")
        // Faster from there: words after the change are much shorter than before it.
        let before = meanWordLength(Array(words[..<first])), after = meanWordLength(Array(words[first...]))
        #expect(after < 0.75 * before, "mean word length \(before) samples before word \(first), \(after) after; \(ctx)")
        // And it was heard: audio arrived after the new rate's first word was due.
        let due = try #require(
            log.of(id).first { if case .willSpeakWord(let r) = $0.kind { return r.scalarRange == change.word } else { return false } })
        let loudAfter = server.recorder.loudSampleTimes(after: due.time.nanoseconds).count
        #expect(loudAfter > 2000, "\(loudAfter) loud samples after word \(first) was due; \(ctx)")
    }

    /// Live synthesis far ahead of the listener stops and frees the engine, so a file render
    /// on the same engine (another synthesizer) is not held up until the live speech has been
    /// synthesized to its end.
    @Test func liveSpeechFarAheadDoesNotHoldUpAFileRenderOnTheSameEngine() async throws {
        let server = try await TestAudioServer.start()
        let engine = SynthesisEngine()
        let live = SpeechSynthesizer(
            audioOutput: AudioOutputOptions(device: server.sink, server: server.server, maxBufferedAhead: .milliseconds(100)),
            engine: engine)
        let log = EventLog(live)
        let text = Array(repeating: Self.longReading, count: 3).joined(separator: " ")
        let id = live.speak(Utterance(string: text))
        #expect(await log.wait(timeout: 30) { log.words(id).count >= 2 })
        let renderer = SpeechSynthesizer(engine: engine)
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let timeline = try await renderer.write(Utterance(string: "Rendered meanwhile."), to: dir.appendingPathComponent("r.wav"))
        let heard = log.words(id).count
        let total = text.split(separator: " ").count
        #expect(timeline.words.count == 2)
        // 26 s of speech, 1 s of it ahead: had the render waited for the live synthesis to end,
        // the listener would be 25 s in by now.
        #expect(heard < total / 4, "\(heard) of \(total) words heard when the render ended")
        #expect(log.terminal(id) == nil)
        live.stop(at: .immediate)
        #expect(await log.wait(timeout: 10) { log.terminal(id) != nil })
    }

    @Test(arguments: SoundServer.allCases)
    func volumeAppliesAtOnceAndRatePitchAndVolumeStayInRange(_ kind: SoundServer) async throws {
        let server = try await TestAudioServer.start(kind)
        let synth = liveSynth(server)
        #expect(throws: ParlaError.self) { try synth.setRate(0) }
        #expect(throws: ParlaError.self) { try synth.setRate(.nan) }
        #expect(throws: ParlaError.self) { try synth.setPitch(3) }
        #expect(throws: ParlaError.self) { try synth.setVolume(2.5) }
        #expect(synth.liveProsody == LiveProsody())

        let log = EventLog(synth)
        let id = synth.speak(Self.longReading)
        #expect(await log.wait(timeout: 30) { log.words(id).count >= 3 })
        let loudAt = monotonicNanoseconds()
        try await Task.sleep(for: .milliseconds(700))
        let changedAt = monotonicNanoseconds()
        try synth.setVolume(0.25)
        try await Task.sleep(for: .milliseconds(900))
        let endAt = monotonicNanoseconds()
        // Louder than the utterance: twice, through the limiter.
        try synth.setVolume(2)
        try await Task.sleep(for: .milliseconds(900))
        let loudestAt = monotonicNanoseconds()
        _ = synth.stop()
        // Peak level in the 0.7 s before the change and from 0.2 s after it: 0.25 is −12 dB.
        func peak(_ from: UInt64, _ to: UInt64) -> Double {
            let blocks = server.recorder.clockedBlocks().filter { $0.arrivalNanoseconds > from && $0.arrivalNanoseconds <= to }
            return Double(blocks.flatMap(\.samples).map { Int($0.magnitude) }.max() ?? 0)
        }
        let loud = peak(loudAt, changedAt), quiet = peak(changedAt + 200_000_000, endAt)
        #expect(loud > 3000)
        let dB = 20 * log10(max(quiet, 1) / max(loud, 1))
        #expect(dB < -8 && dB > -16, "level changed by \(dB) dB (peak \(loud) → \(quiet))")
        let louder = peak(endAt + 200_000_000, loudestAt)
        let up = 20 * log10(max(louder, 1) / max(loud, 1))
        #expect(up > 1, "volume 2 changed the level by \(up) dB (peak \(loud) → \(louder))")
        #expect(louder <= SampleGain.ceiling * 32768 + 1, "nothing at full scale: peak \(louder)")
    }
}
