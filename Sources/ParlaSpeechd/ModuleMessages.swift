import FoundationEssentials
import ParlaCore

/// What speech-dispatcher asks a module to say, made into utterances: `SPEAK` (SSML, with or
/// without a `<speak>` root), `CHAR` (one character), `KEY` (a key name such as `shift_a` or
/// `kp-enter`) and `SOUND_ICON` (a symbolic name such as `bell`).
package enum ModuleMessage {
    /// A `SPEAK` body. speech-dispatcher wraps plain text in `<speak>` and escapes it; a client in
    /// SSML mode may send markup without the root, or bare text, which is wrapped here.
    /// - Throws: ``ParlaError/invalidSSML(line:column:reason:)`` or ``ParlaError/emptyText``.
    package static func speech(_ body: String) throws(ParlaError) -> Utterance {
        let trimmed = body.trimmingASCIIWhitespace()
        let hasRoot =
            trimmed.hasPrefix("<speak") || trimmed.hasPrefix("<?xml") || trimmed.hasPrefix("<!--") || trimmed.hasPrefix("\u{FEFF}")
        let utterance = try Utterance(ssml: hasRoot ? body : "<speak>" + body + "</speak>")
        guard utterance.string.unicodeScalars.contains(where: { !$0.properties.isWhitespace }) else { throw .emptyText }
        return utterance
    }

    /// A `CHAR` body: the character is spelled (`space` and a blank are said as "space"); an
    /// upper-case letter is announced as a capital when the client asked for it.
    package static func character(_ body: String, capitals: ModuleSettings.CapitalLetters) throws(ParlaError) -> Utterance {
        if body == "space" || (!body.isEmpty && body.allSatisfy(\.isWhitespace)) {
            return english("space")
        }
        guard let c = body.first else { throw .emptyText }
        var text = AttributedString()
        if capitals != .none, c.isUppercase, c.lowercased() != String(c) {
            text = englishText("capital ")
        }
        var letter = AttributedString(String(c))
        letter.speechSpellOut = true
        text.append(letter)
        return Utterance(text)
    }

    /// A `KEY` body: modifiers (`shift_`, `control_`, …) and a key name or a character.
    package static func key(_ name: String) throws(ParlaError) -> Utterance {
        guard !name.isEmpty else { throw .emptyText }
        var rest = Substring(name)
        var words: [String] = []
        var found = true
        while found {
            found = false
            for (prefix, word) in modifiers where rest.hasPrefix(prefix) && rest.count > prefix.count {
                words.append(word)
                rest = rest.dropFirst(prefix.count)
                found = true
                break
            }
        }
        var text = englishText(words.isEmpty ? "" : words.joined(separator: " ") + " ")
        if rest.count == 1 {
            var letter = AttributedString(String(rest))
            letter.speechSpellOut = true
            text.append(letter)
        } else if let word = keyNames[String(rest)] {
            text.append(englishText(word))
        } else if rest.hasPrefix("f"), let n = Int(rest.dropFirst()), (1...24).contains(n) {
            text.append(englishText("F \(n)"))
        } else if rest.hasPrefix("kp-") {
            let key = String(rest.dropFirst(3))
            text.append(englishText("keypad " + (keyNames[key] ?? symbolNames[key] ?? key)))
        } else {
            text.append(englishText(String(rest).replacing("_", with: " ").replacing("-", with: " ")))
        }
        return Utterance(text)
    }

    /// A `SOUND_ICON` body. Parla has no sound files: it says the icon's name.
    package static func soundIcon(_ name: String) throws(ParlaError) -> Utterance {
        let words = name.replacing("_", with: " ").replacing("-", with: " ").trimmingASCIIWhitespace()
        guard !words.isEmpty else { throw .emptyText }
        return english(words)
    }

    // Key names are English words (as on the keys themselves).
    private static func englishText(_ s: String) -> AttributedString {
        var text = AttributedString(s)
        text.speechLanguage = "en"
        return text
    }

    private static func english(_ s: String) -> Utterance { Utterance(englishText(s)) }

    private static let modifiers: [(String, String)] = [
        ("alt_", "alt"), ("control_", "control"), ("hyper_", "hyper"), ("meta_", "meta"), ("shift_", "shift"), ("super_", "super"),
    ]

    private static let keyNames: [String: String] = [
        "space": "space", "underscore": "underscore", "double-quote": "double quote", "backspace": "backspace",
        "break": "break", "delete": "delete", "down": "down", "end": "end", "enter": "enter", "escape": "escape",
        "home": "home", "insert": "insert", "left": "left", "menu": "menu", "next": "page down",
        "num-lock": "num lock", "pause": "pause", "print": "print", "prior": "page up", "return": "return",
        "right": "right", "scroll-lock": "scroll lock", "tab": "tab", "up": "up", "window": "windows",
    ]

    private static let symbolNames: [String: String] = [
        "*": "star", "+": "plus", "-": "minus", ".": "dot", "/": "slash",
    ]
}
