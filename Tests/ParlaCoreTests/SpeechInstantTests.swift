import ParlaCore
import ParlaIO
import Testing

/// Event times are instants of the monotonic clock, with Swift's Duration arithmetic.
@Suite("Speech instants")
struct SpeechInstantTests {
    @Test func arithmeticMatchesDurationsAndSaturates() {
        let t = SpeechInstant(nanoseconds: 5_000_000_000)
        #expect(t.advanced(by: .milliseconds(250)).nanoseconds == 5_250_000_000)
        #expect(t.advanced(by: .milliseconds(-250)).nanoseconds == 4_750_000_000)
        #expect(t.duration(to: SpeechInstant(nanoseconds: 5_000_000_123)) == .nanoseconds(123))
        #expect(SpeechInstant(nanoseconds: 5_000_000_123).duration(to: t) == .nanoseconds(-123))
        #expect(t - .seconds(1) < t && t < t + .seconds(1) && (t + .seconds(2)) - t == .seconds(2))
        // At the clock's ends it saturates instead of trapping.
        #expect(t.advanced(by: .seconds(-10)).nanoseconds == 0)
        #expect(SpeechInstant(nanoseconds: .max - 1).advanced(by: .seconds(1)).nanoseconds == .max)
        #expect(SpeechInstant(nanoseconds: 0).duration(to: SpeechInstant(nanoseconds: .max)) == .nanoseconds(Int64.max))
        // Durations count in whole nanoseconds, up to ±292 years: longer ones are cut to that.
        #expect(t.advanced(by: .seconds(Int64.max)).nanoseconds == 5_000_000_000 + UInt64(Int64.max))
    }

    @Test func nowIsTheMonotonicClock() {
        let before = monotonicNanoseconds()
        let now = SpeechInstant.now
        let after = monotonicNanoseconds()
        #expect(before <= now.nanoseconds && now.nanoseconds <= after)
    }
}
