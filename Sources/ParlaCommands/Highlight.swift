import Parla
#if canImport(Glibc)
    import Glibc
#endif

/// Shows the text in the terminal with the word being heard in reverse video, like macOS
/// `say --interactive`. The text is wrapped to the terminal's width; only the row holding the
/// current word is redrawn (`\r` and erase-line), finished rows are left behind as plain text,
/// so it works at any scroll position.
struct HighlightView {
    /// A terminal row: scalar offsets into the input, and its text.
    private struct Row {
        var range: Range<Int>
        var characters: [(scalars: Range<Int>, text: String)]
    }

    private let rows: [Row]
    private var shown = 0  // rows already printed (and finished)
    private var current: Int?

    init(text: String, width: Int) {
        var rows: [Row] = []
        var row: [(scalars: Range<Int>, text: String)] = []
        var rowWidth = 0
        var offset = 0
        var lastSpace: Int?
        func flush(upTo end: Int) {
            let part = Array(row[..<end])
            let lo = part.first?.scalars.lowerBound ?? offset
            let hi = part.last?.scalars.upperBound ?? offset
            rows.append(Row(range: lo..<hi, characters: part))
            row.removeFirst(end)
            rowWidth = row.reduce(0) { $0 + Self.displayWidth($1.text) }
            lastSpace = nil
        }
        for ch in text {
            let n = ch.unicodeScalars.count
            let range = offset..<(offset + n)
            offset += n
            if ch.isNewline {
                flush(upTo: row.count)
                continue
            }
            let text = ch == "\t" ? " " : String(ch)
            row.append((range, text))
            rowWidth += Self.displayWidth(text)
            if ch == " " { lastSpace = row.count }
            if rowWidth > width {
                flush(upTo: lastSpace ?? (row.count - 1))
            }
        }
        if !row.isEmpty || rows.isEmpty { flush(upTo: row.count) }
        self.rows = rows
    }

    /// Highlights `range` (scalar offsets into the text).
    mutating func highlight(_ range: Range<Int>) -> String {
        guard let target = rows.firstIndex(where: { $0.range.upperBound > range.lowerBound }) else { return "" }
        var out = ""
        if let current, current < target {
            out += "\r\u{1B}[K" + plain(current) + "\n"
            shown = current + 1
        }
        while shown < target {
            out += plain(shown) + "\n"
            shown += 1
        }
        current = target
        out += "\r\u{1B}[K"
        var inside = false
        for c in rows[target].characters {
            let on = c.scalars.lowerBound < range.upperBound && c.scalars.upperBound > range.lowerBound
            if on != inside { out += on ? "\u{1B}[7m" : "\u{1B}[27m" }
            inside = on
            out += c.text
        }
        if inside { out += "\u{1B}[27m" }
        return out
    }

    /// Draws the rest of the text plainly and ends the last line.
    mutating func finish() -> String {
        var out = ""
        if let current {
            out += "\r\u{1B}[K" + plain(current) + "\n"
            shown = current + 1
        }
        while shown < rows.count {
            out += plain(shown) + "\n"
            shown += 1
        }
        current = nil
        return out
    }

    private func plain(_ row: Int) -> String {
        rows[row].characters.map(\.text).joined()
    }

    /// Columns a grapheme takes: 2 for East Asian wide characters and emoji, 0 for controls.
    static func displayWidth(_ s: String) -> Int {
        guard let u = s.unicodeScalars.first else { return 0 }
        let v = u.value
        if v < 0x20 { return 0 }
        if s.unicodeScalars.count > 1 && s.unicodeScalars.contains(where: { $0.properties.isEmojiPresentation || $0.value == 0xFE0F }) {
            return 2
        }
        if u.properties.isEmojiPresentation { return 2 }
        switch v {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
            0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    /// The terminal's width in columns (80 when it cannot be read).
    static func terminalWidth(_ fd: Int32 = 1) -> Int {
        var ws = winsize()
        if ioctl(fd, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0 { return Int(ws.ws_col) }
        return 80
    }
}
