/// Measures of recorded speech that tests and benchmarks share: how long it sounds, where its
/// sounds start, and its median pitch.
public enum SpeechMeasures {
    /// The first and last sample of the blocks of `block` samples whose peak passes
    /// `threshold`: the speech from its first sound to its last, pauses included. Nil for silence.
    public static func soundingSpan(_ samples: [Int16], block: Int = 220, threshold: Int = 300) -> Range<Int>? {
        var first: Int?, last = 0
        var at = 0
        while at < samples.count {
            let end = min(at + block, samples.count)
            var peak = 0
            for i in at..<end { peak = max(peak, abs(Int(samples[i]))) }
            if peak > threshold {
                if first == nil { first = at }
                last = end
            }
            at = end
        }
        return first.map { $0..<last }
    }

    /// The samples where sound starts after at least `quiet` samples of silence (blocks of
    /// `block` samples whose RMS is below `threshold`), the first sound included.
    public static func onsets(_ samples: [Int16], block: Int = 110, quiet: Int = 330, threshold: Double = 150) -> [Int] {
        var found: [Int] = []
        var silent = quiet
        var at = 0
        while at + block <= samples.count {
            var sum = 0.0
            for i in at..<at + block { sum += Double(samples[i]) * Double(samples[i]) }
            let rms = (sum / Double(block)).squareRoot()
            if rms < threshold {
                silent += block
            } else {
                if silent >= quiet { found.append(at) }
                silent = 0
            }
            at += block
        }
        return found
    }

    /// The median fundamental frequency (Hz) of the voiced frames of `samples` at `sampleRate`:
    /// each 40 ms frame (hop 20 ms) louder than `threshold` RMS whose normalized autocorrelation
    /// peaks above 0.6 between `lowest` and `highest` Hz. Nil if no frame is voiced. Audio above
    /// 16 kHz is halved first (pairs averaged), which a voice's pitch survives.
    public static func medianPitch(
        _ input: [Int16], sampleRate inputRate: Int = 22050, lowest: Double = 40, highest: Double = 400, threshold: Double = 500
    )
        -> Double?
    {
        var samples = input, sampleRate = inputRate
        if sampleRate >= 16000 {
            samples = stride(from: 0, to: input.count - 1, by: 2).map { Int16((Int(input[$0]) + Int(input[$0 + 1])) / 2) }
            sampleRate /= 2
        }
        let frame = sampleRate * 40 / 1000, hop = sampleRate / 50
        let shortest = Int(Double(sampleRate) / highest), longest = Int(Double(sampleRate) / lowest)
        guard frame > longest, samples.count > frame + longest else { return nil }
        var pitches: [Double] = []
        var x = [Double](repeating: 0, count: frame + longest)
        var start = 0
        while start + frame + longest <= samples.count {
            for i in 0..<x.count { x[i] = Double(samples[start + i]) }
            var energy = 0.0
            for i in 0..<frame { energy += x[i] * x[i] }
            if (energy / Double(frame)).squareRoot() >= threshold {
                var best = 0.0, bestLag = 0
                var scores = [Double](repeating: 0, count: longest + 2)
                for lag in shortest...longest {
                    var dot = 0.0, shifted = 0.0
                    for i in 0..<frame {
                        dot += x[i] * x[i + lag]
                        shifted += x[i + lag] * x[i + lag]
                    }
                    let score = dot / max((energy * shifted).squareRoot(), 1)
                    scores[lag] = score
                    if score > best { best = score; bestLag = lag }
                }
                // The shortest lag that scores nearly as well: the period, not a multiple of it.
                if best > 0.6 {
                    var lag = bestLag
                    for candidate in shortest..<bestLag where scores[candidate] > best * 0.9 {
                        let isPeak = scores[candidate] >= scores[candidate - 1] && scores[candidate] >= scores[candidate + 1]
                        if isPeak { lag = candidate; break }
                    }
                    pitches.append(Double(sampleRate) / Double(lag))
                }
            }
            start += hop
        }
        guard !pitches.isEmpty else { return nil }
        pitches.sort()
        return pitches[pitches.count / 2]
    }
}
