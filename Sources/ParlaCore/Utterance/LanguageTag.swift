/// A BCP 47 language tag such as `en`, `pt-BR` or `zh-Hans-CN`, normalised to canonical case.
///
/// Parsing is deliberately lenient about subtag meaning (any 1–8 alphanumeric subtags after
/// a 2–8 letter primary language) and strict about syntax, so `en_US` is accepted as `en-US`
/// but `english!` or an empty string are rejected with an error that says what was expected.
public struct LanguageTag: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The tag in canonical case, e.g. `pt-BR`, `zh-Hant`, `en-GB-scotland`.
    public let identifier: String

    /// Parses and normalises `string`; throws ``ParlaError/invalidLanguageTag(_:)`` if it is not a tag.
    public init(parsing string: String) throws(ParlaError) {
        guard let normalized = LanguageTag.normalize(string) else {
            throw .invalidLanguageTag(string)
        }
        identifier = normalized
    }

    /// Parses `string`, returning nil when it is not a syntactically valid tag.
    public init?(_ string: String) {
        guard let normalized = LanguageTag.normalize(string) else { return nil }
        identifier = normalized
    }

    /// The primary language subtag, lowercased: `pt` for `pt-BR`.
    public var language: String {
        String(identifier.prefix { $0 != "-" })
    }

    /// The subtags after the primary language, in canonical case.
    public var subtags: [Substring] {
        Array(identifier.split(separator: "-").dropFirst())
    }

    /// The four-letter script subtag if the tag has one (`Hant` for `zh-Hant-TW`).
    public var script: String? {
        subtags.first { $0.count == 4 && $0.first?.isLetter == true }.map(String.init)
    }

    /// The region subtag if the tag has one (`BR` for `pt-BR`, `419` for `es-419`).
    public var region: String? {
        for s in subtags {
            if s.count == 2, s.allSatisfy(\.isLetter) { return String(s) }
            if s.count == 3, s.allSatisfy(\.isNumber) { return String(s) }
        }
        return nil
    }

    /// The tag with its last subtag removed (`en-GB-scotland` → `en-GB` → `en`), or nil for a bare language.
    public var parent: LanguageTag? {
        guard let dash = identifier.lastIndex(of: "-") else { return nil }
        return LanguageTag(String(identifier[..<dash]))
    }

    /// Whether `self` equals `other` or is a more specific form of it (`en-US` matches `en`).
    public func isSpecialization(of other: LanguageTag) -> Bool {
        identifier.lowercased() == other.identifier.lowercased()
            || identifier.lowercased().hasPrefix(other.identifier.lowercased() + "-")
    }

    public var description: String { identifier }

    public static func < (lhs: LanguageTag, rhs: LanguageTag) -> Bool { lhs.identifier < rhs.identifier }

    /// Returns the canonical form of `raw`, or nil if it is not a syntactically valid tag.
    static func normalize(_ raw: String) -> String? {
        // On bytes: a valid tag is ASCII, and this runs for every voice at start-up.
        var bytes = Array(raw.utf8)
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        while let last = bytes.last, blank(last) { bytes.removeLast() }
        let lead = bytes.prefix(while: blank).count
        bytes.removeFirst(lead)
        guard !bytes.isEmpty, bytes.count <= 64 else { return nil }
        func isLetter(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }
        func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
        func lower(_ b: UInt8) -> UInt8 { isLetter(b) ? b | 0x20 : b }
        func upper(_ b: UInt8) -> UInt8 { isLetter(b) ? b & ~0x20 : b }
        let parts = bytes.split(omittingEmptySubsequences: false) { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
        guard let first = parts.first, (2...8).contains(first.count), first.allSatisfy(isLetter) else { return nil }
        var out = first.map(lower)
        var afterSingleton = false
        for (i, part) in parts.dropFirst().enumerated() {
            guard (1...8).contains(part.count), part.allSatisfy({ isLetter($0) || isDigit($0) }) else { return nil }
            out.append(UInt8(ascii: "-"))
            if afterSingleton {
                out += part.map(lower)
            } else if part.count == 1 {
                afterSingleton = true
                out += part.map(lower)
            } else if part.count == 4, let head = part.first, isLetter(head), i < 2 {
                out.append(upper(head))
                out += part.dropFirst().map(lower)
            } else if part.count == 2, part.allSatisfy(isLetter) {
                out += part.map(upper)
            } else {
                out += part.map(lower)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension LanguageTag: ExpressibleByStringLiteral {
    /// Creates a tag from a literal; an invalid literal is a programming error and traps.
    public init(stringLiteral value: String) {
        guard let normalized = LanguageTag.normalize(value) else {
            preconditionFailure("'\(value)' is not a valid BCP 47 language tag")
        }
        identifier = normalized
    }
}

extension LanguageTag: Codable {
    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        try self.init(parsing: raw)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(identifier)
    }
}

extension StringProtocol {
    /// The string without leading and trailing ASCII spaces, tabs and line breaks.
    package func trimmingASCIIWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let start = firstIndex(where: { !isSpace($0) }) else { return "" }
        let end = lastIndex(where: { !isSpace($0) }) ?? start
        return String(self[start...end])
    }
}
