import ParlaCore
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes all of `bytes` to `fd`, through short writes and interrupted calls.
/// - Returns: nil once everything is written, else the `errno` of the failure (`errno` itself
///   is left as the failing call set it, for callers that report it).
@discardableResult
package func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
    do {
        _ = try FileDescriptor(rawValue: fd).writeAll(bytes)
        return nil
    } catch let error as Errno {
        return error.rawValue
    } catch {
        return EIO
    }
}

/// Reads what `fd` has, at most `buffer.count` bytes (from `offset` when given, without
/// moving the file position), through interrupted calls.
/// - Returns: the number of bytes read, 0 at the end of the file, or -1 on failure with
///   `errno` set (for callers that report it with ``systemErrorMessage(_:)``).
package func readSome(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64? = nil) -> Int {
    do {
        let descriptor = FileDescriptor(rawValue: fd)
        if let offset { return try descriptor.read(fromAbsoluteOffset: offset, into: buffer) }
        return try descriptor.read(into: buffer)
    } catch let error as Errno {
        errno = error.rawValue
        return -1
    } catch {
        errno = EIO
        return -1
    }
}

/// Writes all of `bytes` to `fd` (see ``writeAll(_:_:)-(_,UnsafeRawBufferPointer)``).
@discardableResult
package func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
    bytes.withUnsafeBytes { writeAll(fd, $0) }
}

/// Waits for the child `pid` to end, through interrupted calls.
/// - Returns: its raw wait status, or -1 if `pid` is not a child of this process (or nil).
@discardableResult
package func waitForExit(_ pid: pid_t?) -> Int32 {
    guard let pid else { return -1 }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { return -1 }
    }
    return status
}

/// The system's message for the error number `code` (by default the last failed call's).
package func systemErrorMessage(_ code: Int32 = errno) -> String {
    Errno(rawValue: code).description
}

/// Writes all of `bytes` to `fd`, retrying after signals and partial writes; false on error
/// (a socket whose reader is gone fails with EPIPE, without SIGPIPE).
///
/// Not ParlaIO's `writeAll`: a socket is written with `send(MSG_NOSIGNAL)`, so that an engine
/// host that died cannot kill the program Parla runs in, and the library need not ignore
/// SIGPIPE for the whole process behind its host's back.
package func writeFully(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { buf in
        guard var p = buf.baseAddress else { return true }
        var left = buf.count
        while left > 0 {
            var n = Glibc.send(fd, p, left, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == ENOTSOCK { n = Glibc.write(fd, p, left) }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            p += n
            left -= n
        }
        return true
    }
}

/// Fills `buffer` from `fd`; false at end of file or on error.
package func readFully(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard let base = buffer.baseAddress else { return true }
    var got = 0
    while got < buffer.count {
        let n = readSome(fd, into: UnsafeMutableRawBufferPointer(start: base + got, count: buffer.count - got))
        if n <= 0 { return false }
        got += n
    }
    return true
}

/// Reads messages (a type byte, a little-endian 32-bit payload length, the payload) from a
/// descriptor through a buffer: one `read` brings in every message the other side has
/// written, where reading each header and payload on its own took two system calls per
/// message (an engine host's run sends an audio block and a few events at a time).
package struct MessageReader {
    package let fd: Int32
    /// The longest payload accepted; a longer one ends the stream as garbage.
    package let limit: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var end = 0
    /// A message longer than ``limit`` was announced: nothing more is read.
    private var broken = false

    package init(fd: Int32, limit: Int = 64 << 20) {
        self.fd = fd
        self.limit = limit
    }

    /// The next whole message already read, or nil if more must be read first (``fill()``).
    /// The payload is a slice of the reader's buffer, valid until the next call.
    package mutating func next() -> (type: UInt8, payload: ArraySlice<UInt8>)? {
        guard !broken, end - start >= 5 else { return nil }
        let length = payloadLength(at: start)
        guard length <= limit else {
            broken = true
            return nil
        }
        guard end - start >= 5 + length else { return nil }
        let type = buffer[start]
        let payload = buffer[(start + 5)..<(start + 5 + length)]
        start += 5 + length
        return (type, payload)
    }

    /// The payload length in the header of the message at `index` of the buffer.
    private func payloadLength(at index: Int) -> Int {
        Int(UInt32(buffer[index + 1]) | UInt32(buffer[index + 2]) << 8 | UInt32(buffer[index + 3]) << 16 | UInt32(buffer[index + 4]) << 24)
    }

    /// Reads what the descriptor has (blocking until something comes, so poll it first for a
    /// deadline); false at its end, on an error, or after garbage.
    package mutating func fill() -> Bool {
        guard !broken else { return false }
        // Keep the unread part at the front, and room for at least 64 KiB more (or the rest of
        // a long message).
        if start > 0 {
            buffer.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return }
                memmove(base, base + start, end - start)
            }
            end -= start
            start = 0
        }
        var wanted = end + 65536
        if end >= 5, payloadLength(at: 0) <= limit { wanted = max(wanted, 5 + payloadLength(at: 0)) }
        if buffer.count < wanted { buffer.append(contentsOf: repeatElement(0, count: wanted - buffer.count)) }
        let n = buffer.withUnsafeMutableBytes { raw in
            readSome(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[end...]))
        }
        guard n > 0 else { return false }
        end += n
        return true
    }
}
