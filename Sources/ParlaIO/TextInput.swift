import ParlaCore
import FoundationEssentials
#if canImport(Glibc)
    import Glibc
#endif

/// Reading text input: files, standard input, and UTF-8 validation with the offset of the first bad byte.
package enum TextInput {
    /// Decodes `bytes` as UTF-8 (a leading byte-order mark is dropped).
    /// - Throws: ``/ParlaCore/ParlaError/invalidUTF8(source:byteOffset:)`` naming the first invalid byte.
    package static func decode(_ bytes: [UInt8], source: String) throws(ParlaError) -> String {
        if let bad = firstInvalidUTF8Offset(bytes) { throw .invalidUTF8(source: source, byteOffset: bad) }
        var body = bytes[...]
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
        return String(decoding: body, as: UTF8.self)
    }

    /// The 0-based offset where the first invalid UTF-8 sequence starts, or nil if all is valid.
    package static func firstInvalidUTF8Offset(_ bytes: [UInt8]) -> Int? {
        var i = 0
        let n = bytes.count
        while i < n {
            let b = bytes[i]
            if b < 0x80 { i += 1; continue }
            let len: Int
            var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
            switch b {
            case 0xC2...0xDF: len = 2
            case 0xE0: len = 3; lo = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: len = 3
            case 0xED: len = 3; hi = 0x9F
            case 0xF0: len = 4; lo = 0x90
            case 0xF1...0xF3: len = 4
            case 0xF4: len = 4; hi = 0x8F
            default: return i
            }
            guard i + 1 < n, (lo...hi).contains(bytes[i + 1]) else { return i }
            for k in 2..<len {
                guard i + k < n, (0x80...0xBF).contains(bytes[i + k]) else { return i }
            }
            i += len
        }
        return nil
    }

    /// Reads the file at `path` (or standard input for `-`) as UTF-8 text.
    /// - Throws: ``/ParlaCore/ParlaError/unreadableInput(path:reason:)`` or ``/ParlaCore/ParlaError/invalidUTF8(source:byteOffset:)``.
    package static func read(path: String) throws(ParlaError) -> String {
        if path == "-" { return try readStandardInput() }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadableInput(path: path, reason: systemErrorMessage()) }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            throw .unreadableInput(path: path, reason: "it is a directory")
        }
        let bytes = try readAll(fd, name: path)
        return try decode(bytes, source: "'\(path)'")
    }

    /// Reads all of standard input as UTF-8 text.
    package static func readStandardInput() throws(ParlaError) -> String {
        try decode(readAll(0, name: "standard input"), source: "Standard input")
    }

    private static func readAll(_ fd: Int32, name: String) throws(ParlaError) -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { readSome(fd, into: $0) }
            if n < 0 { throw .unreadableInput(path: name, reason: systemErrorMessage()) }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
        }
        return out
    }
}
