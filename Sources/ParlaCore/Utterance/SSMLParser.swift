import FoundationEssentials
import RealModule

/// Parses the subset of SSML 1.1 that maps onto Parla's speech attributes.
///
/// Supported: `speak`, `voice` (`name`: a voice identifier; `xml:lang`), `lang`/`p`/`s` (`xml:lang`), `prosody` (`rate`, `pitch`,
/// `volume`), `say-as` (`characters`, `spell-out`), `break` (`time`, `strength`), `sub`
/// (`alias`), `mark` (`name`: a ``Utterance/Mark``). `emphasis`, `audio`, `phoneme` and unknown
/// elements are transparent: their text is spoken. Malformed markup is an error naming the line and column.
struct SSMLParser {
    private let scalars: [Unicode.Scalar]
    private let markup: String
    private var pos = 0

    // Output being built.
    private var text = AttributedString()
    private var starts: [Int32] = []
    private var ends: [Int32] = []
    private var pauses: [Utterance.Pause] = []
    private var marks: [Utterance.Mark] = []
    private var sentenceBreaks: [Int] = []
    private var lastScalar: Unicode.Scalar?
    /// Text emitted under the current element, appended to `text` when the element changes.
    private var pending = ""

    private struct Context {
        var name: String
        var attributes = AttributeContainer()
        var alias: String?
        var aliasStart = 0
    }
    private var stack: [Context] = []

    init(_ markup: String) {
        self.markup = markup
        self.scalars = Array(markup.unicodeScalars)
    }

    mutating func parse() throws(ParlaError) -> Utterance {
        // Offsets into the markup are kept as Int32 (half the memory of Int for long documents).
        guard scalars.count < Int(Int32.max) else {
            throw .invalidSSML(
                line: 1, column: 1, reason: "the document is longer than \(Int32.max) characters; split it into several documents")
        }
        skipProlog()
        guard peek("<speak") else { throw error("the document must start with <speak>") }
        var sawRoot = false
        while pos < scalars.count {
            if peek("<!--") {
                try skip(past: "-->", what: "comment")
            } else if peek("<![CDATA[") {
                let start = pos + 9
                try skip(past: "]]>", what: "CDATA section")
                guard !stack.isEmpty else { throw error("text outside <speak>") }
                for i in start..<(pos - 3) { emit(scalars[i], from: i..<(i + 1)) }
            } else if peek("</") {
                try closeTag()
                if stack.isEmpty { sawRoot = true; break }
            } else if peek("<?") {
                try skip(past: "?>", what: "processing instruction")
            } else if scalars[pos] == "<" {
                try openTag()
                if stack.isEmpty { sawRoot = true; break }  // <speak/>
            } else if scalars[pos] == "&" {
                let start = pos
                let c = try entity()
                guard !stack.isEmpty else { throw error("text outside <speak>") }
                emit(c, from: start..<pos)
            } else {
                guard !stack.isEmpty else { throw error("text outside <speak>") }
                emit(scalars[pos], from: pos..<(pos + 1))
                pos += 1
            }
        }
        if let open = stack.last { throw error("<\(open.name)> is not closed") }
        guard sawRoot else { throw error("missing </speak>") }
        skipMisc()
        if pos < scalars.count { throw error("content after </speak>") }

        flush()
        var utterance = Utterance(text)
        utterance.pauses = pauses
        utterance.marks = marks
        utterance.source = SourceMap(markup: markup, scalarCount: scalars.count, starts: starts, ends: ends, sentenceBreaks: sentenceBreaks)
        return utterance
    }

    // MARK: Output

    private mutating func emit(_ scalar: Unicode.Scalar, from range: Range<Int>) {
        if stack.last?.alias != nil { return }  // <sub> content is replaced by its alias
        pending.unicodeScalars.append(scalar)
        starts.append(Int32(range.lowerBound))
        ends.append(Int32(range.upperBound))
        lastScalar = scalar
    }

    /// Moves `pending` into `text` with the attributes of the current element.
    private mutating func flush() {
        guard !pending.isEmpty else { return }
        text.append(AttributedString(pending, attributes: stack.last?.attributes ?? AttributeContainer()))
        pending = ""
    }

    /// Ends a sentence here (for the timeline), and appends a line break that separates the
    /// blocks (for the engine), attributed to the tag at `range`.
    private mutating func separate(at range: Range<Int>) {
        breakSentence()
        if let last = lastScalar, !last.properties.isWhitespace {
            emit("\n", from: range.lowerBound..<range.lowerBound)
        }
    }

    private mutating func breakSentence() {
        if sentenceBreaks.last != starts.count { sentenceBreaks.append(starts.count) }
    }

    // MARK: Tags

    private mutating func openTag() throws(ParlaError) {
        let tagStart = pos
        pos += 1
        let name = readName()
        guard !name.isEmpty else { throw error("expected an element name after '<'") }
        var attrs: [String: String] = [:]
        var selfClosing = false
        while true {
            skipSpace()
            guard pos < scalars.count else { throw error("<\(name) is not closed with '>'") }
            if scalars[pos] == ">" { pos += 1; break }
            if peek("/>") { pos += 2; selfClosing = true; break }
            let attrName = readName()
            guard !attrName.isEmpty else { throw error("unexpected '\(scalars[pos])' in <\(name)>") }
            skipSpace()
            guard pos < scalars.count, scalars[pos] == "=" else { throw error("attribute '\(attrName)' needs a value") }
            pos += 1
            skipSpace()
            guard pos < scalars.count, scalars[pos] == "\"" || scalars[pos] == "'" else {
                throw error("the value of '\(attrName)' must be quoted")
            }
            let quote = scalars[pos]
            pos += 1
            var value = ""
            while pos < scalars.count, scalars[pos] != quote {
                if scalars[pos] == "<" { throw error("'<' inside the value of '\(attrName)'") }
                if scalars[pos] == "&" {
                    value.unicodeScalars.append(try entity())
                } else {
                    value.unicodeScalars.append(scalars[pos])
                    pos += 1
                }
            }
            guard pos < scalars.count else { throw error("the value of '\(attrName)' is not closed") }
            pos += 1
            if attrs[attrName] != nil { throw error("attribute '\(attrName)' appears twice") }
            attrs[attrName] = value
        }
        let tagRange = tagStart..<pos
        flush()
        if stack.isEmpty && name != "speak" { throw error("the root element must be <speak>, not <\(name)>") }
        if name == "speak" && !stack.isEmpty { throw error("<speak> cannot be nested") }

        var ctx = Context(name: name, attributes: stack.last?.attributes ?? AttributeContainer())
        if let lang = attrs["xml:lang"] {
            guard let tag = LanguageTag(lang) else {
                throw error("xml:lang='\(lang)' is not a BCP 47 language tag", at: tagStart)
            }
            ctx.attributes.speechLanguage = tag
        }
        switch name {
        case "voice":
            // The voice is looked up when the utterance is planned (an unknown one is an error there).
            if let voiceName = attrs["name"] {
                guard !voiceName.isEmpty else { throw error("<voice name> is empty", at: tagStart) }
                ctx.attributes.speechVoice = voiceName
            }
        case "p", "s", "paragraph", "sentence":
            separate(at: tagRange)
        case "prosody":
            if let r = attrs["rate"] {
                ctx.attributes.speechRate =
                    try relative(r, attribute: "rate", at: tagStart, named: Self.rateNames) * (ctx.attributes.speechRate ?? 1)
            }
            if let p = attrs["pitch"] {
                ctx.attributes.speechPitch =
                    try relative(p, attribute: "pitch", at: tagStart, named: Self.pitchNames) * (ctx.attributes.speechPitch ?? 1)
            }
            if let v = attrs["volume"] { ctx.attributes.speechVolume = try volume(v, at: tagStart) * (ctx.attributes.speechVolume ?? 1) }
        case "say-as":
            let kind = attrs["interpret-as"] ?? ""
            if ["characters", "spell-out", "tts:char", "letters"].contains(kind) {
                ctx.attributes.speechSpellOut = true
            }
        case "break":
            let duration = try breakDuration(attrs, at: tagStart)
            pauses.append(.init(offset: starts.count, duration: duration))
            // SSML: a strong break is a sentence boundary, a weaker one a pause within it.
            if ["strong", "x-strong"].contains(attrs["strength"]) { breakSentence() }
        case "mark":
            guard let markName = attrs["name"] else { throw error("<mark> needs a name attribute", at: tagStart) }
            marks.append(.init(name: markName, offset: starts.count))
        case "sub":
            guard let alias = attrs["alias"] else { throw error("<sub> needs an alias attribute", at: tagStart) }
            // The alias is spoken in place of the content; it maps to the whole <sub> element.
            text.append(AttributedString(alias, attributes: ctx.attributes))
            for s in alias.unicodeScalars {
                starts.append(Int32(tagStart))
                ends.append(Int32(tagStart))  // patched at </sub>
                lastScalar = s
            }
            ctx.alias = alias
            ctx.aliasStart = starts.count - alias.unicodeScalars.count
        default:
            break
        }
        if !selfClosing {
            stack.append(ctx)
        } else if name == "speak" {
            stack = []
        }
    }

    private mutating func closeTag() throws(ParlaError) {
        let tagStart = pos
        pos += 2
        let name = readName()
        skipSpace()
        guard pos < scalars.count, scalars[pos] == ">" else { throw error("</\(name) is not closed with '>'", at: tagStart) }
        pos += 1
        guard let open = stack.last else { throw error("</\(name)> has no matching start tag", at: tagStart) }
        guard open.name == name else { throw error("</\(name)> closes <\(open.name)>", at: tagStart) }
        flush()
        stack.removeLast()
        if open.alias != nil {
            for i in open.aliasStart..<starts.count { ends[i] = Int32(pos) }
        }
        if ["p", "s", "paragraph", "sentence"].contains(name) { separate(at: tagStart..<pos) }
    }

    // MARK: Attribute values

    private static let rateNames: [String: Double] = ["x-slow": 0.5, "slow": 0.75, "medium": 1, "default": 1, "fast": 1.5, "x-fast": 2]
    private static let pitchNames: [String: Double] = ["x-low": 0.6, "low": 0.8, "medium": 1, "default": 1, "high": 1.25, "x-high": 1.5]
    private static let volumeNames: [String: Double] = [
        "silent": 0, "x-soft": 0.25, "soft": 0.5, "medium": 1, "default": 1, "loud": 1.5, "x-loud": 2,
    ]

    /// A multiplier from a named value, `150%`, `+10%`, `-20%` or a plain number.
    private func relative(_ raw: String, attribute: String, at offset: Int, named: [String: Double]) throws(ParlaError) -> Double {
        let v = raw.trimmingASCIIWhitespace()
        if let n = named[v] { return n }
        if v.hasSuffix("%"), let n = Double(v.dropLast()), n.isFinite {
            let m = (v.hasPrefix("+") || v.hasPrefix("-")) ? 1 + n / 100 : n / 100
            if m > 0 { return m }
        } else if let n = Double(v), n > 0, n.isFinite, !v.hasPrefix("+") {
            return n
        }
        throw error(
            "\(attribute)='\(raw)' is not a value Parla understands (use a name such as 'fast', a percentage such as '150%' or '+10%', or a positive number)",
            at: offset)
    }

    private func volume(_ raw: String, at offset: Int) throws(ParlaError) -> Double {
        let v = raw.trimmingASCIIWhitespace()
        if let n = Self.volumeNames[v] { return n }
        if v.hasSuffix("dB"), let db = Double(v.dropLast(2)), db.isFinite {
            return min(Double.pow(10, db / 20), 2)
        }
        if let n = Double(v), (0...100).contains(n) { return n / 50 }
        throw error("volume='\(raw)' is not a value Parla understands (use 'soft', 'loud', '+6dB' or a number from 0 to 100)", at: offset)
    }

    private func breakDuration(_ attrs: [String: String], at offset: Int) throws(ParlaError) -> Duration {
        if let t = attrs["time"]?.trimmingASCIIWhitespace() {
            if t.hasSuffix("ms"), let n = Double(t.dropLast(2)), n >= 0, n <= 60_000 { return .milliseconds(n) }
            if t.hasSuffix("s"), let n = Double(t.dropLast()), n >= 0, n <= 60 { return .milliseconds(n * 1000) }
            throw error("break time='\(t)' is not a duration (use '500ms' or '1.5s', at most a minute)", at: offset)
        }
        let strengths: [String: Int] = ["none": 0, "x-weak": 100, "weak": 200, "medium": 400, "strong": 700, "x-strong": 1200]
        let s = attrs["strength"] ?? "medium"
        guard let ms = strengths[s] else {
            throw error("break strength='\(s)' is not one of none, x-weak, weak, medium, strong, x-strong", at: offset)
        }
        return .milliseconds(ms)
    }

    // MARK: Lexing

    private mutating func entity() throws(ParlaError) -> Unicode.Scalar {
        let start = pos
        pos += 1
        var name = ""
        while pos < scalars.count, scalars[pos] != ";", name.unicodeScalars.count < 12 {
            name.unicodeScalars.append(scalars[pos])
            pos += 1
        }
        guard pos < scalars.count, scalars[pos] == ";" else {
            throw error("'&' must start an entity such as &amp; (write &amp; for a literal '&')", at: start)
        }
        pos += 1
        switch name {
        case "amp": return "&"
        case "lt": return "<"
        case "gt": return ">"
        case "quot": return "\""
        case "apos": return "'"
        default:
            var value: UInt32?
            if name.hasPrefix("#x") || name.hasPrefix("#X") {
                value = UInt32(name.dropFirst(2), radix: 16)
            } else if name.hasPrefix("#") {
                value = UInt32(name.dropFirst(), radix: 10)
            }
            if let v = value, let s = Unicode.Scalar(v), v != 0 { return s }
            throw error("unknown entity '&\(name);'", at: start)
        }
    }

    private func peek(_ s: String) -> Bool {
        var i = pos
        for c in s.unicodeScalars {
            guard i < scalars.count, scalars[i] == c else { return false }
            i += 1
        }
        return true
    }

    private mutating func skip(past terminator: String, what: String) throws(ParlaError) {
        let start = pos
        while pos < scalars.count {
            if peek(terminator) { pos += terminator.unicodeScalars.count; return }
            pos += 1
        }
        throw error("the \(what) is not closed with '\(terminator)'", at: start)
    }

    private mutating func skipSpace() {
        while pos < scalars.count, scalars[pos].properties.isWhitespace { pos += 1 }
    }

    private mutating func skipProlog() {
        if pos < scalars.count, scalars[pos] == "\u{FEFF}" { pos += 1 }
        skipMisc()
        if peek("<!DOCTYPE") { try? skip(past: ">", what: "DOCTYPE"); skipMisc() }
    }

    private mutating func skipMisc() {
        while true {
            skipSpace()
            if peek("<?") {
                try? skip(past: "?>", what: "declaration")
            } else if peek("<!--") {
                try? skip(past: "-->", what: "comment")
            } else {
                return
            }
        }
    }

    private mutating func readName() -> String {
        var name = ""
        while pos < scalars.count {
            let c = scalars[pos]
            guard c.properties.isAlphabetic || c.properties.numericType != nil || c == ":" || c == "-" || c == "_" || c == "." else {
                break
            }
            name.unicodeScalars.append(c)
            pos += 1
        }
        return name
    }

    private func error(_ reason: String, at offset: Int? = nil) -> ParlaError {
        let at = min(offset ?? pos, scalars.count)
        var line = 1, column = 1
        for s in scalars[..<at] {
            if s == "\n" { line += 1; column = 1 } else { column += 1 }
        }
        return .invalidSSML(line: line, column: column, reason: reason)
    }
}
