import FoundationEssentials
import ParlaCore
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension LanguageModel {
    /// Loads the model at `path`.
    /// - Throws: ``/ParlaCore/ParlaError/languageModelInvalid(path:reason:)`` when the file is missing or
    ///   malformed.
    package convenience init(contentsOf path: String) throws(ParlaError) {
        // Mapping the file makes loading independent of its size: pages are read on first use
        // and shared between processes.
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw .languageModelInvalid(path: path, reason: "cannot open it (\(systemErrorMessage()))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size > 0 else {
            throw .languageModelInvalid(path: path, reason: "it is empty or cannot be read")
        }
        let size = Int(info.st_size)
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw .languageModelInvalid(path: path, reason: "cannot map it (\(systemErrorMessage()))")
        }
        let bytes = UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: size)
        do {
            try self.init(bytes: bytes, path: path) { mapped in
                munmap(UnsafeMutableRawPointer(mutating: mapped.baseAddress), mapped.count)
            }
        } catch {
            munmap(base, size)
            throw error
        }
    }
}

extension LanguageModel {
    /// The model at `path`, parsed once per process while the file stays the same (its
    /// inode, size and modification time), and shared: each detector made (a `parla say`'s,
    /// or the one loaded on another core while its command line is parsed) uses the same
    /// tables. A second caller waits for a load in progress instead of repeating it.
    package static func shared(at path: String) throws(ParlaError) -> LanguageModel {
        let file = FileStamp(path: path)
        guard file.state != nil else { return try LanguageModel(contentsOf: path) }
        return try sharedModels.withLock { (models) throws(ParlaError) -> LanguageModel in
            if let known = models[path], known.file == file { return known.model }
            let model = try LanguageModel(contentsOf: path)
            models[path] = (file, model)
            return model
        }
    }
}

/// The models ``LanguageModel/shared(at:)`` has loaded, by path.
private let sharedModels = Mutex<[String: (file: FileStamp, model: LanguageModel)]>([:])

/// What changes when a file is replaced or rewritten, or an entry is added to or removed from a
/// directory: its device, inode, size and modification time (nil: nothing at the path).
struct FileStamp: Equatable {
    var state: [UInt64]?
    init(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            state = nil
            return
        }
        state = [
            UInt64(truncatingIfNeeded: info.st_dev), UInt64(truncatingIfNeeded: info.st_ino), UInt64(truncatingIfNeeded: info.st_size),
            UInt64(truncatingIfNeeded: info.st_mtim.tv_sec), UInt64(truncatingIfNeeded: info.st_mtim.tv_nsec),
        ]
    }
}

extension LanguageDetector {
    /// The model in `voices/langid.bin` of the catalog `directory`, with the catalog's script
    /// defaults and the preferences of the environment.
    public static func load(catalog: VoiceCatalog, preferences: LanguagePreferences = .fromEnvironment()) throws(ParlaError)
        -> LanguageDetector
    {
        var searched: [String] = []
        for dir in catalog.directories {
            let path = dir + "/langid.bin"
            searched.append(path)
            if FileManager.default.fileExists(atPath: path) {
                return LanguageDetector(
                    model: try LanguageModel.shared(at: path), scriptDefaults: catalog.scriptDefaults, preferences: preferences)
            }
        }
        throw .languageModelNotFound(searched: searched)
    }

}

extension LanguagePreferences {
    /// From the POSIX locale environment: `LANGUAGE` (a colon-separated list), then `LC_ALL`,
    /// `LC_MESSAGES` and `LANG`. `C` and `POSIX` name no language.
    public static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> LanguagePreferences {
        var out: [LanguageTag] = []
        func add(_ raw: String) {
            // "pt_BR.UTF-8@euro" -> "pt-BR"
            let base = raw.split(separator: ".").first.map(String.init) ?? raw
            let noModifier = base.split(separator: "@").first.map(String.init) ?? base
            guard !noModifier.isEmpty, noModifier != "C", noModifier != "POSIX", let tag = LanguageTag(noModifier) else { return }
            if !out.contains(tag) { out.append(tag) }
        }
        if let list = env["LANGUAGE"], !list.isEmpty { list.split(separator: ":").forEach { add(String($0)) } }
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            if let v = env[key], !v.isEmpty { add(v); break }
        }
        return LanguagePreferences(out)
    }
}
