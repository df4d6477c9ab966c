/// The rules every timeline Parla hands out obeys, checked against the caller's text.
///
/// The timeline builder is written to keep them whatever the engine reports; this check is
/// the proof the tests and fuzzers use, and the last guard before timings are written to a
/// file (a timeline that breaks a rule fails its utterance instead of producing wrong timings).
extension SpeechTimeline {
    /// The first rule this timeline breaks for the input text `input` (``Utterance/inputText``),
    /// or nil when it keeps them all:
    ///
    /// - every range lies inside `input`, on grapheme-cluster boundaries, and words and
    ///   sentences are not empty;
    /// - every time lies within the audio (`0 ≤ start ≤ end ≤ sampleCount`);
    /// - words, sentences and segments each come in text order without overlapping, and
    ///   their start times never go backwards;
    /// - each word lies inside its segment and inside one sentence (when sentences are marked).
    package func invariantViolation(input: String) -> String? {
        guard sampleRate > 0 else { return "the sample rate \(sampleRate) is not positive" }
        guard sampleCount >= 0 else { return "the audio has \(sampleCount) samples" }
        let boundaries = GraphemeBoundaries(input)

        func check(_ kind: String, _ i: Int, range r: Range<Int>, start: Int, end: Int, allowEmpty: Bool) -> String? {
            let what = "\(kind) \(i) (\(r), samples \(start)..<\(end))"
            if r.lowerBound < 0 || r.upperBound > boundaries.scalarCount {
                return "\(what) lies outside the text of \(boundaries.scalarCount) scalars"
            }
            if r.isEmpty && !allowEmpty { return "\(what) is empty" }
            if !boundaries.contains(r.lowerBound) || !boundaries.contains(r.upperBound) {
                return "\(what) splits a grapheme cluster"
            }
            if start < 0 || end < start || end > sampleCount {
                return "\(what) is not within the audio's \(sampleCount) samples"
            }
            return nil
        }

        for (i, s) in segments.enumerated() {
            if let v = check("segment", i, range: s.range, start: s.startSample, end: s.endSample, allowEmpty: true) { return v }
            if s.index != i { return "segment \(i) is numbered \(s.index)" }
            if i > 0 {
                let p = segments[i - 1]
                if s.range.lowerBound < p.range.upperBound { return "segment \(i) overlaps segment \(i - 1)" }
                if s.startSample < p.startSample { return "segment \(i) starts before segment \(i - 1)" }
            }
        }
        for (i, s) in sentences.enumerated() {
            if let v = check("sentence", i, range: s.range, start: s.startSample, end: s.endSample, allowEmpty: false) { return v }
            if i > 0 {
                let p = sentences[i - 1]
                if s.range.lowerBound < p.range.upperBound { return "sentence \(i) (\(s.range)) overlaps sentence \(i - 1) (\(p.range))" }
                if s.startSample < p.startSample { return "sentence \(i) starts before sentence \(i - 1)" }
            }
        }
        var sentence = 0
        for (i, w) in words.enumerated() {
            if let v = check(
                "word \(w.word.debugDescription)", i, range: w.range, start: w.startSample, end: w.endSample, allowEmpty: false)
            {
                return v
            }
            if i > 0 {
                let p = words[i - 1]
                if w.range.lowerBound < p.range.upperBound { return "word \(i) (\(w.range)) overlaps word \(i - 1) (\(p.range))" }
                if w.startSample < p.startSample { return "word \(i) starts before word \(i - 1)" }
            }
            if !segments.isEmpty {
                guard segments.indices.contains(w.segment) else { return "word \(i) names segment \(w.segment), which does not exist" }
                let s = segments[w.segment].range
                if w.range.lowerBound < s.lowerBound || w.range.upperBound > s.upperBound {
                    return "word \(i) (\(w.range)) is not inside its segment \(w.segment) (\(s))"
                }
            }
            if !sentences.isEmpty {
                while sentence < sentences.count, sentences[sentence].range.upperBound <= w.range.lowerBound { sentence += 1 }
                guard sentence < sentences.count, sentences[sentence].range.lowerBound <= w.range.lowerBound,
                    w.range.upperBound <= sentences[sentence].range.upperBound
                else { return "word \(i) \(w.word.debugDescription) (\(w.range)) is not inside one sentence" }
            }
        }
        return nil
    }
}

/// The grapheme-cluster boundaries of a text, as Unicode-scalar offsets.
package struct GraphemeBoundaries {
    /// Scalars in the text.
    package let scalarCount: Int
    /// Whether each scalar offset (0…scalarCount) is a boundary.
    private var isBoundary: [Bool]
    /// Whether each scalar offset starts a cluster made only of whitespace.
    private var startsBlank: [Bool]

    package init(_ text: String) {
        var flags: [Bool] = []
        var blank: [Bool] = []
        flags.reserveCapacity(text.utf8.count + 1)
        blank.reserveCapacity(text.utf8.count + 1)
        for ch in text {
            flags.append(true)
            blank.append(ch.unicodeScalars.allSatisfy { $0.properties.isWhitespace })
            for _ in ch.unicodeScalars.dropFirst() {
                flags.append(false)
                blank.append(false)
            }
        }
        scalarCount = flags.count
        flags.append(true)
        blank.append(false)
        isBoundary = flags
        startsBlank = blank
    }

    /// `range` (on boundaries) without the clusters of whitespace at either end.
    package func trimmingBlank(_ range: Range<Int>) -> Range<Int> {
        var lo = min(max(range.lowerBound, 0), scalarCount), hi = min(max(range.upperBound, lo), scalarCount)
        while lo < hi, startsBlank[lo] { lo = ceiling(lo + 1) }
        while hi > lo, case let last = floor(hi - 1), startsBlank[last] { hi = last }
        return lo..<max(lo, hi)
    }

    /// Whether scalar offset `offset` starts a grapheme cluster (or is the end of the text).
    package func contains(_ offset: Int) -> Bool {
        offset >= 0 && offset < isBoundary.count && isBoundary[offset]
    }

    /// The last boundary at or before `offset` (clamped into the text).
    package func floor(_ offset: Int) -> Int {
        var o = min(max(offset, 0), scalarCount)
        while o > 0 && !isBoundary[o] { o -= 1 }
        return o
    }

    /// The first boundary at or after `offset` (clamped into the text).
    package func ceiling(_ offset: Int) -> Int {
        var o = min(max(offset, 0), scalarCount)
        while o < scalarCount && !isBoundary[o] { o += 1 }
        return o
    }

    /// `range` widened to whole grapheme clusters and clamped into the text.
    package func widening(_ range: Range<Int>) -> Range<Int> {
        let lo = floor(range.lowerBound)
        return lo..<max(lo, ceiling(range.upperBound))
    }
}
