/// The text handed to the engine for one run, with a map from the engine's character
/// positions back to Unicode-scalar offsets in the utterance's spoken text.
///
/// The engine counts positions in Unicode scalars of the text it was given, including any
/// markup Parla added (such as the SSML wrapper used to spell a run out). Every engine scalar
/// either comes from the caller's text (an identity piece) or is Parla's own markup.
public struct EngineInput: Sendable {
    /// The text to pass to the engine.
    public private(set) var text: String = ""
    /// Whether `text` is SSML that Parla generated.
    public let isMarkup: Bool

    /// Maps engine scalars `engineStart..<engineStart+count` to text offsets `textStart…`.
    /// `count == 0` with `expands` marks an escape: several engine scalars for one text scalar.
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
    public init(text: Substring.UnicodeScalarView, range: Range<Int>, spellOut: Bool) {
        isMarkup = spellOut
        if spellOut {
            appendMarkup("<speak><say-as interpret-as=\"characters\">")
            var offset = range.lowerBound
            var plainStart = offset
            var plain = String.UnicodeScalarView()
            for s in text {
                let escape: String? = s == "&" ? "&amp;" : s == "<" ? "&lt;" : s == ">" ? "&gt;" : nil
                if let escape {
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
            appendMarkup("</say-as></speak>")
        } else {
            appendText(String.UnicodeScalarView(text), at: range.lowerBound)
        }
    }

    private mutating func appendText(_ scalars: String.UnicodeScalarView, at textStart: Int) {
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
    public func textOffset(ofEnginePosition position: Int) -> Int? {
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
