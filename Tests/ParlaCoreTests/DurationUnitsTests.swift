import ParlaCore
import Testing

/// The one place a `Duration` is taken apart: seconds, nanoseconds and samples, saturating
/// instead of trapping.
@Suite struct DurationUnitsTests {
    @Test func secondsMillisecondsAndNanoseconds() {
        #expect(Duration.milliseconds(1500).inSeconds == 1.5)
        #expect(Duration.microseconds(250).inMilliseconds == 0.25)
        #expect(Duration.nanoseconds(-7).wholeNanoseconds == -7)
        #expect(Duration.seconds(3).wholeNanoseconds == 3_000_000_000)
        #expect(Duration.seconds(Int64.max).wholeNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).wholeNanoseconds == .min)
    }

    @Test func samplesAtARate() {
        #expect(Duration.milliseconds(10).samples(atRate: 22050) == 220)  // 220.5, rounded down
        #expect(Duration.seconds(2).samples(atRate: 16000) == 32000)
        #expect(Duration.milliseconds(-5).samples(atRate: 22050) == 0)
        #expect(Duration.seconds(1).samples(atRate: 0) == 0)
        #expect(Duration.seconds(Int64.max).samples(atRate: 48000) == .max)
        #expect(Duration.samples(22050, atRate: 22050) == .seconds(1))
        #expect(Duration.samples(441, atRate: 44100) == .milliseconds(10))
        #expect(Duration.samples(-3, atRate: 44100) == .zero)
        #expect(Duration.samples(.max, atRate: 1) == .seconds(Int.max))
        // Whole samples survive the round trip.
        for n in [0, 1, 255, 22050, 1_000_003] {
            #expect(Duration.samples(n, atRate: 22050).samples(atRate: 22050) >= n - 1)
        }
    }
}
