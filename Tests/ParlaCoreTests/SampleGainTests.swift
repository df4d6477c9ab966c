import Testing

@testable import ParlaCore

/// Live volume on the samples: scaled up to 1, limited softly above it, never clipped.
@Suite struct SampleGainTests {
    static let ramp: [Int16] = stride(from: -32768, through: 32767, by: 7).map { Int16($0) } + [32767]

    @Test func atOneTheSamplesAreUntouchedAndBelowItTheyAreScaled() {
        #expect(SampleGain.apply(1, to: Self.ramp[...]) == Self.ramp)
        let half = SampleGain.apply(0.5, to: [1000, -1000, 32767, -32768, 1][...])
        #expect(half == [500, -500, 16384, -16384, 1])
        #expect(SampleGain.apply(0, to: Self.ramp[...]).allSatisfy { $0 == 0 })
    }

    @Test func aboveOneQuietSamplesDoubleAndLoudOnesBendBelowFullScale() {
        let loud = SampleGain.apply(2, to: Self.ramp[...])
        // Below the knee (0.8 of full scale after the gain), exactly twice.
        #expect(SampleGain.scaled(13_000, by: 2) == 26_000)
        #expect(SampleGain.scaled(-13_000, by: 2) == -26_000)
        // Above it: louder than before, never at full scale, and in order (no wrap, no flat top
        // but at the ceiling, which only the loudest input reaches).
        let ceiling = Int16((SampleGain.ceiling * 32768).rounded())
        #expect(loud.allSatisfy { abs(Int($0)) <= Int(ceiling) })
        #expect(zip(loud, loud.dropFirst()).allSatisfy { $0 <= $1 }, "monotonic")
        #expect(zip(Self.ramp, loud).allSatisfy { abs(Int($0)) > 31_000 || abs(Int($1)) >= abs(Int($0)) }, "louder but at the very top")
        #expect(SampleGain.scaled(32767, by: 2) > 30_000 && SampleGain.scaled(32767, by: 2) < 32767)
        // The bend is smooth where it starts: one sample past the knee is a step of about 2.
        let k = Int16(SampleGain.knee * 32768 / 2)
        #expect(abs(Int(SampleGain.scaled(k + 1, by: 2)) - Int(SampleGain.scaled(k, by: 2)) - 2) <= 1)
    }

    @Test func outOfRangeGainsAreClamped() {
        #expect(SampleGain.apply(.nan, to: [1234][...]) == [1234])
        #expect(SampleGain.apply(5, to: [1000][...]) == [2000])
        #expect(SampleGain.apply(-1, to: [1000][...]) == [0])
    }
}
