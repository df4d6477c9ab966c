import FoundationEssentials
import Parla
import ParlaCommands
import ParlaTesting
#if canImport(Glibc)
    import Glibc
#endif

/// `parla-bench --prosody` (run through `scripts/bench-prosody`): live rate changes and volume,
/// at a null sink's monitor.
extension BenchLive {
    static let reading =
        "The first sentence is here and it goes on for a while. The second sentence has seven words in it. The third one ends it all, slowly and calmly."

    struct ProsodyFigures {
        /// Audio already buffered when the change was asked for (ms of audio).
        var latency: [Double] = []
        /// Word-event drift (event time against the word's audio at the monitor), before and
        /// after the change.
        var driftBefore: [Double] = []
        var driftAfter: [Double] = []
        /// Words reported twice or never, against the whole text rendered at one rate.
        var wrongWords = 0
        /// Mean word length after the change over before (about 1 / the rate multiplier).
        var lengthRatio: [Double] = []
        /// Level change at the monitor after setVolume(0.5), in dB (−6.0 expected).
        var volumeDB: [Double] = []
    }

    func benchProsody(_ recorder: PulseAudioRecorder) async throws {
        let synth = SpeechSynthesizer(audioOutput: AudioOutputOptions(device: sink, server: server))
        try await synth.prepareToSpeak()
        let u = Utterance(string: Self.reading)
        let box = SampleBox()
        let reference = try await synth.write(u) { e in
            if case .audio(let b) = e { box.append(b.samples) }
        }
        let firstLoudPCM = box.samples.firstIndex { $0.magnitude >= 300 } ?? 0
        _ = await synth.speakAndWait(Utterance(string: "Warm up."))
        var rates: [(Double, ProsodyFigures)] = []
        for multiplier in [2.0, 0.6] {
            var f = ProsodyFigures()
            for run in 0..<runs {
                try synth.setRate(1)
                recorder.reset()
                let events = synth.events(), changerEvents = synth.events()
                let t0 = monotonicNanoseconds()
                let id = synth.speak(u)
                var words: [(time: UInt64, word: SpokenRange)] = []
                // Asked for at a different point of the word in each run: 0 to 290 ms into the 4th.
                let delay = (run * 97) % 300
                let changer = Task {
                    var n = 0
                    for await e in changerEvents where e.utterance == id {
                        if case .willSpeakWord = e.kind { n += 1 }
                        if n == 4 {
                            try? await Task.sleep(for: .milliseconds(delay))
                            try? synth.setRate(multiplier)
                            return
                        }
                        if e.kind.isTerminal { return }
                    }
                }
                defer { changer.cancel() }
                for await e in events where e.utterance == id {
                    if case .willSpeakWord(let r) = e.kind { words.append((e.time.nanoseconds, r)) }
                    if e.kind.isTerminal { break }
                }
                try await Task.sleep(for: .milliseconds(150))
                guard let change = synth.recentProsodyChanges.last(where: { $0.utterance == id }),
                    let first = recorder.loudSampleTimes(after: t0).first,
                    let at = words.firstIndex(where: { $0.word.scalarRange == change.word })
                else {
                    FileHandleErr.write("run \(run + 1): no change took effect\n")
                    continue
                }
                f.latency.append(change.latencyMilliseconds)
                for (i, (time, w)) in words.enumerated() {
                    let heard = Double(first) + Double(w.audioSample - firstLoudPCM) * 1e9 / Double(w.sampleRate)
                    let drift = (Double(time) - heard) / 1e6
                    if i < at { f.driftBefore.append(drift) } else { f.driftAfter.append(drift) }
                }
                if getenv("PARLA_BENCH_VERBOSE") != nil {
                    let line = words.enumerated().map { i, w in
                        (i == at ? "| " : "")
                            + fmt(
                                (Double(w.time) - Double(first) - Double(w.word.audioSample - firstLoudPCM) * 1e9
                                    / Double(w.word.sampleRate)) / 1e6)
                    }
                    FileHandleErr.write("drift \(line.joined(separator: " "))\n")
                }
                let ranges = words.map(\.word.scalarRange), expected = reference.words.map(\.range)
                f.wrongWords += ranges == expected ? 0 : max(1, abs(ranges.count - expected.count))
                func meanLength(_ w: ArraySlice<(time: UInt64, word: SpokenRange)>) -> Double {
                    guard let a = w.first, let b = w.last, w.count > 1 else { return .nan }
                    return Double(b.word.audioSample - a.word.audioSample) / Double(w.count - 1)
                }
                f.lengthRatio.append(meanLength(words[at...]) / meanLength(words[..<at]))
                FileHandleErr.write(
                    "rate ×\(fmt(multiplier)) run \(run + 1)/\(runs): latency \(fmt(change.latencyMilliseconds)) ms of audio\n")
            }
            rates.append((multiplier, f))
        }
        // Volume: the level at the monitor against the same stretch of the reference rendering,
        // in the 0.6 s before setVolume(0.5) (0 dB expected) and from 0.1 s after it (−6 dB).
        var volume: [Double] = [], control: [Double] = [], applied: [Double] = []
        let pcm = box.samples
        try synth.setRate(1)
        for _ in 0..<runs {
            try synth.setVolume(1)
            recorder.reset()
            let events = synth.events()
            let t0 = monotonicNanoseconds()
            let id = synth.speak(u)
            var n = 0
            for await e in events where e.utterance == id {
                if case .willSpeakWord = e.kind { n += 1 }
                if n == 3 { break }
            }
            let from = monotonicNanoseconds()
            try await Task.sleep(for: .milliseconds(600))
            let at = monotonicNanoseconds()
            try synth.setVolume(0.5)
            try await Task.sleep(for: .milliseconds(700))
            let to = monotonicNanoseconds()
            _ = synth.stop()
            // The monitor's samples in order; the first loud one is the reference's first loud one.
            let blocks = recorder.recorded().filter { $0.arrivalNanoseconds > t0 }
            var all: [Int16] = [], blockStart: [Int] = []
            for b in blocks {
                blockStart.append(all.count)
                all += b.samples
            }
            guard let firstLoud = all.firstIndex(where: { $0.magnitude >= 300 }) else { continue }
            let offset = firstLoud - firstLoudPCM
            /// Recorded level over reference level (dB) for the blocks that arrived between `a` and `b`.
            func level(_ a: UInt64, _ b: UInt64) -> Double {
                var heard = 0.0, expected = 0.0
                for (k, block) in blocks.enumerated() where block.arrivalNanoseconds > a && block.arrivalNanoseconds <= b {
                    for (i, x) in block.samples.enumerated() {
                        let j = blockStart[k] + i - offset
                        guard j >= 0 && j < pcm.count else { continue }
                        heard += Double(x) * Double(x)
                        expected += Double(pcm[j]) * Double(pcm[j])
                    }
                }
                return 10 * log10(max(heard, 1) / max(expected, 1))
            }
            if getenv("PARLA_BENCH_VERBOSE") != nil {
                var slices: [String] = []
                var t = from
                while t < to {
                    slices.append(fmt(level(t, t + 100_000_000)))
                    t += 100_000_000
                }
                FileHandleErr.write("level per 100 ms (change after 6): \(slices.joined(separator: " "))\n")
            }
            // The first block after the call that is 3 dB or more below the reference.
            if let k = blocks.indices.first(where: { k in
                guard blocks[k].arrivalNanoseconds > at else { return false }
                var heard = 0.0, expected = 0.0
                for (i, x) in blocks[k].samples.enumerated() where blockStart[k] + i - offset >= 0 && blockStart[k] + i - offset < pcm.count
                {
                    heard += Double(x) * Double(x)
                    expected += Double(pcm[blockStart[k] + i - offset]) * Double(pcm[blockStart[k] + i - offset])
                }
                return expected > 1e6 * Double(blocks[k].samples.count) && heard < expected / 2
            }) {
                applied.append(ms(blocks[k].arrivalNanoseconds - at))
            }
            control.append(level(from, at))
            volume.append(level(at + 100_000_000, to))
            try await Task.sleep(for: .milliseconds(200))
        }
        try synth.setVolume(1)

        print("live rate change (\(runs) runs each; median / p95, ms)")
        print(
            "rate".padding(8) + "latency (audio)".padding(18, left: true) + "drift before".padding(16, left: true)
                + "drift after".padding(16, left: true) + "|after| p95".padding(13, left: true) + "word length".padding(13, left: true)
                + "wrong words".padding(13, left: true))
        for (m, f) in rates {
            print(
                "×\(fmt(m))".padding(8) + cell(f.latency).padding(18, left: true) + cell(f.driftBefore) + cell(f.driftAfter)
                    + fmt(percentile(f.driftAfter.map(abs), 0.95)).padding(13, left: true)
                    + "×\(String(format2: percentile(f.lengthRatio, 0.5)))".padding(13, left: true)
                    + "\(f.wrongWords)".padding(13, left: true))
        }
        print(
            "volume, level against the reference rendering (median / p95, dB): \(fmt(percentile(control, 0.5))) / \(fmt(percentile(control, 0.95))) before setVolume(0.5) (0 expected), "
                + "\(fmt(percentile(volume, 0.5))) / \(fmt(percentile(volume, 0.95))) from 0.1 s after it (−6.0 expected); "
                + "heard 3 dB lower \(fmt(percentile(applied, 0.5))) / \(fmt(percentile(applied, 0.95))) ms after the call")
        print("targets: |drift median| ≤ 15 and p95 ≤ 30 across the change, no word repeated or skipped")
    }
}
