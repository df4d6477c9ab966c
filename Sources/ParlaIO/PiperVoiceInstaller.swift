import FoundationEssentials
import ParlaCore
#if canImport(Glibc)
    import Glibc
#endif

// Piper's neural voices installed by name from Piper's catalog: the rhasspy/piper-voices
// repository on Hugging Face, or a mirror with the same layout (voices.json at its root, each
// voice's files at the paths it lists). Files are fetched with curl (resumable, proxies, file://
// mirrors), checked against the catalog's size and md5 with md5sum, and a voice appears in its
// directory only once every file is checked: the model first, its NAME.onnx.json last (a
// voice is listed only when both are there; VoiceCatalogFiles).

/// What went wrong installing or removing a voice, and what to do about it.
package enum VoiceInstallError: Error, Equatable, CustomStringConvertible {
    /// No voice of that name in the catalog; `nearest` are the closest names.
    case unknownVoice(String, nearest: [String])
    /// The catalog (or a file of it) could not be reached: no network, no such host, no such directory.
    case unreachable(url: String, reason: String)
    /// The server answered an HTTP error.
    case httpError(url: String, status: Int)
    /// The catalog is not JSON, or not Piper's catalog.
    case badCatalog(url: String, reason: String)
    /// A catalog entry lists no model, or a file without its size or md5.
    case badEntry(voice: String, reason: String)
    /// A file's size or md5 is not the catalog's: it was deleted.
    case checksumMismatch(file: String, expected: String, actual: String)
    /// A transfer stopped in the middle; what arrived is kept to resume.
    case transferBroken(file: String, reason: String)
    /// Not enough room where the voice goes.
    case diskFull(directory: String, needed: Int64, available: Int64?)
    /// Another install of the same voice holds its lock.
    case busy(voice: String)
    /// `remove` of a voice that is not in the directory Parla installs into.
    case notInstalled(String, directory: String, foundIn: String?)
    /// A file could not be written or moved.
    case unwritable(path: String, reason: String)
    /// A tool Parla runs (curl, md5sum) is missing.
    case missingTool(String)
    /// Ctrl-C or a signal stopped the transfer.
    case interrupted

    package var description: String {
        switch self {
        case .unknownVoice(let name, let nearest):
            let hint = nearest.isEmpty ? "" : " Did you mean \(nearest.joined(separator: ", "))?"
            return "No voice named '\(name)' in Piper's catalog.\(hint) Run 'parla voices --available' to list them."
        case .unreachable(let url, let reason):
            return "Cannot reach \(url): \(reason). Check the network, or point --catalog (PARLA_VOICE_CATALOG) at a mirror."
        case .httpError(let url, let status):
            return "The server answered HTTP \(status) for \(url). Nothing was installed; try again later, or use --catalog with a mirror."
        case .badCatalog(let url, let reason):
            return
                "\(url) is not Piper's voice catalog: \(reason). Check --catalog (PARLA_VOICE_CATALOG): it names a directory or URL holding voices.json."
        case .badEntry(let voice, let reason):
            return "The catalog's entry for \(voice) is unusable: \(reason). Nothing was installed; report it to the catalog's maintainers."
        case .checksumMismatch(let file, let expected, let actual):
            return "\(file) arrived damaged (expected \(expected), got \(actual)); it was deleted. Run the command again."
        case .transferBroken(let file, let reason):
            return "The transfer of \(file) broke off (\(reason)); what arrived is kept. Run the same command again to resume."
        case .diskFull(let directory, let needed, let available):
            let free = available.map { ", \(megabytes($0)) free" } ?? ""
            return
                "Not enough space in \(directory): the voice needs \(megabytes(needed))\(free). Free some space and run the command again."
        case .busy(let voice):
            return "Another 'parla voices install' is installing \(voice) now. Wait for it to finish."
        case .notInstalled(let name, let directory, let foundIn):
            if let foundIn {
                return
                    "\(name) is in \(foundIn), which 'parla voices install' did not write to (it installs into \(directory)); remove its files there by hand."
            }
            return "\(name) is not installed in \(directory). Run 'parla voices' to list the installed voices."
        case .unwritable(let path, let reason):
            return "Cannot write \(path): \(reason)."
        case .missingTool(let tool):
            return
                "Installing voices needs '\(tool)', which is not installed. Install it (Debian: apt-get install \(tool == "md5sum" ? "coreutils" : tool))."
        case .interrupted:
            return "Interrupted; what arrived is kept. Run the same command again to resume."
        }
    }
}

/// The value of environment variable `name`, nil if it is unset or empty.
package func environmentValue(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
}

/// Bytes as megabytes with one decimal ("63.2 MB"), or kilobytes below a megabyte ("4.8 kB").
package func megabytes(_ bytes: Int64) -> String {
    let small = bytes < 999_950
    let tenths = (bytes + (small ? 50 : 50_000)) / (small ? 100 : 100_000)
    return "\(tenths / 10).\(tenths % 10) \(small ? "kB" : "MB")"
}

/// One voice of Piper's catalog (an entry of voices.json).
package struct PiperCatalogVoice: Sendable, Equatable {
    /// A file of the voice: its path under the catalog's root, size and md5 (nil where the catalog lacks them).
    package struct File: Sendable, Equatable {
        package var path: String
        package var size: Int64?
        package var md5: String?
        /// The name it is installed under: the voice's NAME.onnx and NAME.onnx.json keep their
        /// names, anything else (the model card) becomes NAME.FILE.
        package func installedName(voice: String) -> String {
            let base = path.split(separator: "/").last.map(String.init) ?? path
            return base.hasPrefix(voice + ".onnx") ? base : voice + "." + base
        }
    }
    package var name: String
    /// The catalog's language code, such as "en_US".
    package var languageCode: String
    /// The language's English name and country ("English", "United States").
    package var languageName: String
    package var country: String?
    package var quality: String?
    package var speakers: Int
    package var files: [File]

    /// The language as a BCP 47 tag (en_US → en-US), nil if the code is not one.
    package var language: LanguageTag? { LanguageTag(String(languageCode.map { $0 == "_" ? "-" : $0 })) }
    /// The sum of its files' sizes.
    package var size: Int64 { files.reduce(0) { $0 + ($1.size ?? 0) } }

    /// Its files, checked: a model and its config, each with a size and an md5.
    /// - Throws: ``VoiceInstallError/badEntry(voice:reason:)``.
    package func checkedFiles() throws(VoiceInstallError) -> [File] {
        guard !files.isEmpty else { throw .badEntry(voice: name, reason: "it lists no files") }
        let names = files.map { $0.installedName(voice: name) }
        for needed in [name + ".onnx", name + ".onnx.json"] where !names.contains(needed) {
            throw .badEntry(voice: name, reason: "it lists no \(needed)")
        }
        for file in files where file.size == nil || file.md5 == nil || file.md5?.count != 32 {
            throw .badEntry(voice: name, reason: "\(file.path) has no size_bytes or md5_digest")
        }
        return files
    }
}

/// Piper's catalog: voices.json, read from a URL (https://, http://, file://) or a directory.
package struct PiperVoiceIndex: Sendable {
    /// The catalog's root, without a trailing slash.
    package let root: String
    /// The voices by name.
    package let voices: [String: PiperCatalogVoice]

    /// The rhasspy/piper-voices repository on Hugging Face, which piper-tts reads too.
    package static let defaultRoot = "https://huggingface.co/rhasspy/piper-voices/resolve/main"

    /// `--catalog`, else `$PARLA_VOICE_CATALOG`, else Hugging Face; a plain path becomes a file:// URL.
    package static func root(_ explicit: String?) -> String {
        var root = explicit ?? environmentValue("PARLA_VOICE_CATALOG") ?? defaultRoot
        if !root.contains("://") {
            let absolute = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
            root = "file://" + absolute
        }
        while root.hasSuffix("/") { root.removeLast() }
        return root
    }

    /// Fetches and reads the catalog at `root` (see ``root(_:)``).
    /// - Throws: ``VoiceInstallError``: unreachable, an HTTP error, or not a catalog.
    package static func load(root: String, scratch: String) throws(VoiceInstallError) -> PiperVoiceIndex {
        let path = scratch + "/voices.json.\(getpid())"
        defer { unlink(path) }
        try Fetch.file(url: root + "/voices.json", to: path, resume: false, maxSize: 256 << 20) { _ in }
        guard let bytes = FileManager.default.contents(atPath: path) else {
            throw .unwritable(path: path, reason: systemErrorMessage())
        }
        return try parse(Array(bytes), root: root)
    }

    /// Reads voices.json's bytes.
    /// - Throws: ``VoiceInstallError/badCatalog(url:reason:)``.
    package static func parse(_ bytes: [UInt8], root: String) throws(VoiceInstallError) -> PiperVoiceIndex {
        let url = root + "/voices.json"
        let entries: [String: Entry]
        do {
            entries = try JSONDecoder().decode([String: Entry].self, from: Data(bytes))
        } catch DecodingError.dataCorrupted {
            throw .badCatalog(url: url, reason: "it is not JSON")
        } catch {
            throw .badCatalog(url: url, reason: "it is JSON, but not an object of voices with their files (\(error))")
        }
        var voices: [String: PiperCatalogVoice] = [:]
        for (key, entry) in entries {
            voices[key] = PiperCatalogVoice(
                name: key, languageCode: entry.language?.code ?? "", languageName: entry.language?.name_english ?? "",
                country: entry.language?.country_english, quality: entry.quality, speakers: entry.num_speakers ?? 1,
                files: (entry.files ?? [:]).map {
                    PiperCatalogVoice.File(path: $0.key, size: $0.value.size_bytes, md5: $0.value.md5_digest)
                }
                .sorted { $0.path < $1.path })
        }
        return PiperVoiceIndex(root: root, voices: voices)
    }

    private struct Entry: Decodable {
        struct Language: Decodable {
            var code: String?
            var name_english: String?
            var country_english: String?
        }
        struct FileInfo: Decodable {
            var size_bytes: Int64?
            var md5_digest: String?
        }
        var language: Language?
        var quality: String?
        var num_speakers: Int?
        var files: [String: FileInfo]?
    }

    /// The voice named `name` (`piper.` in front is allowed).
    /// - Throws: ``VoiceInstallError/unknownVoice(_:nearest:)`` with up to three close names.
    package func voice(named name: String) throws(VoiceInstallError) -> PiperCatalogVoice {
        let bare = name.hasPrefix("piper.") ? String(name.dropFirst("piper.".count)) : name
        if let v = voices[bare] { return v }
        if let v = voices.first(where: { $0.key.lowercased() == bare.lowercased() })?.value { return v }
        throw .unknownVoice(name, nearest: Self.nearest(to: bare, in: Array(voices.keys)))
    }

    /// Up to three names close to `name`: those containing it, then the fewest edits away.
    package static func nearest(to name: String, in names: [String]) -> [String] {
        let key = name.lowercased()
        let containing = names.filter { $0.lowercased().contains(key) }.sorted()
        if !key.isEmpty, !containing.isEmpty { return Array(containing.prefix(3)) }
        let limit = max(3, key.count / 3)
        return
            names.map { ($0, editDistance(Array(key.utf8), Array($0.lowercased().utf8))) }
            .filter { $0.1 <= limit }
            .sorted { ($0.1, $0.0) < ($1.1, $1.0) }
            .prefix(3).map(\.0)
    }

    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}

/// What an install reports as it goes.
package enum VoiceInstallProgress: Sendable {
    /// A file begins: its installed name, its size, and the bytes already there (resumed).
    case fileStarted(name: String, size: Int64, resumedAt: Int64)
    /// Bytes of the current file so far.
    case bytes(Int64)
    /// The current file arrived and matches its size and md5.
    case fileChecked(name: String, size: Int64)
    /// The voice is in place.
    case installed(voice: String, directory: String)
    /// The voice was already installed there; nothing was fetched.
    case alreadyInstalled(voice: String, directory: String)
}

/// Installs and removes Piper voices in one directory (`~/.local/share/parla/voices`, or a
/// prefix's `share/parla/voices`).
package struct PiperVoiceInstaller: Sendable {
    /// Where voices go.
    package let directory: String

    package init(directory: String) { self.directory = directory }

    /// The user's voice directory: `$XDG_DATA_HOME/parla/voices`, else `~/.local/share/parla/voices`.
    package static var userDirectory: String? {
        if let data = environmentValue("XDG_DATA_HOME") { return data + "/parla/voices" }
        return environmentValue("HOME").map { $0 + "/.local/share/parla/voices" }
    }

    /// The installed prefix's voice directory: `share/parla/voices` beside the program's `bin`.
    package static var systemDirectory: String? {
        guard let exe = VoiceCatalog.resolvedPath("/proc/self/exe") else { return nil }
        let bin = String(exe[..<(exe.lastIndex(of: "/") ?? exe.startIndex)])
        let prefix = String(bin[..<(bin.lastIndex(of: "/") ?? bin.startIndex)])
        return (prefix.isEmpty ? "" : prefix) + "/share/parla/voices"
    }

    /// Hidden beside the voices (the same file system, so a rename moves a file in): files
    /// being fetched, and the locks.
    private var staging: String { directory + "/.parla-partial" }

    /// Whether `name`'s model and config are both in the directory.
    package func isInstalled(_ name: String) -> Bool {
        access(directory + "/" + name + ".onnx", F_OK) == 0 && access(directory + "/" + name + ".onnx.json", F_OK) == 0
    }

    /// Fetches `voice`'s files into the staging directory (resuming what an earlier try left),
    /// checks each against the catalog's size and md5, and moves them into the directory, the
    /// config last. Holds a lock so that two installs of one voice cannot interleave.
    /// - Throws: ``VoiceInstallError``; nothing half-written is ever in the directory.
    package func install(
        _ voice: PiperCatalogVoice, from index: PiperVoiceIndex, progress: (VoiceInstallProgress) -> Void
    ) throws(VoiceInstallError) {
        let files = try voice.checkedFiles()
        if isInstalled(voice.name) {
            progress(.alreadyInstalled(voice: voice.name, directory: directory))
            return
        }
        let stage = staging + "/" + voice.name
        for dir in [directory, staging, stage] {
            if let code = AtomicFile.makeDirectories(dir) { throw .unwritable(path: dir, reason: String(cString: strerror(code))) }
        }
        let lockPath = staging + "/" + voice.name + ".lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lock >= 0 else { throw .unwritable(path: lockPath, reason: systemErrorMessage()) }
        defer { close(lock) }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else { throw .busy(voice: voice.name) }
        // Whatever happens, nothing but a broken transfer's files is left: the staging
        // directories go when empty, and the lock. (An install that opened the lock file just
        // before it goes could lock the removed file; two installs could then write the same
        // files, and the md5 check would refuse the result.)
        defer {
            rmdir(stage)
            unlink(lockPath)
            rmdir(staging)
        }
        // Another install may have finished while this one waited for nothing.
        if isInstalled(voice.name) {
            progress(.alreadyInstalled(voice: voice.name, directory: directory))
            return
        }
        // Small files first: a wrong entry is found before the model's megabytes.
        let ordered = files.sorted { ($0.size ?? 0) < ($1.size ?? 0) }
        let partial = ordered.reduce(Int64(0)) { $0 + fileSize(stage + "/" + $1.installedName(voice: voice.name) + ".part") }
        let needed = voice.size - partial
        if let available = freeSpace(directory), available < needed + (1 << 20) {
            throw .diskFull(directory: directory, needed: needed, available: available)
        }
        for file in ordered {
            let name = file.installedName(voice: voice.name)
            let part = stage + "/" + name + ".part"
            let size = file.size ?? 0
            var have = fileSize(part)
            if have > size {
                unlink(part)
                have = 0
            }
            progress(.fileStarted(name: name, size: size, resumedAt: have))
            if have < size || size == 0 {
                try fetchWithRetries(url: index.root + "/" + file.path, to: part, name: name, progress: progress)
            }
            try check(part, name: name, file: file)
            progress(.fileChecked(name: name, size: size))
        }
        // Into place: the config last, so that the voice is listed only when it is whole.
        let inOrder = ordered.sorted { a, b in
            a.installedName(voice: voice.name).hasSuffix(".onnx.json") ? false : b.installedName(voice: voice.name).hasSuffix(".onnx.json")
        }
        for file in inOrder {
            let name = file.installedName(voice: voice.name)
            let part = stage + "/" + name + ".part"
            let fd = open(part, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                fsync(fd)
                close(fd)
            }
            guard rename(part, directory + "/" + name) == 0 else {
                throw .unwritable(path: directory + "/" + name, reason: systemErrorMessage())
            }
        }
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
        progress(.installed(voice: voice.name, directory: directory))
    }

    /// Removes `name` (`piper.` in front allowed) from the directory: its config first (the
    /// voice is then no longer listed), then its model and the rest, and its prepared copies
    /// in Parla's cache.
    /// - Throws: ``VoiceInstallError/notInstalled(_:directory:foundIn:)`` if the voice is not
    ///   there (`elsewhere`: the directories the catalog reads, to say where it is instead).
    package func remove(_ name: String, elsewhere: [String]) throws(VoiceInstallError) -> [String] {
        let bare = name.hasPrefix("piper.") ? String(name.dropFirst("piper.".count)) : name
        let config = directory + "/" + bare + ".onnx.json", model = directory + "/" + bare + ".onnx"
        guard access(config, F_OK) == 0 || access(model, F_OK) == 0 else {
            let other = elsewhere.first { $0 != directory && access($0 + "/" + bare + ".onnx", F_OK) == 0 }
            throw .notInstalled(bare, directory: directory, foundIn: other)
        }
        var removed: [String] = []
        let others = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix(bare + ".") && $0 != bare + ".onnx" && $0 != bare + ".onnx.json" && !$0.hasPrefix(bare + ".onnx.") }
        for path in [config, model] + others.sorted().map({ directory + "/" + $0 }) where access(path, F_OK) == 0 {
            guard unlink(path) == 0 else { throw .unwritable(path: path, reason: systemErrorMessage()) }
            removed.append(path)
        }
        removed += Self.removePreparedCopies(of: bare)
        return removed
    }

    /// Deletes the prepared copies of model `stem` in Parla's cache (`STEM-SIZE-TIME-rN-ort….ort*`,
    /// piper_voice.c), returning their paths.
    private static func removePreparedCopies(of stem: String) -> [String] {
        let env = environmentValue
        let dir: String
        if let explicit = env("PARLA_PIPER_CACHE") {
            guard explicit != "0" else { return [] }
            dir = explicit
        } else if let cache = env("XDG_CACHE_HOME") {
            dir = cache + "/parla/piper-models"
        } else if let home = env("HOME") {
            dir = home + "/.cache/parla/piper-models"
        } else {
            return []
        }
        var removed: [String] = []
        for item in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] where item.hasPrefix(stem + "-") {
            // SIZE-TIME-r…: two numbers, then the prepared version.
            let rest = item.dropFirst(stem.count + 1).split(separator: "-", maxSplits: 2)
            guard rest.count == 3, rest[0].allSatisfy(\.isNumber), rest[1].allSatisfy(\.isNumber), rest[2].hasPrefix("r"),
                item.contains(".ort")
            else { continue }
            if unlink(dir + "/" + item) == 0 { removed.append(dir + "/" + item) }
        }
        return removed
    }

    /// Fetches with resume, trying again twice when the transfer breaks off.
    private func fetchWithRetries(url: String, to part: String, name: String, progress: (VoiceInstallProgress) -> Void)
        throws(VoiceInstallError)
    {
        var attempt = 0
        while true {
            do {
                try Fetch.file(url: url, to: part, resume: true, maxSize: nil) { progress(.bytes($0)) }
                return
            } catch .transferBroken(_, let reason) {
                attempt += 1
                if attempt > 2 { throw .transferBroken(file: name, reason: reason) }
            } catch .diskFull(_, let needed, let available) {
                unlink(part)
                throw .diskFull(directory: directory, needed: needed, available: available)
            } catch {
                if case .httpError = error { unlink(part) }
                throw error
            }
        }
    }

    /// Checks a fetched file's size and md5; a mismatch deletes it.
    private func check(_ part: String, name: String, file: PiperCatalogVoice.File) throws(VoiceInstallError) {
        let size = fileSize(part)
        if let expected = file.size, size != expected {
            unlink(part)
            throw .checksumMismatch(file: name, expected: "\(expected) bytes", actual: "\(size) bytes")
        }
        let digest = try Fetch.md5(of: part)
        if let expected = file.md5, digest != expected.lowercased() {
            unlink(part)
            throw .checksumMismatch(file: name, expected: "md5 \(expected)", actual: "md5 \(digest)")
        }
    }

    private func fileSize(_ path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : 0
    }

    private func freeSpace(_ path: String) -> Int64? {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return nil }
        return Int64(fs.f_bavail) * Int64(fs.f_frsize)
    }
}

/// curl and md5sum, run as child processes.
enum Fetch {
    /// Fetches `url` into `path` (appending to what is there if `resume`), reporting the
    /// file's size as it grows.
    /// - Throws: ``VoiceInstallError``, from curl's exit status and message.
    static func file(url: String, to path: String, resume: Bool, maxSize: Int64?, progress: (Int64) -> Void) throws(VoiceInstallError) {
        var args = [
            "curl", "--fail", "--location", "--silent", "--show-error", "--connect-timeout", "20",
            // A transfer slower than 1 kB/s for 30 s has stalled.
            "--speed-limit", "1024", "--speed-time", "30", "--output", path,
        ]
        if resume && access(path, F_OK) == 0 { args += ["--continue-at", "-"] }
        if let maxSize { args += ["--max-filesize", String(maxSize)] }
        args.append(url)
        let messages = path + ".log"
        defer { unlink(messages) }
        let status = try run(args, stdout: "/dev/null", stderr: messages) {
            var st = stat()
            if stat(path, &st) == 0 { progress(Int64(st.st_size)) }
        }
        let message =
            (FileManager.default.contents(atPath: messages).map { String(decoding: $0, as: UTF8.self) } ?? "")
            .split(separator: "\n").last.map { $0.hasPrefix("curl: ") ? String($0.dropFirst(6)) : String($0) } ?? ""
        let reason = message.isEmpty ? "curl exited with status \(status)" : message
        switch status {
        case 0: return
        case 22:
            // "(22) The requested URL returned error: 404"
            let code = message.split(separator: " ").last.flatMap { Int($0) } ?? 0
            throw .httpError(url: url, status: code)
        case 5, 6, 7, 35, 60:
            throw .unreachable(url: url, reason: reason)
        case 37:
            throw .unreachable(url: url, reason: "no such file")
        case 23:
            var fs = statvfs()
            let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
            let free = statvfs(dir, &fs) == 0 ? Int64(fs.f_bavail) * Int64(fs.f_frsize) : nil
            if let free, free < 1 << 20 { throw .diskFull(directory: dir, needed: 0, available: free) }
            throw .unwritable(path: path, reason: reason)
        case 33:
            // The server cannot resume: start again from nothing.
            unlink(path)
            throw .transferBroken(file: url, reason: "the server cannot resume a transfer")
        case 63:
            throw .badCatalog(url: url, reason: "it is larger than \(megabytes(maxSize ?? 0))")
        case 128 + SIGINT, 128 + SIGTERM, -SIGINT, -SIGTERM:
            throw .interrupted
        default:
            throw .transferBroken(file: url, reason: reason)
        }
    }

    /// The md5 of the file at `path`, in lower-case hex.
    static func md5(of path: String) throws(VoiceInstallError) -> String {
        let out = path + ".md5"
        defer { unlink(out) }
        let status = try run(["md5sum", "--", path], stdout: out, stderr: "/dev/null") {}
        let text = FileManager.default.contents(atPath: out).map { String(decoding: $0, as: UTF8.self) } ?? ""
        guard status == 0, let digest = text.split(separator: " ").first, digest.count == 32 else {
            throw .unwritable(path: path, reason: "md5sum could not read it")
        }
        return digest.lowercased()
    }

    /// Runs `args` (found on PATH) with its output in files, calling `poll` every 100 ms
    /// until it exits; returns its exit status (128 + the signal if one ended it).
    private static func run(_ args: [String], stdout: String, stderr: String, poll: () -> Void) throws(VoiceInstallError) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var attributes = posix_spawnattr_t()
        initCleanSpawnAttributes(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var pid: pid_t = 0
        let env = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        let rc = withCStrings(args) { a in withCStrings(env) { e in posix_spawnp(&pid, args[0], &actions, &attributes, a, e) } }
        guard rc == 0 else {
            if rc == ENOENT { throw .missingTool(args[0]) }
            throw .unwritable(path: args[0], reason: "cannot start it: \(String(cString: strerror(rc)))")
        }
        var status: Int32 = 0
        while true {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { break }
            if done < 0 && errno != EINTR { return -1 }
            poll()
            usleep(100_000)
        }
        poll()
        if status & 0x7f != 0 { return 128 + (status & 0x7f) }  // killed by a signal
        return (status >> 8) & 0xff
    }
}
