/// The text handed to the engine for one run, with a map from the engine's character
/// positions back to Unicode-scalar offsets in the utterance's spoken text.
///
/// The engine counts positions in Unicode scalars of the text it was given, including any
/// markup Parla added (such as the SSML wrapper used to spell a run out). Every engine scalar
/// either comes from the caller's text (an identity piece) or is Parla's own markup.
package struct EngineInput: Sendable {
    /// The text to pass to the engine.
    package private(set) var text: String = ""
    /// Whether `text` is SSML that Parla generated.
    package let isMarkup: Bool

    /// Maps engine scalars `engineStart..<engineStart+engineCount` to text offsets
    /// `textStart..<textStart+count`: one to one when the counts are equal, else every engine
    /// scalar to `textStart` (an escape: several engine scalars for one text scalar; a
    /// composed cluster: fewer engine scalars than text scalars).
    private struct Piece {
        var engineStart: Int
        var textStart: Int
        var count: Int
        var engineCount: Int
    }
    private var pieces: [Piece] = []
    private var engineLength = 0

    /// Builds the engine input for `range` (scalar offsets) of `text`: the text itself, or an
    /// SSML `say-as characters` wrapper around it when `spellOut` is set.
    package init(text: Substring.UnicodeScalarView, range: Range<Int>, spellOut: Bool) {
        isMarkup = spellOut
        if spellOut {
            let open = "<say-as interpret-as=\"characters\">", close = "</say-as>"
            appendMarkup("<speak>" + open)
            var inSayAs = true
            var offset = range.lowerBound
            var plainStart = offset
            var plain = String.UnicodeScalarView()
            for s in text {
                let escape: String? = s == "&" ? "&amp;" : s == "<" ? "&lt;" : s == ">" ? "&gt;" : nil
                // Emoji are read by name, outside the spelling: espeak-ng 1.51 crashes when it
                // spells one in most voices (76 crashes in 256 runs of 8 emoji in 8 voices, none
                // with the emoji outside say-as).
                let pictographic = Self.isPictographic(s, continuing: !inSayAs)
                if pictographic == inSayAs, !Self.isLeftOut(s) {
                    appendText(plain, at: plainStart)
                    plain = String.UnicodeScalarView()
                    plainStart = offset
                    appendMarkup(inSayAs ? close : open)
                    inSayAs.toggle()
                }
                if Self.isLeftOut(s) {
                    appendText(plain, at: plainStart)
                    plain = String.UnicodeScalarView()
                    plainStart = offset + 1
                } else if let escape {
                    appendText(plain, at: plainStart)
                    plain = String.UnicodeScalarView()
                    appendEscape(escape, at: offset)
                    plainStart = offset + 1
                } else {
                    plain.append(s)
                }
                offset += 1
            }
            appendText(plain, at: plainStart)
            appendMarkup((inSayAs ? close : "") + "</speak>")
        } else {
            let scalars = Array(text).map(Self.engineScalar)
            var breaks = Self.engineBreaks(scalars)[...]
            var clauses = Self.myanmarClauseBreaks(scalars)[...]
            var from = 0
            for i in scalars.indices {
                if clauses.first == i {
                    clauses.removeFirst()
                    appendText(String.UnicodeScalarView(scalars[from..<i]), at: range.lowerBound + from)
                    appendMarkup(",")
                    from = i
                }
                if breaks.first == i {
                    breaks.removeFirst()
                    appendText(String.UnicodeScalarView(scalars[from..<i]), at: range.lowerBound + from)
                    appendMarkup(" ")
                    from = i
                }
                if Self.isLeftOut(scalars[i]) {
                    appendText(String.UnicodeScalarView(scalars[from..<i]), at: range.lowerBound + from)
                    from = i + 1
                }
            }
            appendText(String.UnicodeScalarView(scalars[from...]), at: range.lowerBound + from)
        }
    }

    /// Scalars the engine is not given: emoji variation selectors (U+FE0E, U+FE0F) and skin
    /// tone modifiers (U+1F3FB–1F3FF). They only choose how an emoji is drawn, and espeak-ng
    /// 1.51 reads memory it never wrote when one follows an emoji in most non-English voices
    /// (`❤️क्षत्रिय` crashed 1 time in 3 with the Hindi voice). Measured with 13 emoji before
    /// 6 scripts in 7 voices, 4 times each: 132 crashes as they are, none with these left out.
    /// Whether `s` is part of an emoji: an emoji character, or (`continuing` one) a joiner,
    /// keycap or tag character.
    static func isPictographic(_ s: Unicode.Scalar, continuing: Bool) -> Bool {
        switch s.value {
        case 0x200D, 0x20E3, 0xE0020...0xE007F: return continuing
        case 0..<0x80: return false  // digits, # and * are Emoji too, but are spelled
        default: return s.properties.isEmoji
        }
    }

    static func isRegionalIndicator(_ s: Unicode.Scalar) -> Bool { (0x1F1E6...0x1F1FF).contains(s.value) }

    static func isLeftOut(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0xFE0E, 0xFE0F, 0x1F3FB...0x1F3FF: return true
        default: return false
        }
    }

    /// The scalar the engine is given for `s`: Myanmar's section signs (U+104A `၊`, a comma;
    /// U+104B `။`, a full stop) as the ASCII punctuation espeak-ng 1.51 knows. It does not
    /// end a clause at them, and a Myanmar clause of more than about 150 bytes overflows a
    /// word buffer (`strcpy` of the rest of the clause: `*** buffer overflow detected ***`),
    /// so a LibreOffice message of three short phrases killed the engine. One scalar for one,
    /// so offsets are unchanged.
    static func engineScalar(_ s: Unicode.Scalar) -> Unicode.Scalar {
        switch s.value {
        case 0x104A: ","
        case 0x104B: "."
        default: s
        }
    }

    /// Where a comma goes into the engine's text (before these offsets, spaces) so that no
    /// clause of Myanmar text is longer than 100 UTF-8 bytes: espeak-ng 1.51 overflows a
    /// buffer on longer ones (six words of `ဖျက်ထားခြင်း`, 222 bytes, crash every time; four,
    /// 148 bytes, do not). A clause ends at ASCII clause punctuation (after
    /// ``engineScalar(_:)``) or a line break. The comma goes at the last space before the limit;
    /// a clause with no space in it is cut before a scalar that is not a combining mark.
    static func myanmarClauseBreaks(_ scalars: [Unicode.Scalar]) -> [Int] {
        let limit = 100
        var out: [Int] = []
        var bytes = 0  // Myanmar bytes since the clause began (or the last cut)
        var afterSpace = 0  // of which, after the last space
        var lastSpace: Int?
        for (i, s) in scalars.enumerated() {
            if ",.;:!?\n".unicodeScalars.contains(s) {
                (bytes, afterSpace, lastSpace) = (0, 0, nil)
                continue
            }
            if s == " " {
                (lastSpace, afterSpace) = (i, 0)
                continue
            }
            guard (0x1000...0x109F).contains(s.value) || (0xA9E0...0xA9FF).contains(s.value) || (0xAA60...0xAA7F).contains(s.value)
            else { continue }
            let n = String(s).utf8.count
            bytes += n
            afterSpace += n
            guard bytes > limit else { continue }
            if let space = lastSpace, afterSpace < bytes {
                out.append(space)
                (bytes, lastSpace) = (afterSpace, nil)
            } else if ![.nonspacingMark, .spacingMark, .enclosingMark].contains(s.properties.generalCategory) {
                out.append(i)
                (bytes, afterSpace, lastSpace) = (n, n, nil)
            }
        }
        return out
    }

    /// Where a space goes into the engine's text (before these offsets) to keep espeak-ng 1.51
    /// from crashing: see ``abbreviationBreaks(_:)`` and ``symbolRunBreaks(_:)``.
    static func engineBreaks(_ scalars: [Unicode.Scalar]) -> [Int] {
        let a = abbreviationBreaks(scalars)
        let b = symbolRunBreaks(scalars), c = longWordBreaks(scalars, after: a), d = emojiBreaks(scalars)
        if b.isEmpty && c.isEmpty && d.isEmpty { return a }
        return Array(Set(a + b + c + d)).sorted()
    }

    /// Spaces around every emoji sequence that touches other text (`👦„क`, `💻ւ`).
    ///
    /// espeak-ng 1.51 reads memory it never wrote when an emoji is followed at once by
    /// punctuation or letters in most voices that are not English. Measured over 7 emoji, 10
    /// joining characters (none, quotes, dot, comma, hyphen, ZWJ…) and 8 scripts in 6 voices,
    /// 3 runs each: 446 combinations crashed as they were, none with the emoji set apart.
    static func emojiBreaks(_ scalars: [Unicode.Scalar]) -> [Int] {
        var cuts: [Int] = []
        var i = 0
        while i < scalars.count {
            guard isPictographic(scalars[i], continuing: false) else { i += 1; continue }
            let start = i
            var flagHalf = isRegionalIndicator(scalars[i])
            i += 1
            // One emoji: joined by ZWJ, tags and keycaps (and the selectors and skin tones
            // that are left out); a flag is two regional indicators. The next emoji is apart.
            while i < scalars.count {
                let s = scalars[i]
                if s.value == 0x200D, i + 1 < scalars.count, isPictographic(scalars[i + 1], continuing: false) {
                    i += 2
                } else if (0xE0020...0xE007F).contains(s.value) || s.value == 0x20E3 || isLeftOut(s) {
                    i += 1
                } else if flagHalf, isRegionalIndicator(s) {
                    flagHalf = false
                    i += 1
                } else {
                    break
                }
            }
            if start > 0, !scalars[start - 1].properties.isWhitespace { cuts.append(start) }
            if i < scalars.count, !scalars[i].properties.isWhitespace { cuts.append(i) }
        }
        return cuts
    }

    /// Breaks in words longer than 60 UTF-8 bytes that hold a `.` or follow a word that does
    /// (`.g.rhythmrhythm…`, `a.क्षत्रियक्षत्रिय…`): espeak-ng 1.51 copies such a word into the
    /// same 80-byte buffer as abbreviations (see ``abbreviationBreaks(_:)``), and a space
    /// after the dot does not always keep it out. Pieces of at most 60 bytes, cut between
    /// grapheme clusters' bases, never reach it. `cuts` (offsets where a space already goes)
    /// separate words too. With ``abbreviationBreaks(_:)``: 512 of 1,500 texts built to
    /// trigger the bug crashed as they were, in random voices, and none once cut. Other long
    /// words (a CJK paragraph, a URL) are left whole.
    static func longWordBreaks(_ scalars: [Unicode.Scalar], after cuts: [Int]) -> [Int] {
        let limit = 60
        var words: [Range<Int>] = []
        var cut = cuts[...]
        var i = 0
        while i < scalars.count {
            if scalars[i].properties.isWhitespace { i += 1; continue }
            let start = i
            i += 1
            while let c = cut.first, c <= start { cut.removeFirst() }
            while i < scalars.count, !scalars[i].properties.isWhitespace, cut.first != i { i += 1 }
            words.append(start..<i)
        }
        var out: [Int] = []
        for (k, w) in words.enumerated() {
            guard scalars[w].reduce(0, { $0 + $1.utf8.count }) > limit else { continue }
            guard scalars[w].contains(".") || (k > 0 && scalars[words[k - 1]].contains(".")) else { continue }
            var bytes = 0
            for x in w {
                let n = scalars[x].utf8.count
                if bytes + n > limit, x > w.lowerBound {
                    switch scalars[x].properties.generalCategory {
                    case .nonspacingMark, .spacingMark, .enclosingMark: break  // stays with its base
                    default:
                        out.append(x)
                        bytes = 0
                    }
                }
                bytes += n
            }
        }
        return out
    }

    /// Breaks in runs of one repeated symbol (`**`, `==`, `-----`, `%%`): a space between the
    /// symbols, and after the run when a letter follows it at once.
    ///
    /// espeak-ng 1.51 crashes on such runs in several voices (`**` alone, 3 times in 6 with the
    /// Hindi voice; `-----नमस्ते` in almost every voice). Measured over 20 symbols, runs of 2 to
    /// 12 before, after and between words in 9 scripts, in 5 voices: 159 combinations crash as
    /// they are, none with these spaces. Only dashes, mathematical, currency and other
    /// symbols, and `* % # & @ / \ _`, are spaced: sentence punctuation, quotes and brackets
    /// never crashed, and spacing `...` would change how it is read.
    static func symbolRunBreaks(_ scalars: [Unicode.Scalar]) -> [Int] {
        func isSymbol(_ s: Unicode.Scalar) -> Bool {
            switch s.properties.generalCategory {
            case .mathSymbol, .currencySymbol, .modifierSymbol, .otherSymbol, .dashPunctuation: return true
            default: return "*%#&@/\\_".unicodeScalars.contains(s)
            }
        }
        func isLetter(_ s: Unicode.Scalar) -> Bool {
            switch s.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
                .nonspacingMark, .spacingMark, .enclosingMark, .decimalNumber:
                return true
            default:
                return false
            }
        }
        var cuts: [Int] = []
        var i = 1
        while i < scalars.count {
            let s = scalars[i - 1]
            if isSymbol(s) {
                if scalars[i] == s {
                    cuts.append(i)
                } else if i >= 2, scalars[i - 2] == s, isLetter(scalars[i]) {
                    cuts.append(i)
                }
            }
            i += 1
        }
        return cuts
    }

    /// Where a space must go into the engine's text (after these offsets) to keep espeak-ng
    /// 1.51 from overflowing a stack buffer.
    ///
    /// espeak-ng copies a chain of letters joined by dots (`a.b.c`, `U.S.A.`) into an 80-byte
    /// buffer without checking its length (`CheckDottedAbbrev`; fixed upstream in June 2026,
    /// after 1.52), so `m.` before 28 Hangul syllables, or `a.` repeated 85 times, smashes the
    /// stack and kills the process. A space after each such dot makes every letter a word of
    /// its own, which espeak-ng reads the same way. Real abbreviations are left alone: only
    /// chains of words joined by dots that hold more than 16 letters, or a word with a dot
    /// longer than 24 bytes, are cut. (Measured against the library with 2,800 texts built
    /// to trigger it, over eight voices: about 30 % crash as they are, none once cut.)
    static func abbreviationBreaks(_ scalars: [Unicode.Scalar]) -> [Int] {
        func isLetter(_ s: Unicode.Scalar) -> Bool {
            switch s.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
                .nonspacingMark, .spacingMark, .enclosingMark:
                return true
            default:
                return false
            }
        }
        // A dot that joins: after a letter, before something other than a space, in one word.
        func joiningDots(_ word: Range<Int>) -> [Int] {
            var dots: [Int] = []
            var i = word.lowerBound + 1
            while i < word.upperBound - 1 {
                if scalars[i] == ".", isLetter(scalars[i - 1]) { dots.append(i + 1) }
                i += 1
            }
            return dots
        }
        var words: [Range<Int>] = []
        var i = 0
        while i < scalars.count {
            if scalars[i].properties.isWhitespace { i += 1; continue }
            let start = i
            while i < scalars.count, !scalars[i].properties.isWhitespace { i += 1 }
            words.append(start..<i)
        }
        var cuts: [Int] = []
        var w = 0
        while w < words.count {
            guard !joiningDots(words[w]).isEmpty else { w += 1; continue }
            // A chain: consecutive words (separated by spaces only) with joining dots.
            var end = w
            var letters = 0
            var long = false
            while end < words.count {
                let dots = joiningDots(words[end])
                if dots.isEmpty { break }
                letters += scalars[words[end]].lazy.filter(isLetter).count
                long = long || scalars[words[end]].reduce(0) { $0 + $1.utf8.count } > 24
                end += 1
            }
            if letters > 16 || long {
                for k in w..<end { cuts += joiningDots(words[k]) }
            }
            w = end
        }
        return cuts
    }

    /// Appends text scalars starting at text offset `textStart`, decomposed letters composed:
    /// a stretch that composition shortens becomes a piece of its own, so that every engine position in it
    /// maps to the stretch's start (see ``CanonicalComposition``).
    private mutating func appendText(_ scalars: String.UnicodeScalarView, at textStart: Int) {
        var from = scalars.startIndex, fromOffset = 0
        for change in CanonicalComposition.changes(in: scalars) {
            let to = scalars.index(from, offsetBy: change.range.lowerBound - fromOffset)
            appendUnchanged(String.UnicodeScalarView(scalars[from..<to]), at: textStart + fromOffset)
            pieces.append(
                Piece(
                    engineStart: engineLength, textStart: textStart + change.range.lowerBound, count: change.range.count,
                    engineCount: change.composed.count))
            text.unicodeScalars.append(contentsOf: change.composed)
            engineLength += change.composed.count
            from = scalars.index(to, offsetBy: change.range.count)
            fromOffset = change.range.upperBound
        }
        appendUnchanged(String.UnicodeScalarView(scalars[from...]), at: textStart + fromOffset)
    }

    private mutating func appendUnchanged(_ scalars: String.UnicodeScalarView, at textStart: Int) {
        guard !scalars.isEmpty else { return }
        let n = scalars.count
        pieces.append(Piece(engineStart: engineLength, textStart: textStart, count: n, engineCount: n))
        text.unicodeScalars.append(contentsOf: scalars)
        engineLength += n
    }

    private mutating func appendEscape(_ escape: String, at textStart: Int) {
        let n = escape.unicodeScalars.count
        pieces.append(Piece(engineStart: engineLength, textStart: textStart, count: 1, engineCount: n))
        text += escape
        engineLength += n
    }

    private mutating func appendMarkup(_ markup: String) {
        text += markup
        engineLength += markup.unicodeScalars.count
    }

    /// The text offset of the engine's 0-based scalar position `position`. Positions inside
    /// Parla's markup map to the nearest following text (or the end of the last piece).
    package func textOffset(ofEnginePosition position: Int) -> Int? {
        guard !pieces.isEmpty else { return nil }
        var lo = 0, hi = pieces.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if pieces[mid].engineStart <= position { lo = mid + 1 } else { hi = mid }
        }
        // pieces[lo-1] is the last piece starting at or before position.
        if lo > 0 {
            let p = pieces[lo - 1]
            if position < p.engineStart + p.engineCount {
                return p.count == p.engineCount ? p.textStart + (position - p.engineStart) : p.textStart
            }
            if lo == pieces.count { return p.textStart + p.count - 1 }
        }
        return pieces[lo].textStart
    }
}
