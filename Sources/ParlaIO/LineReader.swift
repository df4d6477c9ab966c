import ParlaCore
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads newline-terminated lines from a file descriptor as they arrive, holding at most one
/// line (up to `limit` bytes) plus one 64 KiB block in memory.
package struct LineReader {
    /// The descriptor read from (not closed by the reader).
    package let fd: Int32
    /// What the input is called in errors.
    package let name: String
    /// The longest line kept whole; longer lines are cut (see ``lastLineWasCut``).
    package let limit: Int
    /// Whether the line ``next()`` returned last was longer than ``limit`` bytes: only its
    /// first `limit` bytes were returned, and the rest was read and dropped.
    package private(set) var lastLineWasCut = false
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0  // bytes of buffer[start...] known to hold no newline
    private var dropping = false  // inside a line over the limit: skip to its end
    private var eof = false

    /// Creates a reader of `fd`, called `name` in error messages, cutting lines at `limit` bytes.
    package init(fd: Int32, name: String = "standard input", limit: Int = Int.max) {
        self.fd = fd
        self.name = name
        self.limit = limit
    }

    /// Whether a complete line is already buffered (more input is waiting).
    package var hasBufferedLine: Bool { buffer[(start + scanned)...].contains(0x0A) }

    /// The next line without its newline, or nil at the end of the input.
    /// - Throws: ``/ParlaCore/ParlaError/unreadableInput(path:reason:)``.
    package mutating func next() throws(ParlaError) -> [UInt8]? {
        lastLineWasCut = false
        while true {
            if let nl = buffer[(start + scanned)...].firstIndex(of: 0x0A) {
                let cut = nl - start > limit
                let line = Array(buffer[start..<(cut ? start + limit : nl)])
                lastLineWasCut = dropping || cut
                dropping = false
                start = nl + 1
                scanned = 0
                return line
            }
            scanned = buffer.count - start
            if eof {
                guard start < buffer.count || dropping else { return nil }
                let cut = buffer.count - start > limit
                let line = Array(buffer[start..<(cut ? start + limit : buffer.count)])
                lastLineWasCut = dropping || cut
                dropping = false
                start = buffer.count
                scanned = 0
                return line
            }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            // A line over the limit: keep its first `limit` bytes and drop the rest as it comes.
            if buffer.count > limit {
                dropping = true
                buffer.removeLast(buffer.count - limit)
                scanned = limit
            }
            let n = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 65536) { block in
                let n = readSome(fd, into: UnsafeMutableRawBufferPointer(block))
                if n > 0 { buffer.append(contentsOf: block[0..<n]) }
                return n
            }
            if n < 0 { throw .unreadableInput(path: name, reason: systemErrorMessage()) }
            if n == 0 { eof = true }
        }
    }
}
