import FoundationEssentials
import RealModule

/// A stretch of text in one language, as found by ``LanguageDetector``.
public struct DetectedSegment: Sendable, Hashable {
    /// Unicode-scalar offsets into the text, end exclusive, on grapheme-cluster boundaries.
    public var range: Range<Int>
    /// The same range as indices of the text.
    public var indices: Range<String.Index>
    /// The language, or nil where the text has no letters (digits, punctuation, emoji only).
    public var language: LanguageTag?
    /// How sure the detector is, 0–1: a tempered naive-Bayes posterior for scripts several
    /// languages share, 1 for a script only one language uses.
    public var confidence: Double
    /// The ISO 15924 code of the segment's letters ("Latn", "Grek", "Hani", ...), nil for none.
    public var script: String?
    /// How many letters (scalars of the segment's script) it holds.
    public var letterCount: Int
}

/// The languages a user reads, most preferred first, used to break ties the text cannot.
public struct LanguagePreferences: Sendable, Hashable {
    public var languages: [LanguageTag]

    public init(_ languages: [LanguageTag]) { self.languages = languages }
}

/// Splits text into runs of one language: first by Unicode script, then, within scripts that
/// several languages share, by a trained character n-gram model with a penalty for switching
/// language, so that a short ambiguous stretch keeps the language of its neighbours while a
/// real switch (a French sentence inside English text) is kept.
///
/// Characters without a script of their own join a neighbouring run: combining marks stay with
/// their base; a Common character listed with Script_Extensions joins the run of a script it is
/// used with; other spaces, digits, punctuation and symbols between two runs are cut after the
/// last whitespace between them, so trailing punctuation stays with the text before it and
/// leading punctuation, quotes and digits go with the text after it (with no whitespace, an
/// opening bracket or quote starts the next run). Text of no script at all is one segment with
/// no language.
public struct LanguageDetector: Sendable {
    /// The trained model.
    package let model: LanguageModel
    /// The language of each script when nothing else decides (ISO 15924 code → language),
    /// from `voices/defaults.json`.
    public var scriptDefaults: [String: LanguageTag]
    /// The user's languages: they win ties the text cannot separate.
    public var preferences: LanguagePreferences
    /// When set, only these languages (primary subtags) are considered.
    public var candidates: Set<String>?

    /// Tuning constants, in nats (chosen on the dev split; see scripts/langid).
    static let switchCost: Float = 8
    static let switchCostAtSentence: Float = 3
    static let otherLanguageCost: Float = 3
    static let scriptDefaultCost: Float = 1
    static let preferenceStep: Float = 0.1
    static let temperature: Float = 1
    /// Scale of a word's n-gram evidence, after dividing by the n-gram order.
    static let emissionWeight: Float = 0.5
    /// The fit limit, in nats per n-gram per nat of ln(1 + languages in the group): a base, a part
    /// that shrinks with the square root of the n-gram count, and how fast confidence falls
    /// beyond it (see `fit(emission:ngrams:group:language:)`).
    static let fitBase: Float = 0.38
    static let fitSlope: Float = 0.625
    static let fitWidth: Float = 0.25

    package init(
        model: LanguageModel, scriptDefaults: [String: LanguageTag] = [:], preferences: LanguagePreferences = .init([]),
        candidates: Set<String>? = nil
    ) {
        self.model = model
        self.scriptDefaults = scriptDefaults
        self.preferences = preferences
        self.candidates = candidates
    }

    /// The main language of `text`: the one with the most letters (Han, Kana and Hangul count
    /// double, as one of them carries about as much as two alphabetic letters), nil if none.
    public func mainLanguage(of text: String) -> LanguageTag? {
        var weight: [LanguageTag: Int] = [:]
        for s in detect(text) {
            guard let l = s.language else { continue }
            let w = ["Hani", "Hang", "Jpan"].contains(s.script ?? "") ? 2 : 1
            weight[l, default: 0] += s.letterCount * w
        }
        return weight.max { a, b in a.value != b.value ? a.value < b.value : a.key > b.key }?.key
    }

    /// The language segments of `text`, in order, covering all of it.
    ///
    /// Decomposed text (a letter, then its marks) is judged composed, as the model was
    /// trained (`CanonicalComposition`): the segments' offsets are still `text`'s.
    public func detect(_ text: String) -> [DetectedSegment] {
        guard let composed = CanonicalComposition.recomposed(text) else {
            let values = text.unicodeScalars.map(\.value)
            return align(segments(values), in: text, count: values.count)
        }
        var raw = segments(composed.scalars)
        for i in raw.indices {
            let r = raw[i].range
            raw[i].range = composed.originalOffset(of: r.lowerBound)..<composed.originalOffset(of: r.upperBound)
        }
        return align(raw, in: text, count: composed.originalCount)
    }

    // MARK: - Script runs

    struct RawSegment {
        var range: Range<Int>
        var language: LanguageTag?
        var confidence: Double
        var script: String?
        var letters: Int
    }

    /// Keys: a script group (model group index + 1000), a script without a model (its raw
    /// value), or neutral (-1) / inherited (-2).
    private func key(of script: UnicodeScript) -> Int32 {
        if let g = model.groupIndex(of: script) { return 1000 + Int32(g) }
        return Int32(script.rawValue)
    }

    struct Run {
        var key: Int32
        var start: Int
        var end: Int
        var strongStart: Int
        var strongEnd: Int
        var script: UnicodeScript
        var letters: Int
    }

    /// The script of each scalar, except that a stretch of one or two letters of another
    /// script inside a word takes the word's script (the one most of its letters are in), when
    /// the letters on both sides of it (at least two) are in that script. Chuvash is often typed with the Latin ă, ĕ and ç inside
    /// Cyrillic words ("калаçатăп"); as separate runs, each such word fell into three segments
    /// and three voices. A longer stretch ("Microsoftовский") keeps its own script.
    static func scripts(of v: [UInt32]) -> [UnicodeScript] {
        var scripts = v.map(UnicodeScript.of)
        for url in urls(in: v) { for k in url { scripts[k] = .common } }
        var i = 0
        while i < scripts.count {
            guard !scripts[i].isNeutral else { i += 1; continue }
            // A word: letters with the marks that follow them.
            var end = i + 1
            var mixed = false
            while end < scripts.count, scripts[end] == .inherited || !scripts[end].isNeutral {
                if scripts[end] != scripts[i] && scripts[end] != .inherited { mixed = true }
                end += 1
            }
            guard mixed else {
                i = end
                continue
            }
            // Its runs of one script (a mark belongs to the letter before it).
            var runs: [(script: UnicodeScript, range: Range<Int>, letters: Int)] = []
            for k in i..<end where scripts[k] != .inherited {
                if let last = runs.last, last.script == scripts[k] {
                    runs[runs.count - 1].range = last.range.lowerBound..<(k + 1)
                    runs[runs.count - 1].letters += 1
                } else {
                    runs.append((scripts[k], k..<(k + 1), 1))
                }
            }
            if runs.count > 1 {
                // The word's script: the one most of its letters are in.
                var count: [UnicodeScript: Int] = [:]
                for run in runs { count[run.script, default: 0] += run.letters }
                let main = count.max { $0.value < $1.value || ($0.value == $1.value && $0.key.rawValue > $1.key.rawValue) }?.key
                for r in runs.indices where runs[r].letters <= 2 && runs[r].script != main {
                    let sides = [r > 0 ? runs[r - 1] : nil, r + 1 < runs.count ? runs[r + 1] : nil].compactMap { $0 }
                    guard let main, sides.allSatisfy({ $0.script == main }), sides.reduce(0, { $0 + $1.letters }) >= 2 else { continue }
                    for k in runs[r].range where scripts[k] == runs[r].script { scripts[k] = main }
                }
            }
            i = end
        }
        return scripts
    }

    /// The web addresses in `v` (from `http://`, `https://`, `ftp://` or `www.` at the start of
    /// a word, to the next space, quote or angle bracket): they are in no language, and their
    /// letters ("www gnu org software coreutils") outweighed a short sentence around them, so
    /// "Tài liệu đầy đủ có tại: <https://www.gnu.org/software/coreutils/head>" came out
    /// Norwegian. Their letters count as neutral characters.
    static func urls(in v: [UInt32]) -> [Range<Int>] {
        var out: [Range<Int>] = []
        var i = 0
        while i < v.count {
            // h, f or w first (the cheap test, as this looks at every scalar), and only at the
            // start of a word: "awww." is not an address.
            let first = Self.asciiLower(v[i])
            guard first == 0x68 || first == 0x66 || first == 0x77,
                i == 0 || (UnicodeScript.of(v[i - 1]) == .common && !(0x30...0x39).contains(v[i - 1])),
                let start = Self.addressStarts.first(where: { p in
                    p.count <= v.count - i && p.indices.allSatisfy { k in Self.asciiLower(v[i + k]) == p[k] }
                })
            else {
                i += 1
                continue
            }
            var end = i + start.count
            while end < v.count, !Self.endsAddress(v[end]) { end += 1 }
            out.append(i..<end)
            i = end
        }
        return out
    }

    private static let addressStarts: [[UInt32]] = ["http://", "https://", "ftp://", "www."].map { $0.unicodeScalars.map(\.value) }

    private static func asciiLower(_ c: UInt32) -> UInt32 { (0x41...0x5A).contains(c) ? c + 0x20 : c }

    private static func endsAddress(_ c: UInt32) -> Bool {
        switch c {
        case 0x20, 0x09, 0x0A, 0x0D, 0x22, 0x27, 0x3C, 0x3E, 0xA0, 0x3000, 0x201C, 0x201D, 0x2018, 0x2019, 0xAB, 0xBB: return true
        default: return false
        }
    }

    func segments(_ v: [UInt32]) -> [RawSegment] {
        let n = v.count
        guard n > 0 else { return [] }
        let scripts = Self.scripts(of: v)
        var keys = [Int32](repeating: -1, count: n)
        var runs: [Run] = []
        var lastKey: Int32 = -1
        for i in 0..<n {
            let s = scripts[i]
            var k: Int32
            if s == .inherited {
                k = -2
            } else if s.isNeutral {
                k = -1
                if v[i] >= 0x80, let scalar = Unicode.Scalar(v[i]), let ext = UnicodeScript.extensions(of: scalar) {
                    let ks = ext.map { key(of: $0) }
                    if ks.contains(lastKey) {
                        k = lastKey
                    } else if let first = ks.first, ks.allSatisfy({ $0 == first }) {
                        k = first
                    }
                }
            } else {
                k = key(of: s)
            }
            keys[i] = k
            guard k >= 0 else { continue }
            let isLetter = !s.isNeutral
            if let last = runs.last, last.key == k {
                runs[runs.count - 1].strongEnd = i + 1
            } else {
                runs.append(Run(key: k, start: i, end: i + 1, strongStart: i, strongEnd: i + 1, script: .unknown, letters: 0))
            }
            if isLetter {
                if runs[runs.count - 1].letters == 0 { runs[runs.count - 1].script = s }
                runs[runs.count - 1].letters += 1
            }
            lastKey = k
        }
        guard !runs.isEmpty else {
            return [RawSegment(range: 0..<n, language: nil, confidence: 0, script: nil, letters: 0)]
        }
        // Extend runs over the neutral characters around them.
        runs[0].start = 0
        runs[runs.count - 1].end = n
        for j in 0..<(runs.count - 1) {
            let cut = Self.cut(v, keys, from: runs[j].strongEnd, to: runs[j + 1].strongStart)
            runs[j].end = cut
            runs[j + 1].start = cut
        }
        var labelled: [Int: GroupLabels] = [:]
        for run in runs where run.key >= 1000 && labelled[Int(run.key - 1000)] == nil {
            labelled[Int(run.key - 1000)] = labelGroup(v, scripts, runs: runs, group: Int(run.key - 1000))
        }
        var out: [RawSegment] = []
        for (r, run) in runs.enumerated() {
            if run.key >= 1000 {
                let g = Int(run.key - 1000)
                // Every group key has its labels (made above for each group met); an empty
                // table would label the run as unknown rather than trap.
                out += runSegments(v, keys, run: run, runIndex: r, group: g, labels: labelled[g] ?? GroupLabels())
            } else {
                let code = run.script.code
                let language = scriptDefaults[code].flatMap { allowed($0) ? $0 : nil }
                out.append(
                    RawSegment(
                        range: run.start..<run.end, language: language, confidence: language == nil ? 0 : 1,
                        script: run.letters > 0 ? code : nil, letters: run.letters))
            }
        }
        // Merge neighbours in the same language.
        var merged: [RawSegment] = []
        for s in out {
            if var last = merged.last, last.language == s.language {
                let total = last.letters + s.letters
                last.confidence =
                    total > 0
                    ? (last.confidence * Double(last.letters) + s.confidence * Double(s.letters)) / Double(total)
                    : max(last.confidence, s.confidence)
                last.range = last.range.lowerBound..<s.range.upperBound
                if last.letters < s.letters { last.script = s.script }
                last.letters = total
                merged[merged.count - 1] = last
            } else {
                merged.append(s)
            }
        }
        return merged
    }

    /// Where to split the neutral stretch `lo..<hi` between two runs (see the type's
    /// documentation for the rule).
    static func cut(_ v: [UInt32], _ keys: [Int32], from lo: Int, to hi: Int) -> Int {
        var start = lo
        // Combining marks stay with their base.
        while start < hi && keys[start] == -2 { start += 1 }
        var lastSpace = -1
        for i in start..<hi where isSpace(v[i]) { lastSpace = i }
        if lastSpace >= 0 { return lastSpace + 1 }
        for i in start..<hi where isOpening(v[i]) { return i }
        return hi
    }

    @inline(__always)
    static func isSpace(_ v: UInt32) -> Bool {
        if v < 0x80 { return v == 0x20 || (v >= 0x09 && v <= 0x0D) }
        return Unicode.Scalar(v)?.properties.isWhitespace ?? false
    }

    static func isOpening(_ v: UInt32) -> Bool {
        guard let s = Unicode.Scalar(v) else { return false }
        switch s.properties.generalCategory {
        case .openPunctuation, .initialPunctuation: return true
        default: return v == 0x22 || v == 0x27 || v == 0xBF || v == 0xA1  // " ' ¿ ¡
        }
    }

    /// Where switching language is cheaper: sentence ends and clause breaks (`;`, `:`, line
    /// ends, danda). Wider than ``TimelineBuilder/endsSentence(_:)``, which decides where the
    /// engine pauses for a sentence.
    static func endsSentence(_ v: UInt32) -> Bool {
        switch v {
        case 0x2E, 0x21, 0x3F, 0x3B, 0x3A, 0x0A, 0x0D, 0x3002, 0xFF01, 0xFF1F, 0x061F, 0x06D4, 0x0964, 0x0965, 0x037E: return true
        default: return false
        }
    }

    private func allowed(_ tag: LanguageTag) -> Bool {
        candidates.map { $0.contains(tag.language) } ?? true
    }

    // MARK: - Grapheme alignment

    /// Moves every boundary forward to the next grapheme-cluster boundary and attaches string
    /// indices.
    func align(_ raw: [RawSegment], in text: String, count: Int) -> [DetectedSegment] {
        let scalars = text.unicodeScalars
        var out: [DetectedSegment] = []
        var index = scalars.startIndex
        var offset = 0
        var start = (offset: 0, index: scalars.startIndex)
        for (k, s) in raw.enumerated() {
            var end = s.range.upperBound
            if k == raw.count - 1 {
                end = count
                index = scalars.endIndex
                offset = end
            } else {
                if end < start.offset { continue }
                index = scalars.index(index, offsetBy: end - offset)
                offset = end
                while index < scalars.endIndex, index.samePosition(in: text) == nil {
                    index = scalars.index(after: index)
                    offset += 1
                }
            }
            guard offset > start.offset || (raw.count == 1) else { continue }
            if offset > start.offset || out.isEmpty {
                out.append(
                    DetectedSegment(
                        range: start.offset..<offset, indices: start.index..<index, language: s.language, confidence: s.confidence,
                        script: s.script, letterCount: s.letters))
            }
            start = (offset, index)
        }
        return out
    }
}
