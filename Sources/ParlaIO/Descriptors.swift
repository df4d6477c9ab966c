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
