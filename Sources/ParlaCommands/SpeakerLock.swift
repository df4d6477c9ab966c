import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Subprocess
#if canImport(Glibc)
    import Glibc
#endif

/// One speaker per user: the process that speaks holds an exclusive `flock` on a file in the
/// user's runtime directory and writes its PID there. The kernel drops the lock when the process
/// ends however it ends (`kill -9` included), so a lock is never stale.
enum SpeakerLock {
    static var path: String {
        if let dir = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !dir.isEmpty {
            return dir + "/parla-speak-selection.lock"
        }
        return "/tmp/parla-speak-selection-\(getuid()).lock"
    }

    /// Takes the lock and returns its descriptor (held until exit). If another process holds it:
    /// with `queue`, waits for it; otherwise sends it SIGTERM and returns nil.
    static func acquire(queue: Bool) throws -> Int32? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw UserError("Cannot open the lock file \(path): \(systemErrorMessage()). Check that the directory is writable.")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if queue {
                while flock(fd, LOCK_EX) != 0 && errno == EINTR {}
            } else {
                var buffer = [UInt8](repeating: 0, count: 32)
                let n = pread(fd, &buffer, 31, 0)
                if n > 0, let pid = Int32(String(decoding: buffer[0..<n], as: UTF8.self).trimmed()), pid > 0 {
                    kill(pid, SIGTERM)
                }
                close(fd)
                return nil
            }
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
    }
}
