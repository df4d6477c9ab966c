/// Finds stretches of near-silence (at least 20 ms below about −40 dBFS) in streamed audio.
struct SilenceTracker {
    static let threshold: Int16 = 330
    private(set) var intervals: [Range<Int>] = []
    private var quietSince: Int? = 0
    private var minimum = 441  // set from the sample rate on first use; 20 ms at 22.05 kHz

    /// Every `stride`-th sample is inspected: a 20 ms gap is ~440 samples, so a 0.4 ms
    /// resolution loses nothing that matters and keeps this off the synthesis profile.
    static let stride = 8

    mutating func scan(_ samples: [Int16], startingAt base: Int) {
        samples.withUnsafeBufferPointer { buf in
            let n = buf.count
            guard let p = buf.baseAddress else { return }
            // Local copies and a sentinel instead of an optional keep this loop tight: it
            // runs over every audio block of the batch renderer.
            var quiet = quietSince ?? -1
            let minimum = self.minimum
            var i = 0
            while i < n {
                if quiet < 0 {
                    // Loud: look for the next quiet sample.
                    while i < n, p[i] > Self.threshold || p[i] < -Self.threshold { i += Self.stride }
                    if i < n { quiet = base + i }
                } else {
                    // Quiet since `quiet`: look for the next loud sample.
                    while i < n, p[i] <= Self.threshold && p[i] >= -Self.threshold { i += Self.stride }
                    if i < n {
                        let end = base + i
                        if end - quiet >= minimum { add(quiet..<end) }
                        quiet = -1
                    }
                }
            }
            quietSince = quiet < 0 ? nil : quiet
            // An open quiet stretch is provisionally recorded so that readers see it.
            if quiet >= 0, base + n - quiet >= minimum { add(quiet..<(base + n)) }
        }
    }

    private mutating func add(_ r: Range<Int>) {
        if let last = intervals.last, last.lowerBound == r.lowerBound {
            intervals[intervals.count - 1] = r
        } else {
            intervals.append(r)
        }
    }
}
