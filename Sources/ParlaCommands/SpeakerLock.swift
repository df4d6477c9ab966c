import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Subprocess
#if canImport(Glibc)
    import Glibc
#endif

/// One speaker per user: the process that speaks holds an exclusive lock (`fcntl`, a POSIX
/// record lock on the whole file) on a file in the user's runtime directory. The kernel drops
/// the lock when the process ends however it ends (`kill -9` included), so a lock is never
/// stale; and it tells who holds it (`F_GETLK`) from the moment the lock is taken. (The file
/// used to hold the speaker's PID, written just after it took an `flock`: a second press in
/// between found the lock held and no PID, and stopped nothing.)
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
        var lock = wholeFile()  // F_SETLK and F_SETLKW leave it as it is
        while fcntl(fd, queue ? F_SETLKW : F_SETLK, &lock) != 0 {
            let failure = errno
            if failure == EINTR { continue }
            guard failure == EAGAIN || failure == EACCES else {
                let message = systemErrorMessage()
                close(fd)
                throw UserError("Cannot lock \(path): \(message). Check that the file system of the runtime directory supports locks.")
            }
            var holder = wholeFile()
            guard fcntl(fd, F_GETLK, &holder) == 0 else {
                let message = systemErrorMessage()
                close(fd)
                throw UserError("Cannot find who holds \(path): \(message).")
            }
            if holder.l_type == Int16(F_UNLCK) { continue }  // released meanwhile: take it
            close(fd)
            // The kernel names no process it cannot show here (0: one in another PID namespace,
            // a container sharing this directory), and there is nothing to signal.
            guard holder.l_pid > 0 else {
                throw UserError(
                    "Another speaker holds \(path), in a process this one cannot see (another PID namespace), so it cannot be stopped from here. Stop it where it runs, or use --queue to wait for it."
                )
            }
            kill(holder.l_pid, SIGTERM)
            return nil
        }
        return fd
    }

    /// A write lock on the whole file, however long it grows.
    private static func wholeFile() -> flock {
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 0
        return lock
    }
}
