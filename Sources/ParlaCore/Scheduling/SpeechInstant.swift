/// A moment on the machine's monotonic clock (`CLOCK_MONOTONIC`), the clock live events are
/// stamped with. Every process of the machine shares it, so an event's time can be compared
/// with times taken elsewhere, such as a recording of the sound card's monitor.
///
/// ParlaCore never reads the clock; `SpeechInstant.now` (in ParlaIO, re-exported by `Parla`)
/// does.
public struct SpeechInstant: InstantProtocol, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Nanoseconds on the monotonic clock (since an arbitrary point, usually the boot).
    public var nanoseconds: UInt64

    /// The instant `nanoseconds` after the clock's origin.
    public init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    /// The instant `duration` later (earlier if negative), held within the clock's range.
    /// The duration counts in whole nanoseconds, at most ±292 years (longer is cut to that).
    public func advanced(by duration: Duration) -> SpeechInstant {
        let delta = duration.wholeNanoseconds
        if delta >= 0 {
            let (sum, overflow) = nanoseconds.addingReportingOverflow(UInt64(delta))
            return SpeechInstant(nanoseconds: overflow ? .max : sum)
        }
        let back = delta.magnitude
        return SpeechInstant(nanoseconds: back > nanoseconds ? 0 : nanoseconds - back)
    }

    /// The time from this instant to `other` (negative if `other` is earlier).
    public func duration(to other: SpeechInstant) -> Duration {
        if other.nanoseconds >= nanoseconds {
            return .nanoseconds(Int64(clamping: other.nanoseconds - nanoseconds))
        }
        return .nanoseconds(-Int64(clamping: nanoseconds - other.nanoseconds))
    }

    public static func < (a: SpeechInstant, b: SpeechInstant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `instant` moved by `duration` (see ``advanced(by:)``).
    public static func + (instant: SpeechInstant, duration: Duration) -> SpeechInstant { instant.advanced(by: duration) }

    /// `instant` moved back by `duration`.
    public static func - (instant: SpeechInstant, duration: Duration) -> SpeechInstant { instant.advanced(by: .zero - duration) }

    /// The time from `b` to `a`.
    public static func - (a: SpeechInstant, b: SpeechInstant) -> Duration { b.duration(to: a) }

    public var description: String { "\(nanoseconds) ns" }
}
