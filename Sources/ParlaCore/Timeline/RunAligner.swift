/// Matches engine word events for one run against Parla's own tokens of that run.
struct RunAligner {
    struct Token {
        var range: Range<Int>
        var start: Int?
        var estimated = true
        /// The phonemes the engine spoke it with (IPA), "" if it did not say.
        var phonemes = ""
    }
    struct Final {
        var range: Range<Int>
        var start: Int
        var end: Int
        var estimated: Bool
        var phonemes = ""
    }

    let range: Range<Int>
    let startSample: Int
    private let scalars: [Unicode.Scalar]
    private var tokens: [Token] = []
    /// Grapheme-cluster start offsets within the run, plus the run end.
    private var boundaries: [Int] = []
    private var emitted = 0
    private var lastAnchor: Int?
    private var finalized: [Final] = []
    private var finished = false

    init(scalars: [Unicode.Scalar], range: Range<Int>, startSample: Int) {
        self.scalars = scalars
        self.range = range
        self.startSample = startSample
        tokenize()
    }

    /// Splits the run into word tokens: runs of letters, digits and marks (apostrophes inside
    /// words included), with each Han, Kana, Thai, Lao, Khmer or Myanmar character on its own.
    private mutating func tokenize() {
        let sub = String(String.UnicodeScalarView(scalars[range]))
        var offset = range.lowerBound
        var current: Int?
        var previousWasWord = false
        let chars = Array(sub)
        for (i, ch) in chars.enumerated() {
            boundaries.append(offset)
            let n = ch.unicodeScalars.count
            guard let first = ch.unicodeScalars.first else { continue }  // a Character is never empty
            let isolated = Self.isIsolatedScript(first)
            var isWord = ch.isLetter || ch.isNumber || first.properties.generalCategory == .nonspacingMark
            if !isWord, previousWasWord, ch == "'" || ch == "’" || ch == "." && chars[safe: i - 1]?.isNumber == true,
                let next = chars[safe: i + 1], next.isLetter || next.isNumber
            {
                isWord = true  // don't, l'homme, 3.14
            }
            if isWord && !isolated {
                if current == nil { current = offset }
            } else {
                if let c = current { tokens.append(Token(range: c..<offset)) }
                current = nil
                if isWord { tokens.append(Token(range: offset..<(offset + n))) }
            }
            previousWasWord = isWord && !isolated
            offset += n
        }
        if let c = current { tokens.append(Token(range: c..<offset)) }
        boundaries.append(offset)
    }

    private static func isIsolatedScript(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0x2E80...0x2FDF, 0x3040...0x30FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xF900...0xFAFF,
            0x20000...0x3FFFF, 0x0E00...0x0EFF, 0x1780...0x17FF, 0x1000...0x109F, 0x31F0...0x31FF:
            return true
        default:
            return false
        }
    }

    /// Records that the engine started speaking text `textRange` at `sample`.
    /// `repaired` says the engine's time for it was moved into the audio: the mark is then
    /// flagged as estimated.
    mutating func anchor(_ textRange: Range<Int>, sample: Int, repaired: Bool = false, silences: [Range<Int>]) {
        guard !finished else { return }
        let lo = max(textRange.lowerBound, range.lowerBound), hi = min(textRange.upperBound, range.upperBound)
        guard lo < hi else { return }
        // The token containing the start, else the first token starting inside the range.
        var k = tokenIndex(containing: lo)
        if k == nil, let j = firstToken(startingAtOrAfter: lo), tokens[j].range.lowerBound < hi { k = j }
        if k == nil {
            // Something the engine speaks that is not a word token (a symbol, an emoji): give it
            // its own mark if it is visible text, expanded to whole grapheme clusters.
            // Without the spaces around it (the engine's length can run over them), as
            // sentences are trimmed.
            var g = graphemeRange(lo..<hi)
            func isBlank(_ cluster: Range<Int>) -> Bool { scalars[cluster].allSatisfy { $0.properties.isWhitespace } }
            while !g.isEmpty, case let first = graphemeRange(g.lowerBound..<(g.lowerBound + 1)), isBlank(first) {
                g = first.upperBound..<max(first.upperBound, g.upperBound)
            }
            while !g.isEmpty, case let last = graphemeRange((g.upperBound - 1)..<g.upperBound), isBlank(last) {
                g = g.lowerBound..<max(g.lowerBound, last.lowerBound)
            }
            guard !g.isEmpty else { return }
            // Like a word, it ends at the first blank (the engine's length can be anything).
            var end = g.lowerBound
            while end < g.upperBound, case let cluster = graphemeRange(end..<(end + 1)), !isBlank(cluster) { end = cluster.upperBound }
            g = g.lowerBound..<end
            let at = firstToken(startingAtOrAfter: g.lowerBound) ?? tokens.count
            guard at >= emitted, at > (lastAnchor ?? -1), at == tokens.count || tokens[at].range.lowerBound >= g.upperBound else { return }
            if at > 0, tokens[at - 1].range.upperBound > g.lowerBound { return }
            tokens.insert(Token(range: g), at: at)
            if let a = lastAnchor, a >= at { lastAnchor = a + 1 }
            k = at
        }
        guard let k, k >= emitted, tokens[k].start == nil else { return }
        if let a = lastAnchor, k < a { return }
        let floor = lastAnchor.flatMap { tokens[$0].start } ?? startSample
        let start = max(sample, floor)
        tokens[k].start = start
        tokens[k].estimated = repaired || sample < floor
        interpolate(upTo: k, endSample: start)
        lastAnchor = k
        finalize(upTo: k, silences: silences)
    }

    /// Records the phonemes the engine spoke the word at text offset `offset` with (they follow
    /// its anchor): kept with its token until it is final, dropped for one already final.
    mutating func addPhonemes(_ ipa: String, at offset: Int) {
        guard !finished, let k = tokenIndex(containing: offset) ?? lastAnchor, k >= emitted, k < tokens.count else { return }
        tokens[k].phonemes += ipa
    }

    /// Closes the run: tokens never reported get timings spread over the remaining speech.
    mutating func finish(endSample: Int, silences: [Range<Int>]) {
        guard !finished else { return }
        var speechEnd = endSample
        if let last = silences.last, last.upperBound >= endSample,
            last.lowerBound >= (lastAnchor.flatMap { tokens[$0].start } ?? startSample)
        {
            speechEnd = last.lowerBound
        }
        interpolate(upTo: tokens.count, endSample: speechEnd)
        finalize(upTo: tokens.count, silences: silences, endSample: speechEnd)
        finished = true
    }

    /// Marks whose timing can no longer change, in text order.
    mutating func takeFinal() -> [Final] {
        defer { finalized.removeAll(keepingCapacity: true) }
        return finalized
    }

    // MARK: Internals

    /// Gives untimed tokens between the last anchor and `k` start times proportional to their length.
    private mutating func interpolate(upTo k: Int, endSample: Int) {
        let from = (lastAnchor ?? -1) + 1
        guard from < k else { return }
        let base = lastAnchor.flatMap { tokens[$0].start } ?? startSample
        let firstCounted = lastAnchor ?? from  // the anchor's own length takes its share too
        let lengths = (firstCounted..<k).map { tokens[$0].range.count }
        let total = max(1, lengths.reduce(0, +))
        var acc = lastAnchor == nil ? 0 : lengths[0]
        for (j, t) in (from..<k).enumerated() {
            let share = Double(acc) / Double(total)
            tokens[t].start = base + Int(Double(max(0, endSample - base)) * share)
            acc += lengths[j + (lastAnchor == nil ? 0 : 1)]
        }
    }

    private mutating func finalize(upTo k: Int, silences: [Range<Int>], endSample: Int? = nil) {
        while emitted < k {
            let t = tokens[emitted]
            let s = t.start ?? startSample
            let next = emitted + 1 < tokens.count ? (tokens[emitted + 1].start ?? endSample ?? s) : (endSample ?? s)
            var e = max(s, next)
            // Trim to the silence that precedes the next word.
            if let gap = silences.last(where: { $0.lowerBound > s && $0.lowerBound < e && $0.upperBound >= e - 110 }) {
                e = gap.lowerBound
            }
            finalized.append(Final(range: t.range, start: s, end: e, estimated: t.estimated, phonemes: t.phonemes))
            emitted += 1
        }
    }

    /// The start of the word token containing `offset`, else of the grapheme cluster
    /// containing it.
    func wordStart(containing offset: Int) -> Int {
        if let k = tokenIndex(containing: offset) { return tokens[k].range.lowerBound }
        guard range.contains(offset) else { return offset }
        return graphemeRange(offset..<offset).lowerBound
    }

    private func tokenIndex(containing offset: Int) -> Int? {
        guard let j = lastToken(startingAtOrBefore: offset), tokens[j].range.contains(offset) else { return nil }
        return j
    }

    private func lastToken(startingAtOrBefore offset: Int) -> Int? {
        var lo = 0, hi = tokens.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if tokens[mid].range.lowerBound <= offset { lo = mid + 1 } else { hi = mid }
        }
        return lo > 0 ? lo - 1 : nil
    }

    private func firstToken(startingAtOrAfter offset: Int) -> Int? {
        var lo = 0, hi = tokens.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if tokens[mid].range.lowerBound < offset { lo = mid + 1 } else { hi = mid }
        }
        return lo < tokens.count ? lo : nil
    }

    /// `r` widened to whole grapheme clusters of the run.
    private func graphemeRange(_ r: Range<Int>) -> Range<Int> {
        var lo = 0, hi = boundaries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if boundaries[mid] <= r.lowerBound { lo = mid + 1 } else { hi = mid }
        }
        let start = boundaries[max(0, lo - 1)]
        lo = 0; hi = boundaries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if boundaries[mid] < r.upperBound { lo = mid + 1 } else { hi = mid }
        }
        let end = boundaries[min(lo, boundaries.count - 1)]
        return start..<max(end, start)
    }
}

extension Array {
    subscript(safe index: Int) -> Element? {
        indices.contains(index) ? self[index] : nil
    }
}
