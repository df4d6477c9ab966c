import Foundation
import Testing
import Parla
import ParlaAudioTestSupport
import ParlaEngine
import ParlaTesting

/// Rates and pitch as screen-reader users set them, for the natural voice (joe) and espeak-ng:
/// the audio at R words a minute is R / 175 times as fast as at 175 (first sound to last,
/// pauses included), words stay on their sounds through the time-stretch, and the pitch moves
/// by the interval asked.
@Suite("Rates and pitch", .serialized)
struct PiperProsodyTests {
    let catalog: VoiceCatalog
    let synth: SpeechSynthesizer

    init() throws {
        if let missing = PiperFixture.missing { Issue.record(Comment(rawValue: missing)) }
        catalog = try VoiceCatalog.default().adding(piperVoicesAt: [PiperFixture.voiceDirectory])
        synth = SpeechSynthesizer(catalog: catalog, engine: Self.engine)
    }

    static let engine = SynthesisEngine()

    static let passage = "The quick brown fox jumps over the lazy dog, and then it runs into the forest. Nobody saw it again until spring."

    func render(_ text: String, voice: String, rate: Double? = nil, pitch: Double = 1) async throws -> (samples: [Int16], timeline: SpeechTimeline) {
        var u = Utterance(string: text, language: "en")
        u.voice = try catalog.voice(identifier: voice)
        u.wordsPerMinute = rate
        u.pitch = pitch
        let audio = AudioCollector()
        let timeline = try await synth.write(u) { event in
            if case .audio(let b) = event { audio.append(b) }
        }
        return (audio.samples, timeline)
    }

    func seconds(_ samples: [Int16]) throws -> Double {
        let span = try #require(SpeechMeasures.soundingSpan(samples))
        return Double(span.count) / 22050
    }

    /// Each rate's speed-up over 175 is the one asked, within 5 %, for both engines: joe's
    /// length_scale gives up to 1.5 times its speed and the time-stretch the rest (and
    /// corrects the model's shortfall); espeak-ng uses its own Sonic path past 450.
    @Test(arguments: [PiperFixture.voice, "espeak-ng.en-us"])
    func eachRateIsAsFastAsAsked(voice: String) async throws {
        let normal = try seconds(try await render(Self.passage, voice: voice, rate: 175).samples)
        var report: [String] = []
        var wrong: [String] = []
        for rate in [80.0, 300, 450, 800, 1000] {
            let (samples, timeline) = try await render(Self.passage, voice: voice, rate: rate)
            let speedUp = normal / (try seconds(samples))
            let ratio = speedUp / (rate / 175)
            report.append("\(Int(rate)): \(String(format: "%.3f", ratio))")
            if abs(ratio - 1) > 0.05 { wrong.append("\(Int(rate))") }
            #expect(timeline.invariantViolation(input: Self.passage) == nil, "\(timeline.invariantViolation(input: Self.passage) ?? "")")
            #expect(timeline.words.count == 22)
        }
        #expect(wrong.isEmpty, "speed-up ÷ asked, \(voice), at: \(report.joined(separator: ", "))")
    }

    /// At 800 words a minute (joe's model at 1.5 times its speed, stretched 3 times more) each
    /// word that follows a pause starts within 25 ms of its sound.
    @Test func wordsAt800StartOnTheirSounds() async throws {
        let text = "One, two, three, four, five, six, seven, eight, nine, ten."
        let (samples, timeline) = try await render(text, voice: PiperFixture.voice, rate: 800)
        #expect(timeline.words.count == 10)
        #expect(timeline.invariantViolation(input: text) == nil, "\(timeline.invariantViolation(input: text) ?? "")")
        // Each word follows a comma's pause: a sound starts near it. (A stop inside a word,
        // the k of "six", starts a sound too: the words are matched to the sounds, not back.)
        let onsets = SpeechMeasures.onsets(samples, block: 55, quiet: 220)
        var offsets: [Double] = []
        for word in timeline.words {
            let nearest = onsets.map { word.startSample - $0 }.min { abs($0) < abs($1) } ?? .max
            offsets.append(Double(nearest) / 22.05)
        }
        let far = offsets.filter { abs($0) > 25 }
        #expect(far.isEmpty, "word start − nearest onset, ms: \(offsets.map { String(format: "%.1f", $0) }); onsets \(onsets)")
    }

    /// Pitch 25 and 75 (multipliers 0.5 and 1.5 of 50) move joe's median F0 by half an octave
    /// down and up, as espeak-ng's base pitch moves, within a semitone; the length stays.
    @Test func pitchMovesJoesVoiceByTheIntervalAsked() async throws {
        let text = "Pitch moves the whole voice up or down, and the words keep their length."
        let base = try await render(text, voice: PiperFixture.voice)
        let f0 = try #require(SpeechMeasures.medianPitch(base.samples))
        for (multiplier, semitones) in [(0.5, -6.0), (1.5, 6.0)] {
            let moved = try await render(text, voice: PiperFixture.voice, pitch: multiplier)
            let f = try #require(SpeechMeasures.medianPitch(moved.samples))
            let interval = 12 * log2(f / f0)
            #expect(abs(interval - semitones) <= 1, "pitch ×\(multiplier): \(f) Hz against \(f0) Hz, \(interval) semitones")
            let lengths = (try seconds(moved.samples), try seconds(base.samples))
            #expect(abs(lengths.0 / lengths.1 - 1) < 0.05, "\(lengths)")
        }
    }
}
