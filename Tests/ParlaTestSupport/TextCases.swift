/// Random texts made of the pieces that break speech timelines: words in many scripts,
/// quotes and sentence punctuation of every kind, initials and abbreviations, numbers with
/// separators, emoji sequences, combining marks, zero-width and bidi controls, tabs, CR and
/// blank lines, very long words and runs of punctuation; and SSML documents of the same
/// text with breaks, say-as, sentences, paragraphs, voice and language changes, and marks.
///
/// A case is a list of fragments, so a failing case can be shrunk by dropping fragments
/// (each SSML fragment is balanced markup on its own).
public struct TextCase: Sendable, CustomStringConvertible {
    /// The pieces, in order.
    public var fragments: [String]
    /// Whether the text is an SSML document (the fragments go inside `<speak>`).
    public var isSSML: Bool
    /// The utterance language, nil to let the detector decide.
    public var language: String?

    public init(fragments: [String], isSSML: Bool, language: String?) {
        self.fragments = fragments
        self.isSSML = isSSML
        self.language = language
    }

    /// The text to speak: the fragments joined, inside `<speak>` for SSML.
    public var text: String {
        let body = fragments.joined()
        guard isSSML else { return body }
        return (language.map { "<speak xml:lang=\"\($0)\">" } ?? "<speak>") + body + "</speak>"
    }

    /// The text as a Swift string literal, with every invisible or non-ASCII scalar escaped.
    public var description: String {
        var out = "\""
        for s in text.unicodeScalars {
            switch s {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case " "..."~": out.unicodeScalars.append(s)
            default: out += "\\u{\(String(s.value, radix: 16, uppercase: true))}"
            }
        }
        return out + "\"" + (language.map { " (language \($0))" } ?? " (detected)") + (isSSML ? " [SSML]" : "")
    }

    /// Smaller cases to try when this one fails: without one fragment, then (for short
    /// plain texts) without one scalar.
    public func shrinks() -> [TextCase] {
        var out: [TextCase] = []
        if fragments.count > 1 {
            for i in fragments.indices {
                var c = self
                c.fragments.remove(at: i)
                out.append(c)
            }
        }
        for (i, f) in fragments.enumerated() where !isSSML && f.unicodeScalars.count > 1 && f.unicodeScalars.count <= 64 {
            let scalars = Array(f.unicodeScalars)
            for j in scalars.indices {
                var c = self
                var rest = scalars
                rest.remove(at: j)
                c.fragments[i] = String(String.UnicodeScalarView(rest))
                out.append(c)
            }
        }
        return out
    }

    /// Shrinks `self` while `fails` holds, trying at most `budget` candidates; returns the
    /// smallest failing case found.
    public func minimised(budget: Int = 400, fails: (TextCase) async -> Bool) async -> TextCase {
        var best = self
        var tries = 0
        var progress = true
        while progress && tries < budget {
            progress = false
            for candidate in best.shrinks() {
                tries += 1
                if tries > budget { break }
                if await fails(candidate) {
                    best = candidate
                    progress = true
                    break
                }
            }
        }
        return best
    }
}

/// Makes ``TextCase``s from a seed.
public struct TextCaseGenerator {
    private var rng: SeededGenerator

    public init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

    private mutating func pick<T>(_ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }
    private mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
    private mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }

    static let words: [(language: String, words: [String])] = [
        ("en", ["the", "better", "Cabbages", "don't", "well-known", "e-mail", "Tolkien", "colour", "rhythm"]),
        ("fr", ["l'homme", "été", "garçon", "naïve", "œuvre", "aujourd'hui"]),
        ("de", ["Straße", "Äpfel", "über", "Größe"]),
        ("el", ["Καλημέρα", "κόσμε", "τηλέφωνο", "ΐ", "Ελλάδα"]),
        ("ru", ["Привет", "мир", "ёжик", "съёмка"]),
        ("ar", ["مرحبا", "بالعالم", "هذا", "اختبار", "كِتَابٌ"]),
        ("he", ["שָׁלוֹם", "עוֹלָם", "מבחן"]),
        ("hi", ["नमस्ते", "दुनिया", "क्षत्रिय"]),
        ("zh", ["我爱北京", "天安门", "中文"]),
        ("ja", ["ひらがな", "カタカナ", "東京"]),
        ("ko", ["안녕하세요", "세계"]),
        ("th", ["สวัสดี", "ภาษาไทย"]),
        ("ka", ["გამარჯობა"]),
        ("hy", ["Բարեւ"]),
        ("ta", ["வணக்கம்"]),
        ("vi", ["Tiếng", "Việt", "người"]),
    ]
    static let quotes: [(String, String)] = [
        ("\"", "\""), ("'", "'"), ("“", "”"), ("‘", "’"), ("«", "»"), ("„", "“"), ("「", "」"), ("『", "』"),
        ("(", ")"), ("[", "]"), ("{", "}"), ("((", "))"), ("‹", "›"),
    ]
    static let enders = [".", "!", "?", "…", "।", "。", "؟", ";", "?!", "...", ".\"", "!)", ".»", "。」"]
    static let abbreviations = ["J. R.", "J. R. R.", "e.g.", "U.S.A.", "Dr.", "i.e.", "etc.", "Mr.", "a.m.", "No.", "vs."]
    static let numbers = ["1,000.50", "1 000", "3.14", "10:30", "1/2", "-42", "1.000.000", "2024-11-23", "50%", "$9.99", "١٢٣", "४२", "1e10", "0x1F"]
    static let emoji = [
        "👩‍👩‍👧‍👦", "🇫🇷", "🏳️‍🌈", "👍🏽", "🧑🏿‍🚀", "❤️", "1️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "😀", "👨‍💻",
    ]
    static let marks = ["\u{301}", "\u{308}", "\u{30A}\u{301}", "\u{64E}", "\u{93C}", "\u{20DD}", "\u{FE0F}"]
    static let invisible = [
        "\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{FEFF}", "\u{200E}", "\u{200F}", "\u{202A}", "\u{202B}",
        "\u{202C}", "\u{202D}", "\u{202E}", "\u{2066}", "\u{2067}", "\u{2068}", "\u{2069}", "\u{061C}", "\u{AD}",
    ]
    static let spaces = [" ", " ", " ", "\t", "\r", "\r\n", "\n", "\n\n", "  ", "\u{A0}", "\u{3000}", "\u{2028}", "\u{85}", "\u{C}"]

    /// A piece of plain text.
    mutating func plainFragment(depth: Int = 0) -> String {
        switch int(0...15) {
        case 0...4:
            let set = pick(Self.words)
            return (0..<int(1...3)).map { _ in pick(set.words) }.joined(separator: " ")
        case 5:
            let (open, close) = pick(Self.quotes)
            let inner = depth < 2 ? (0..<int(1...3)).map { _ in plainFragment(depth: depth + 1) }.joined(separator: " ") : pick(pick(Self.words).words)
            return open + inner + (chance(50) ? pick(Self.enders) : "") + close
        case 6: return pick(Self.enders)
        case 7: return pick(Self.abbreviations)
        case 8: return pick(Self.numbers)
        case 9: return pick(Self.emoji)
        case 10: return pick(pick(Self.words).words) + pick(Self.marks)
        case 11: return pick(Self.marks)  // a mark with no base, or after a space
        case 12: return pick(Self.invisible)
        case 13: return pick(Self.spaces)
        case 14:
            // A very long word.
            let w = pick(pick(Self.words).words)
            return String(repeating: w, count: int(10...40))
        default:
            // A long run of punctuation.
            return String(repeating: pick([".", "!", "-", "—", "*", "?", "…", "\"", "'", "«", "。", "#"]), count: int(3...80))
        }
    }

    /// A piece of SSML: balanced markup on its own.
    mutating func ssmlFragment() -> String {
        func escaped(_ s: String) -> String {
            var out = ""
            for c in s.unicodeScalars {
                switch c {
                case "&": out += "&amp;"
                case "<": out += "&lt;"
                case ">": out += "&gt;"
                default: out.unicodeScalars.append(c)
                }
            }
            return out
        }
        let text = escaped(plainFragment())
        switch int(0...13) {
        case 0...3: return text
        case 4: return "<break time=\"\(int(0...400))ms\"/>"
        case 5: return "<break strength=\"\(pick(["none", "weak", "medium", "strong", "x-strong"]))\"/>"
        case 6: return "<say-as interpret-as=\"characters\">\(text)</say-as>"
        case 7: return "<s>\(text)</s>"
        case 8: return "<p>\(text)</p>"
        case 9: return "<voice xml:lang=\"\(pick(Self.words).language)\">\(text)</voice>"
        case 10: return "<mark name=\"m\(int(0...99))\"/>"
        case 11: return "<prosody rate=\"\(pick(["x-slow", "fast", "150%", "+20%", "-30%"]))\" pitch=\"\(pick(["low", "high", "+10%"]))\">\(text)</prosody>"
        case 12: return "<sub alias=\"\(escaped(pick(pick(Self.words).words)))\">\(text)</sub>"
        default: return pick(["&amp;", "&lt;", "&#x301;", "&#8217;", "&quot;", "<!-- c -->", "<![CDATA[a<b]]>", "<emphasis>\(text)</emphasis>"])
        }
    }

    /// The next case: plain text or SSML, with an explicit language or detection.
    public mutating func next() -> TextCase {
        let ssml = chance(30)
        let count = int(1...12)
        var fragments: [String] = []
        for _ in 0..<count {
            var f = ssml ? ssmlFragment() : plainFragment()
            if !ssml && chance(60) { f += pick([" ", " ", "\n", "\t"]) }
            fragments.append(f)
        }
        let language = chance(40) ? pick(Self.words).language : nil
        return TextCase(fragments: fragments, isSSML: ssml, language: language)
    }
}
