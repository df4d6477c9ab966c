/// Live volume on the samples as they are sent: a multiple of the utterance's loudness, 0–2,
/// like live rate and pitch. Up to 1 it scales each sample. Above 1 a soft limiter bends the
/// peaks beyond ``knee`` of full scale towards it, sample by sample: nothing wraps, nothing
/// is cut flat, and the same samples come out however the stream's blocks are split.
package enum SampleGain {
    /// Where the limiter starts bending, as a fraction of full scale (Piper's level uses the same).
    package static let knee = 0.8
    /// The loudest a sample may come out, as a fraction of full scale.
    package static let ceiling = 0.9995

    /// `samples` at `gain` (clamped to 0–2; 1 leaves them as they are).
    package static func apply(_ gain: Double, to samples: ArraySlice<Int16>) -> [Int16] {
        let g = gain.isFinite ? min(max(gain, 0), 2) : 1
        return samples.map { scaled($0, by: g) }
    }

    /// One sample at gain `g` (0–2).
    package static func scaled(_ sample: Int16, by g: Double) -> Int16 {
        let x = Double(sample) * g / 32768
        let a = abs(x)
        guard g > 1, a > knee else { return Int16((x * 32768).rounded()) }
        // Above the knee, a curve with the line's slope where it starts, and full scale as its
        // limit: knee + (1 − knee)·t/(1 + t), t the distance past the knee in (1 − knee)s.
        let t = (a - knee) / (1 - knee)
        let y = min(knee + (1 - knee) * t / (1 + t), ceiling)
        return Int16(((x < 0 ? -y : y) * 32768).rounded())
    }
}
