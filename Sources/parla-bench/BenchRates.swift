import FoundationEssentials
import Parla
import ParlaCommands
import ParlaTesting
#if canImport(Glibc)
    import Glibc
#endif

/// `parla-bench --rates` (run by scripts/bench-prosody): rendered speech at the rates and
/// pitches screen-reader users set. For joe and espeak-ng, each rate's speed-up over 175 words a
/// minute divided by the one asked (first sound to last, pauses included); joe's median F0 at
/// pitch 25 and 75 against 50, in semitones; and joe's CPU at 800 against 175, per second of
/// audio and per text (the engine host's, children included, read from /proc).
extension BenchLive {
    static let ratePassage =
        "The quick brown fox jumps over the lazy dog, and then it runs into the forest where the trees are tall. Nobody saw it again until the spring came back to the valley, and even then only the birds knew."

    /// CPU seconds of this process's children and their children, those reaped included.
    static func childrenCPU() -> Double {
        let me = getpid()
        var total = 0.0
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return 0 }
        var parents: [Int32: Int32] = [:]
        var cpu: [Int32: Double] = [:]
        for name in entries {
            guard let pid = Int32(name), let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { continue }
            let text = String(decoding: data, as: UTF8.self)
            guard let close = text.lastIndex(of: ")") else { continue }
            let fields = text[text.index(after: close)...].split(separator: " ")
            // After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
            guard fields.count > 14, let ppid = Int32(fields[1]) else { continue }
            parents[pid] = ppid
            cpu[pid] = [11, 12, 13, 14].compactMap { Double(fields[$0]) }.reduce(0, +) / ticks
        }
        for (pid, seconds) in cpu where pid != me {
            var p = parents[pid]
            while let up = p, up != me, up > 1 { p = parents[up] }
            if p == me { total += seconds }
        }
        return total
    }

    func benchRates() async throws {
        let catalog = try VoiceCatalog.default()
        let synth = SpeechSynthesizer(catalog: catalog)
        let joe = "piper.en_US-joe-medium"
        guard (try? catalog.voice(identifier: joe)) != nil else {
            throw ParlaError.unknownVoice(joe)
        }
        func render(_ voice: String, rate: Double, pitch: Double = 1) async throws -> (samples: [Int16], cpu: Double) {
            var u = Utterance(string: Self.ratePassage, language: "en")
            u.voice = try catalog.voice(identifier: voice)
            u.wordsPerMinute = rate
            u.pitch = pitch
            let box = SampleBox()
            let before = Self.childrenCPU()
            _ = try await synth.write(u) { e in
                if case .audio(let b) = e { box.append(b.samples) }
            }
            return (box.samples, Self.childrenCPU() - before)
        }
        func seconds(_ s: [Int16]) -> Double { Double(SpeechMeasures.soundingSpan(s)?.count ?? 0) / 22050 }
        func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
        _ = try await render(joe, rate: 175)  // the voice loaded and warm
        print("Rates (speed-up over 175 ÷ asked, first sound to last; median of \(runs) runs)")
        print("voice".padding(26) + [175, 450, 800, 1000].map { "\($0)".padding(8, left: true) }.joined())
        var cpu: [Double: (cpu: Double, audio: Double)] = [:]
        for voice in [joe, "espeak-ng.en-us"] {
            var line = voice.padding(26)
            var normal = 0.0
            for rate in [175.0, 450, 800, 1000] {
                var ratios: [Double] = [], cpus: [Double] = [], lengths: [Double] = []
                for _ in 0..<runs {
                    let (samples, used) = try await render(voice, rate: rate)
                    let length = seconds(samples)
                    if rate == 175 { normal = length }
                    ratios.append(normal / length / (rate / 175))
                    cpus.append(used)
                    lengths.append(length)
                }
                line += fmt3(median(ratios)).padding(8, left: true)
                if voice == joe { cpu[rate] = (median(cpus), median(lengths)) }
            }
            print(line)
        }
        print("target: 0.95–1.05 each")
        if let slow = cpu[175], let fast = cpu[800], slow.cpu > 0, fast.audio > 0 {
            let perSecond = (fast.cpu / fast.audio) / (slow.cpu / slow.audio)
            let perText = fast.cpu / slow.cpu
            print(
                "joe's CPU: at 175 \(fmt2(slow.cpu)) s for \(fmt(slow.audio)) s of audio, at 800 \(fmt2(fast.cpu)) s for \(fmt(fast.audio)) s"
            )
            print("  800 ÷ 175, per second of audio: \(fmt2(perSecond)); per text: \(fmt2(perText)) (target ≤ 0.6)")
        }
        var base: [Double] = []
        var moved: [Double: [Double]] = [0.5: [], 1.5: []]
        for _ in 0..<runs {
            if let f = SpeechMeasures.medianPitch(try await render(joe, rate: 175).samples) { base.append(f) }
            for m in [0.5, 1.5] {
                if let f = SpeechMeasures.medianPitch(try await render(joe, rate: 175, pitch: m).samples) {
                    moved[m, default: []].append(f)
                }
            }
        }
        if !base.isEmpty, let low = moved[0.5], !low.isEmpty, let high = moved[1.5], !high.isEmpty {
            let f0 = median(base), down = median(low), up = median(high)
            let downSemitones = 12 * log2(down / f0), upSemitones = 12 * log2(up / f0)
            print("joe's median F0: \(fmt(f0)) Hz at pitch 50; at 25 \(fmt(down)) Hz, \(fmt2(downSemitones)) semitones (asked -6);")
            print("  at 75 \(fmt(up)) Hz, \(fmt2(upSemitones)) semitones (asked +6)")
        }
    }

    /// Three decimals.
    func fmt3(_ v: Double) -> String {
        guard v.isFinite else { return "\(v)" }
        let thousandths = Int((v * 1000).rounded())
        let rest = abs(thousandths) % 1000
        return (thousandths < 0 ? "-" : "") + "\(abs(thousandths) / 1000)." + (rest < 10 ? "00" : rest < 100 ? "0" : "") + "\(rest)"
    }
}
