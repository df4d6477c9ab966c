import ParlaCore
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// CLOCK_MONOTONIC in nanoseconds: the clock event times are given in.
package func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

extension SpeechInstant {
    /// This moment on the monotonic clock.
    public static var now: SpeechInstant { SpeechInstant(nanoseconds: monotonicNanoseconds()) }
}
