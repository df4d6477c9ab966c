/// Conversions between `Duration` and the units Parla's edges speak: seconds and
/// milliseconds as `Double`s, whole nanoseconds, and samples at a rate. The one place that
/// takes a `Duration` apart.
extension Duration {
    /// The duration in seconds.
    package var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The duration in milliseconds.
    package var inMilliseconds: Double { inSeconds * 1000 }

    /// Whole nanoseconds, saturating at `Int64`'s range.
    package var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (ns, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = ns.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow2 ? (ns < 0 ? .min : .max) : sum
    }

    /// How many whole samples it lasts at `rate` Hz (0 for a negative duration or rate;
    /// saturating).
    package func samples(atRate rate: Int) -> Int {
        guard rate > 0, self > .zero else { return 0 }
        let (seconds, attoseconds) = components
        let (whole, overflow) = Int(clamping: seconds).multipliedReportingOverflow(by: rate)
        if overflow { return .max }
        let fraction = Int(Double(attoseconds) / 1e18 * Double(rate))
        let (sum, overflow2) = whole.addingReportingOverflow(fraction)
        return overflow2 ? .max : sum
    }

    /// How long `count` samples last at `rate` Hz, to the nanosecond below (saturating; zero
    /// for a negative count or rate).
    package static func samples(_ count: Int, atRate rate: Int) -> Duration {
        guard rate > 0, count > 0 else { return .zero }
        let (product, overflow) = count.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .seconds(count / rate) }
        return .nanoseconds(product / rate)
    }
}
