import FoundationEssentials

/// The trained language-identification model (`voices/langid.bin`, written by
/// `scripts/langid/train.py`): per script group, a table of hashed character n-grams with, for
/// every language of the group, how much less likely each bucket is in that language than in
/// the language where it is most likely.
///
/// The hashing here must match `train.py` exactly: a word is framed as
/// `[0x02] + lowercased scalars + [0x03]`; every window of 1…maxOrder scalars except a lone
/// frame mark is hashed with 64-bit FNV-1a over the scalar values, and the bucket is the top
/// `bits` bits of the hash times 0x9E3779B97F4A7C15. In a group with `Group.wholeWords`, a
/// framed word longer than `maxOrder` is hashed whole too (words tell close neighbours apart
/// more surely than their n-grams: Malay "kerana", Indonesian "karena").
///
/// Unchecked: every stored property is a `let`; all are Sendable but `storage`, a read-only
/// mapping of the model file that nothing writes to while the model lives.
package final class LanguageModel: @unchecked Sendable {
    /// The languages of one script group and their n-gram table.
    package struct Group: Sendable {
        /// The group's name (the main script's ISO 15924 code).
        package let id: String
        /// The scripts whose letters the group's words are made of.
        package let scripts: [UnicodeScript]
        /// The languages the table scores, in table order.
        package let languages: [LanguageTag]
        /// The primary language subtags of ``languages``.
        let codes: [String]
        let maxOrder: Int
        let bits: Int
        /// Whether whole words are features too (model version 2, flag bit 0).
        let wholeWords: Bool
        /// Table units per nat.
        let scale: Float
        /// Per language, how much more, per n-gram, its own text costs it under this table
        /// than under plain naive Bayes (model version 3; 1 before): a table refined
        /// discriminatively spreads its rows, most for the languages with the least text, and
        /// the detector's fit limit (`LanguageDetector.fit(emission:ngrams:group:language:)`)
        /// grows by this factor.
        let fitScale: [Float]
        /// Each language's prior cost in nats, added to the detector's own (tuned on the dev
        /// set so that close neighbours with unequal training text are not always decided the
        /// same way); 0 in models from before it existed.
        let bias: [Float]
        /// Byte offset of the table in the model's storage.
        let tableOffset: Int
    }

    /// The script groups with a model.
    package let groups: [Group]
    /// Group index for each script (by raw value), -1 where the script has no model.
    let groupOfScript: [Int8]
    /// Lower-case mapping for the Basic Multilingual Plane.
    let lowerBMP: [UInt16]
    /// Lower-case mapping above the BMP.
    let lowerAstral: [UInt32: UInt32]
    /// The model file, mapped read-only (never written, so sharing it between threads is safe).
    let storage: UnsafeBufferPointer<UInt8>

    /// The model file's size in bytes.
    package var byteCount: Int { storage.count }

    /// Gives the storage back (unmaps the file) when the model goes.
    private let release: @Sendable (UnsafeBufferPointer<UInt8>) -> Void

    deinit { release(storage) }

    /// A model over `bytes`, the contents of the model file `path` (named in errors), which
    /// stay valid and unchanged until `release` is called with them when the model goes.
    /// Loading the file is ParlaIO's job (`init(contentsOf:)`); this is the pure part.
    /// - Throws: ``ParlaError/languageModelInvalid(path:reason:)`` when the bytes are not a
    ///   model; `release` is then not called.
    package init(
        bytes: UnsafeBufferPointer<UInt8>, path: String,
        release: @escaping @Sendable (UnsafeBufferPointer<UInt8>) -> Void
    ) throws(ParlaError) {
        let parsed = try Self.parse(bytes, path: path)
        groups = parsed.groups
        groupOfScript = parsed.groupOfScript
        lowerBMP = parsed.lowerBMP
        lowerAstral = parsed.lowerAstral
        storage = bytes
        self.release = release
    }

    private struct Parsed {
        var groups: [Group]
        var groupOfScript: [Int8]
        var lowerBMP: [UInt16]
        var lowerAstral: [UInt32: UInt32]
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>, path: String) throws(ParlaError) -> Parsed {
        var r = Reader(bytes: bytes)
        func fail(_ why: String) -> ParlaError { .languageModelInvalid(path: path, reason: why) }
        guard r.bytes(4) == Array("PLID".utf8) else { throw fail("it is not a Parla language model (bad magic)") }
        guard let version = r.u32(), (1...3).contains(version) else { throw fail("unsupported version") }
        guard let pairs = r.u32() else { throw fail("truncated") }
        var bmp = [UInt16](unsafeUninitializedCapacity: 0x10000) { buffer, count in
            for i in 0..<0x10000 { buffer[i] = UInt16(truncatingIfNeeded: i) }
            count = 0x10000
        }
        var astral: [UInt32: UInt32] = [:]
        for _ in 0..<pairs {
            guard let from = r.u32(), let to = r.u32() else { throw fail("truncated lower-case table") }
            if from < 0x10000 && to < 0x10000 { bmp[Int(from)] = UInt16(to) } else { astral[from] = to }
        }
        // Group indices are stored in Int8 and language indices in UInt8 (the detector's
        // back-pointers): more would not fit.
        guard let groupCount = r.u32(), groupCount <= 127 else { throw fail("truncated, or more than 127 script groups") }
        var groups: [Group] = []
        var groupOfScript = [Int8](repeating: -1, count: 256)
        for g in 0..<Int(groupCount) {
            guard let id = r.string(), let scriptCount = r.u8() else { throw fail("truncated group header") }
            var scripts: [UnicodeScript] = []
            for _ in 0..<scriptCount {
                guard let code = r.string() else { throw fail("truncated group header") }
                guard let s = UnicodeScript(code: code) else { throw fail("unknown script \(code)") }
                scripts.append(s)
                groupOfScript[Int(s.rawValue)] = Int8(g)
            }
            guard let maxOrder = r.u8(), let bits = r.u8(), let flags = version >= 2 ? r.u8() : 0, let scale = r.f32(),
                let count = r.u16(),
                (1...8).contains(maxOrder), (8...24).contains(bits), scale > 0, scale.isFinite, (1...255).contains(count)
            else { throw fail("bad group header for \(id)") }
            var languages: [LanguageTag] = []
            for _ in 0..<count {
                guard let tag = r.string(), let t = LanguageTag(tag) else { throw fail("bad language tag in \(id)") }
                languages.append(t)
            }
            var bias: [Float] = []
            for _ in 0..<count {
                // A prior cost in nats; anything but a small finite number is a broken model.
                guard let b = r.f32(), b.isFinite, abs(b) <= 16 else { throw fail("bad language bias in \(id)") }
                bias.append(b)
            }
            var fitScale = [Float](repeating: 1, count: Int(count))
            if version >= 3 {
                for l in 0..<Int(count) {
                    // A factor of the fit limit: NaN, 0 or a huge one would make every segment's
                    // confidence meaningless.
                    guard let f = r.f32(), f.isFinite, (0.25...16).contains(f) else { throw fail("bad fit scale in \(id)") }
                    fitScale[l] = f
                }
            }
            let size = (1 << Int(bits)) * Int(count)
            let offset = r.offset
            guard r.skip(size) else { throw fail("truncated table for \(id)") }
            groups.append(
                Group(
                    id: id, scripts: scripts, languages: languages, codes: languages.map(\.language), maxOrder: Int(maxOrder),
                    bits: Int(bits), wholeWords: flags & 1 != 0, scale: scale, fitScale: fitScale, bias: bias,
                    tableOffset: offset))
        }
        return Parsed(groups: groups, groupOfScript: groupOfScript, lowerBMP: bmp, lowerAstral: astral)
    }

    /// The group that models `script`'s letters, if any.
    package func groupIndex(of script: UnicodeScript) -> Int? {
        let g = groupOfScript[Int(script.rawValue)]
        return g < 0 ? nil : Int(g)
    }

    @inline(__always)
    func lowercased(_ v: UInt32) -> UInt32 {
        if v < 0x80 { return (v &- 0x41) < 26 ? v | 0x20 : v }
        if v < 0x10000 { return UInt32(lowerBMP[Int(v)]) }
        return lowerAstral[v] ?? v
    }

    /// Adds the penalties of one word's n-grams (and of the word itself, in a group with
    /// `Group.wholeWords`) to `acc` (one entry per language of `group`).
    /// `word` holds lowercased scalars framed by 0x02 and 0x03.
    func addPenalties(framedWord word: UnsafeBufferPointer<UInt32>, group: Group, into acc: UnsafeMutablePointer<UInt32>) {
        let count = group.languages.count
        let shift = UInt64(64 - group.bits)
        let maxOrder = group.maxOrder
        do {
            guard let base = storage.baseAddress else { return }
            let table = base + group.tableOffset
            let n = word.count
            for start in 0..<n {
                var h: UInt64 = 0xCBF2_9CE4_8422_2325
                let limit = min(maxOrder, n - start)
                for k in 0..<limit {
                    let c = word[start + k]
                    h = (h ^ UInt64(c)) &* 0x100_0000_01B3
                    if k == 0 && (c == 2 || c == 3) { continue }
                    let bucket = Int((h &* 0x9E37_79B9_7F4A_7C15) >> shift)
                    let row = table + bucket * count
                    for l in 0..<count { acc[l] &+= UInt32(row[l]) }
                }
            }
            if group.wholeWords && n > maxOrder {
                var h: UInt64 = 0xCBF2_9CE4_8422_2325
                for c in word { h = (h ^ UInt64(c)) &* 0x100_0000_01B3 }
                let row = table + Int((h &* 0x9E37_79B9_7F4A_7C15) >> shift) * count
                for l in 0..<count { acc[l] &+= UInt32(row[l]) }
            }
        }
    }

    /// Cursor over the model bytes.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var offset = 0
        mutating func bytes(_ n: Int) -> [UInt8]? {
            guard offset + n <= bytes.count else { return nil }
            defer { offset += n }
            return Array(bytes[offset..<(offset + n)])
        }
        mutating func skip(_ n: Int) -> Bool {
            guard offset + n <= bytes.count else { return false }
            offset += n
            return true
        }
        /// The next `n` bytes as a little-endian number, without copying them.
        private mutating func integer(_ n: Int) -> UInt64? {
            guard offset + n <= bytes.count else { return nil }
            var v: UInt64 = 0
            for i in 0..<n { v |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
            offset += n
            return v
        }
        mutating func u8() -> UInt8? { integer(1).map { UInt8($0) } }
        mutating func u16() -> UInt16? { integer(2).map { UInt16($0) } }
        mutating func u32() -> UInt32? { integer(4).map { UInt32($0) } }
        mutating func f32() -> Float? { u32().map { Float(bitPattern: $0) } }
        mutating func string() -> String? {
            guard let n = u8(), let b = bytes(Int(n)) else { return nil }
            return String(decoding: b, as: UTF8.self)
        }
    }
}
