#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads newline-terminated lines from a file descriptor as they arrive, holding at most one
/// line plus one 64 KiB block in memory.
public struct LineReader {
    /// The descriptor read from (not closed by the reader).
    public let fd: Int32
    /// What the input is called in errors.
    public let name: String
    private var buffer: [UInt8] = []
    private var start = 0
    private var eof = false

    /// Creates a reader of `fd`, called `name` in error messages.
    public init(fd: Int32, name: String = "standard input") {
        self.fd = fd
        self.name = name
    }

    /// Whether a complete line is already buffered (more input is waiting).
    public var hasBufferedLine: Bool { buffer[start...].contains(0x0A) }

    /// The next line without its newline, or nil at the end of the input.
    /// - Throws: ``ParlaError/unreadableInput(path:reason:)``.
    public mutating func next() throws(ParlaError) -> [UInt8]? {
        while true {
            if let nl = buffer[start...].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<nl])
                start = nl + 1
                return line
            }
            if eof {
                guard start < buffer.count else { return nil }
                let line = Array(buffer[start...])
                start = buffer.count
                return line
            }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            let n = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 65536) { block in
                let n = read(fd, block.baseAddress, 65536)
                if n > 0 { buffer.append(contentsOf: block[0..<n]) }
                return n
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadableInput(path: name, reason: String(cString: strerror(errno)))
            }
            if n == 0 { eof = true }
        }
    }
}
