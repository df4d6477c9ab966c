/// A Unicode Script property value (ISO 15924 code), looked up in a table generated from the
/// Unicode Character Database by `scripts/generate-unicode-scripts.py`.
package struct UnicodeScript: Hashable, Sendable, CustomStringConvertible {
    /// Index into the generated code table.
    package let rawValue: UInt8

    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Creates the script with ISO 15924 code `code` ("Latn", "Cyrl", "Hani", ...).
    package init?(code: String) {
        guard let i = Self.codes.firstIndex(of: code) else { return nil }
        rawValue = UInt8(i)
    }

    /// Unassigned code points (`Zzzz`).
    package static let unknown = UnicodeScript(rawValue: 0)
    /// Characters shared by many scripts: spaces, digits, punctuation, symbols, emoji (`Zyyy`).
    package static let common = UnicodeScript(rawValue: 1)
    /// Combining marks that take the script of their base (`Zinh`).
    package static let inherited = UnicodeScript(rawValue: 2)

    /// The ISO 15924 code.
    package var code: String { Self.codes[Int(rawValue)] }
    package var description: String { code }

    /// Whether the script says nothing about the language (Common, Inherited, Unknown).
    package var isNeutral: Bool { rawValue <= 2 }

    /// The Script property of `scalar`.
    package static func of(_ scalar: Unicode.Scalar) -> UnicodeScript {
        of(scalar.value)
    }

    @inline(__always)
    static func of(_ v: UInt32) -> UnicodeScript {
        if v < 0x10000 { return UnicodeScript(rawValue: bmp[Int(v)]) }
        return UnicodeScript(rawValue: UInt8(truncatingIfNeeded: lookup(v, in: rangeTable) ?? 0))
    }

    /// The scripts a Common or Inherited character is used with (Script_Extensions), if Unicode
    /// lists them; nil otherwise.
    package static func extensions(of scalar: Unicode.Scalar) -> [UnicodeScript]? {
        guard let set = lookup(scalar.value, in: extensionTable) else { return nil }
        return extensionSets[Int(set)].map { UnicodeScript(rawValue: $0) }
    }

    /// The Basic Multilingual Plane as one byte per code point (64 KiB), built once from the
    /// range table so that the common case is a single load.
    static let bmp: [UInt8] = {
        var t = [UInt8](repeating: 0, count: 0x10000)
        var i = 0
        while i < rangeTable.count {
            let lo = rangeTable[i], hi = rangeTable[i + 1], s = UInt8(rangeTable[i + 2])
            if lo >= 0x10000 { break }
            for v in Int(lo)...Int(min(hi, 0xFFFF)) { t[v] = s }
            i += 3
        }
        return t
    }()

    /// Binary search of a (first, last, value) triple table.
    private static func lookup(_ v: UInt32, in table: [UInt32]) -> UInt32? {
        var lo = 0, hi = table.count / 3
        while lo < hi {
            let mid = (lo + hi) / 2
            if table[mid * 3 + 1] < v {
                lo = mid + 1
            } else if table[mid * 3] > v {
                hi = mid
            } else {
                return table[mid * 3 + 2]
            }
        }
        return nil
    }
}
