import ParlaCore
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes a file that appears under its name only when ``commit()`` succeeds, so the
/// destination never holds a partial file.
///
/// On Linux the file is written unnamed (`O_TMPFILE`) in the destination's directory and linked
/// into place at commit: a process killed at any moment leaves nothing behind. Where the file
/// system cannot do that (NFS, for example), or a file already has the name, a hidden
/// temporary name (`.NAME.parla-PID-….tmp`) is used and renamed over the destination.
package final class AtomicFile {
    /// Where the file ends up.
    package let path: String
    /// The hidden name written to until commit, or nil while the file has no name at all.
    package private(set) var temporaryPath: String?
    private let directory: String
    private let name: String
    private var fd: Int32
    private var buffer: [UInt8] = []
    private var written = 0
    private let durable: Bool

    /// Creates the file, unnamed or under a temporary name, in `path`'s directory.
    /// - Parameters:
    ///   - path: where the file appears at ``commit()``.
    ///   - durable: flush the file to disk before naming it (`fsync`); without it, a complete
    ///     file still appears atomically, but a machine crash may lose it (batch rendering
    ///     syncs whole groups of files at once instead).
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)`` if it cannot be created.
    package convenience init(path: String, durable: Bool = true) throws(ParlaError) {
        try self.init(path: path, durable: durable, naming: .shared)
    }

    init(path: String, durable: Bool, naming: Naming) throws(ParlaError) {
        self.path = path
        self.durable = durable
        self.naming = naming
        (directory, name) = Self.split(path)
        var st = stat()
        if stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR {
            throw .unwritableOutput(path: path, reason: "it is a directory")
        }
        var fd = naming.unnamedFile(in: directory, mode: 0o644)
        if fd < 0 {
            guard stat(directory, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                throw .unwritableOutput(path: path, reason: "the directory '\(directory)' does not exist")
            }
            let (hidden, named) = Self.createHidden(directory, name)
            guard named >= 0 else { throw .unwritableOutput(path: path, reason: systemErrorMessage()) }
            fd = named
            temporaryPath = hidden
        }
        self.fd = fd
        buffer.reserveCapacity(1 << 16)
    }

    /// `path`'s directory ("." for a bare name, "/" at the root) and last component.
    static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        return (slash == path.startIndex ? "/" : String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    /// A new file under a hidden name next to the destination, with this process's id (for
    /// the cleanups), open for writing; the descriptor is -1 on failure (see `errno`).
    private static func createHidden(_ directory: String, _ name: String) -> (String, Int32) {
        var tmp = "", fd: Int32 = -1
        for attempt in 0..<16 {
            tmp = hiddenName(directory, name, attempt)
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 || errno != EEXIST { break }
        }
        return (tmp, fd)
    }

    private static func hiddenName(_ directory: String, _ name: String, _ attempt: Int) -> String {
        directory + "/." + name + ".parla-\(getpid())-\(attempt)-\(UInt32.random(in: 0...UInt32.max)).tmp"
    }

    /// Whether and how files are created unnamed: the process shares one policy, which turns
    /// unnamed files off for good at the first sign that they do not work here (a file system
    /// without `O_TMPFILE`, a sandbox that does not let `/proc/self/fd` name them); tests make
    /// their own.
    final class Naming: Sendable {
        let works: Atomic<Bool>
        /// Where an unnamed file's descriptor is seen as a path, to link it into place.
        let fdPaths: String

        init(unnamed: Bool, fdPaths: String = "/proc/self/fd/") {
            #if os(Linux)
                works = Atomic(unnamed)
            #else
                works = Atomic(false)
            #endif
            self.fdPaths = fdPaths
        }

        static let shared = Naming(unnamed: access("/proc/self/fd", X_OK) == 0)

        /// An unnamed file in `directory`, open for reading and writing, or -1 (see `errno`).
        func unnamedFile(in directory: String, mode: mode_t) -> Int32 {
            #if os(Linux)
                guard works.load(ordering: .relaxed) else { return -1 }
                // O_TMPFILE is `__O_TMPFILE | O_DIRECTORY`, a macro Swift does not import; this
                // value holds on x86-64, ARM, RISC-V, PowerPC and s390.
                let fd = open(directory, 0o20_000_000 | O_DIRECTORY | O_RDWR | O_CLOEXEC, mode)
                if fd < 0, errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL {
                    let e = errno
                    works.store(false, ordering: .relaxed)
                    errno = e
                }
                return fd
            #else
                return -1
            #endif
        }
    }

    private let naming: Naming

    /// Opens an unnamed file in `directory` for reading and writing (`O_TMPFILE`), or returns
    /// -1 where that cannot be done.
    package static func unnamedFile(in directory: String) -> Int32 {
        Naming.shared.unnamedFile(in: directory, mode: 0o600)
    }

    deinit {
        if fd >= 0 {
            close(fd)
            if let temporaryPath { unlink(temporaryPath) }
        }
    }

    /// Appends bytes (buffered).
    package func write(_ bytes: some Collection<UInt8>) throws(ParlaError) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= 1 << 16 { try flush() }
    }

    /// Appends samples as little-endian 16-bit PCM.
    package func write(samples: [Int16]) throws(ParlaError) {
        #if _endian(little)
            samples.withUnsafeBytes { buffer.append(contentsOf: $0) }
        #else
            for s in samples { withUnsafeBytes(of: s.littleEndian) { buffer.append(contentsOf: $0) } }
        #endif
        if buffer.count >= 1 << 16 { try flush() }
    }

    /// Overwrites bytes at `offset` (after flushing what is buffered).
    package func overwrite(_ bytes: [UInt8], at offset: Int) throws(ParlaError) {
        try flush()
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        guard n == bytes.count else { throw failure() }
    }

    /// Bytes written so far, buffered ones included.
    package var size: Int { written + buffer.count }

    private func flush() throws(ParlaError) {
        guard buffer.withUnsafeBytes({ writeAll(fd, $0) }) == nil else { throw failure() }
        written += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes the file and gives it its name: linked into place if it is unnamed and nothing
    /// has the name yet, renamed over the destination otherwise.
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``; the file is then removed.
    package func commit() throws(ParlaError) {
        do throws(ParlaError) {
            try flush()
            guard !durable || fsync(fd) == 0 || errno == EINVAL else { throw failure() }
            #if os(Linux)
                if temporaryPath == nil {
                    let proc = naming.fdPaths + "\(fd)"
                    if linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 {
                        close(fd)
                        fd = -1
                        return
                    }
                    // Replacing a file: a name of its own first, then an atomic rename.
                    var linked: String?
                    if errno == EEXIST {
                        for attempt in 0..<16 {
                            let tmp = Self.hiddenName(directory, name, attempt)
                            if linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0 { linked = tmp }
                            if linked != nil || errno != EEXIST { break }
                        }
                    }
                    if linked == nil {
                        if errno == ENOSPC || errno == EDQUOT || errno == EROFS || errno == EIO { throw failure() }
                        // The file cannot be named here: copy it under a hidden name, and use
                        // hidden names from now on.
                        naming.works.store(false, ordering: .relaxed)
                        linked = try copyToHiddenName()
                    }
                    temporaryPath = linked
                }
            #endif
            close(fd)
            fd = -1
            if let temporaryPath, rename(temporaryPath, path) != 0 {
                let error = failure()
                unlink(temporaryPath)
                throw error
            }
        } catch {
            discard()
            throw error
        }
    }

    /// Copies this (unnamed) file to a new file under a hidden name, synced if durable.
    private func copyToHiddenName() throws(ParlaError) -> String {
        let (tmp, out) = Self.createHidden(directory, name)
        guard out >= 0 else { throw failure() }
        var ok = true
        var offset: off_t = 0
        var block = [UInt8](repeating: 0, count: 1 << 16)
        while ok {
            let n = block.withUnsafeMutableBytes { readSome(fd, into: $0, at: Int64(offset)) }
            guard n > 0 else { ok = n == 0; break }
            ok = block[..<n].withUnsafeBytes { writeAll(out, $0) } == nil
            offset += off_t(n)
        }
        if ok && durable && fsync(out) != 0 && errno != EINVAL { ok = false }
        let error = failure()
        close(out)
        guard ok else {
            unlink(tmp)
            throw error
        }
        return tmp
    }

    /// Closes and removes the file; the destination is left untouched.
    package func discard() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
        if let temporaryPath { unlink(temporaryPath) }
    }

    private func failure() -> ParlaError {
        .unwritableOutput(path: path, reason: systemErrorMessage())
    }

    /// Creates directory `path` and its missing parents; returns `errno` on failure (`ENOTDIR`
    /// if `path` exists but is not a directory), nil on success.
    package static func makeDirectories(_ path: String) -> Int32? {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, 0o755) != 0 && errno != EEXIST { return errno }
        }
        var st = stat()
        guard stat(path, &st) == 0 else { return errno }
        return (st.st_mode & S_IFMT) == S_IFDIR ? nil : ENOTDIR
    }

    /// Writes `bytes` to `path` atomically.
    package static func write(_ bytes: [UInt8], to path: String) throws(ParlaError) {
        let f = try AtomicFile(path: path)
        do {
            try f.write(bytes)
            try f.commit()
        } catch {
            f.discard()
            throw error
        }
    }
}
