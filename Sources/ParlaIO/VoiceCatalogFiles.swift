import FoundationEssentials
import ParlaCore
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// Loading a voice catalog from its files: locating the directory, the prebuilt index, the
// JSON presets and defaults.
extension VoiceCatalog {
    /// Loads the catalog in `directory` (presets in any subdirectory, plus `defaults.json`),
    /// then the presets in `userDirectory` if it exists.
    /// - Throws: ``/ParlaCore/ParlaError/voiceCatalogNotFound(searched:)`` or ``/ParlaCore/ParlaError/invalidVoicePreset(path:reason:)``.
    public static func load(from directory: URL, userDirectory: URL? = nil) throws(ParlaError) -> VoiceCatalog {
        try load(fromPath: directory.path(percentEncoded: false), userPath: userDirectory?.path(percentEncoded: false))
    }

    /// ``load(from:userDirectory:)`` with plain paths, which the command-line tools start with
    /// (a `URL` costs them start-up time); `useIndex: false` reads the JSON presets even where
    /// `index.tsv` exists.
    package static func load(fromPath directory: String, userPath userDirectory: String? = nil, useIndex: Bool = true)
        throws(ParlaError) -> VoiceCatalog
    {
        let fm = FileManager.default
        var isDir = false
        guard fm.fileExists(atPath: directory, isDirectory: &isDir), isDir else {
            throw .voiceCatalogNotFound(searched: [directory])
        }
        if useIndex, let catalog = try loadIndex(directory + "/index.tsv") {
            var voices = catalog.voices
            var dirs = [directory]
            if let user = userDirectory, fm.fileExists(atPath: user, isDirectory: &isDir), isDir {
                voices += try presets(in: user, excluding: nil)
                dirs.append(user)
            }
            return VoiceCatalog(
                voices: voices, variants: catalog.variants, languageDefaults: catalog.languageDefaults,
                scriptDefaults: catalog.scriptDefaults, directories: dirs)
        }
        var voices: [SpeechVoice] = []
        var languageDefaults: [String: String] = [:]
        var scriptDefaults: [String: LanguageTag] = [:]
        var variants: [String] = []
        var dirs = [directory]

        let defaultsPath = directory + "/defaults.json"
        if fm.fileExists(atPath: defaultsPath) {
            let d: DefaultsFile = try decode(DefaultsFile.self, at: defaultsPath)
            languageDefaults = Dictionary(d.languages.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
            for (script, lang) in d.scripts ?? [:] {
                guard let tag = LanguageTag(lang) else {
                    throw .invalidVoicePreset(path: defaultsPath, reason: "'\(lang)' for script \(script) is not a language tag")
                }
                scriptDefaults[script] = tag
            }
            variants = d.variants ?? []
        }
        voices += try presets(in: directory, excluding: defaultsPath)
        if let user = userDirectory, fm.fileExists(atPath: user, isDirectory: &isDir), isDir {
            voices += try presets(in: user, excluding: nil)
            dirs.append(user)
        }
        return VoiceCatalog(
            voices: voices, variants: variants, languageDefaults: languageDefaults,
            scriptDefaults: scriptDefaults, directories: dirs)
    }

    /// This catalog with the Piper voices in `directories` added (each `NAME.onnx` with
    /// `NAME.onnx.json` beside it, named `piper.NAME`), each becoming the default for its
    /// languages unless an earlier Piper voice of higher quality is: a neural voice is the
    /// better listen where one is installed.
    public func adding(piperVoicesIn directories: [URL]) -> VoiceCatalog {
        adding(piperVoicesAt: directories.map { $0.path(percentEncoded: false) })
    }

    /// ``adding(piperVoicesIn:)`` with plain paths.
    package func adding(piperVoicesAt directories: [String]) -> VoiceCatalog {
        let (piper, unusable) = VoiceCatalog.piperVoicesAndProblems(in: directories)
        guard !piper.isEmpty || !unusable.isEmpty else { return self }
        var defaults = languageDefaults
        var replaced = espeakDefaults
        var chosen: [String: SpeechVoice] = [:]
        for voice in piper {
            for tag in voice.languages {
                for key in Set([tag.identifier.lowercased(), tag.language.lowercased()]) {
                    if let other = chosen[key], SpeechVoice.qualityRank(other.quality) >= SpeechVoice.qualityRank(voice.quality) {
                        continue
                    }
                    chosen[key] = voice
                    if replaced[key] == nil, let before = defaults[key] { replaced[key] = before }
                    defaults[key] = voice.identifier
                }
            }
        }
        return VoiceCatalog(
            voices: voices + piper, variants: variants, languageDefaults: defaults, scriptDefaults: scriptDefaults,
            directories: self.directories + directories, espeakDefaults: replaced, unusableVoices: unusableVoices + unusable)
    }

    /// Where Piper voices are looked for: `$PARLA_PIPER_VOICES` (directories separated by
    /// `:`), `$XDG_DATA_HOME/parla/voices` (`~/.local/share/parla/voices`), then
    /// `parla/voices` in each of `$XDG_DATA_DIRS` (`/usr/local/share:/usr/share`).
    package static var piperVoiceDirectories: [String] {
        var dirs: [String] = []
        if let list = environmentValue("PARLA_PIPER_VOICES") { dirs += list.split(separator: ":").map(String.init) }
        if let user = PiperVoiceInstaller.userDirectory { dirs.append(user) }
        for dir in (environmentValue("XDG_DATA_DIRS") ?? "/usr/local/share:/usr/share").split(separator: ":") {
            dirs.append(dir + "/parla/voices")
        }
        return dirs
    }

    /// The Piper voices in `directories`: each `NAME.onnx` with `NAME.onnx.json` beside it,
    /// named `piper.NAME`; the first of two voices of one name wins. Unusable ones are left
    /// out (``piperVoicesAndProblems(in:)`` says why).
    package static func piperVoices(in directories: [String]) -> [SpeechVoice] {
        piperVoicesAndProblems(in: directories).voices
    }

    /// ``piperVoices(in:)``, and the voices found that cannot be used, with the reason: a
    /// model without its config or a config without its model, a config that is not JSON or
    /// lacks what Parla reads, or phonemes that are not espeak-ng's.
    package static func piperVoicesAndProblems(in directories: [String]) -> (voices: [SpeechVoice], unusable: [UnusableVoice]) {
        var found: [SpeechVoice] = []
        var unusable: [UnusableVoice] = []
        var seen: Set<String> = []
        for directory in directories {
            guard let items = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            let names = Set(items)
            // Every NAME.onnx, and every NAME.onnx.json without its model.
            let stems = Set(
                items.compactMap { item -> String? in
                    if item.hasSuffix(".onnx") { return String(item.dropLast(".onnx".count)) }
                    if item.hasSuffix(".onnx.json") { return String(item.dropLast(".onnx.json".count)) }
                    return nil
                })
            for stem in stems.sorted() where !stem.isEmpty && !stem.hasPrefix(".") {
                let model = directory + "/" + stem + ".onnx", configPath = model + ".json"
                let identifier = SpeechVoice.piperIdentifier(modelPath: model)
                guard !seen.contains(identifier.lowercased()) else { continue }
                seen.insert(identifier.lowercased())
                func problem(_ path: String, _ reason: String) {
                    unusable.append(UnusableVoice(identifier: identifier, path: absolute(path), reason: reason))
                }
                guard names.contains(stem + ".onnx") else {
                    problem(configPath, "its model \(stem).onnx is missing beside it")
                    continue
                }
                guard names.contains(stem + ".onnx.json"), let data = FileManager.default.contents(atPath: configPath) else {
                    problem(model, "its config \(stem).onnx.json is missing (or unreadable) beside it")
                    continue
                }
                let config: PiperConfig
                do {
                    config = try JSONDecoder().decode(PiperConfig.self, from: data)
                } catch DecodingError.dataCorrupted {
                    problem(configPath, "it is not valid JSON")
                    continue
                } catch {
                    problem(configPath, "it is not a Piper voice's config (\(error))")
                    continue
                }
                switch config.voice(identifier: identifier, stem: stem, model: absolute(model)) {
                case .success(let voice): found.append(voice)
                case .failure(let why): problem(configPath, why.reason)
                }
            }
        }
        return (found, unusable)
    }

    private static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return (resolvedPath(path) ?? FileManager.default.currentDirectoryPath + "/" + path)
    }

    /// What the catalog reads of a Piper voice's `MODEL.onnx.json`.
    private struct PiperConfig: Decodable {
        struct Audio: Decodable {
            var sample_rate: Int?
            var quality: String?
        }
        struct Language: Decodable {
            var code: String?
            var name_english: String?
            var country_english: String?
        }
        struct ESpeak: Decodable { var voice: String? }
        var audio: Audio?
        var language: Language?
        var espeak: ESpeak?
        var dataset: String?
        var phoneme_type: String?

        struct Problem: Error { var reason: String }

        func voice(identifier: String, stem: String, model: String) -> Result<SpeechVoice, Problem> {
            if let type = phoneme_type, type != "espeak" {
                return .failure(Problem(reason: "its phonemes are '\(type)', not espeak-ng's, which is all Parla can give a Piper voice"))
            }
            guard audio?.sample_rate != nil else { return .failure(Problem(reason: "it has no audio.sample_rate")) }
            guard espeak?.voice != nil else { return .failure(Problem(reason: "it names no espeak-ng voice (espeak.voice)")) }
            let code = language?.code.map { String($0.map { $0 == "_" ? "-" : $0 }) } ?? espeak?.voice ?? ""
            guard let tag = LanguageTag(code) else { return .failure(Problem(reason: "its language '\(code)' is not a language tag")) }
            var languages = [tag]
            if let primary = LanguageTag(tag.language), primary != tag { languages.append(primary) }
            let speaker = (dataset ?? stem.split(separator: "-").dropFirst().first.map(String.init) ?? stem).capitalized
            let place = [language?.name_english, language?.country_english].compactMap { $0 }.joined(separator: ", ")
            let name = place.isEmpty ? speaker : "\(speaker) (\(place))"
            return .success(
                SpeechVoice(
                    identifier: identifier, name: name, engine: SpeechVoice.piperEngine, engineVoice: model, languages: languages,
                    quality: audio?.quality, sampleRate: audio?.sample_rate))
        }
    }

    /// The catalog Parla is installed with (`$PARLA_VOICES`, else `voices/` or
    /// `../share/parla/voices` beside the program; loaded once per process) plus the user's
    /// presets in `~/.config/parla/voices`, with the Piper voices installed now
    /// (`$PARLA_PIPER_VOICES`, then `parla/voices` in the XDG data directories): the Piper directories are read again when one of them has
    /// changed since the last call (a voice added or removed), so a long-running host such as
    /// a speech provider sees new voices. Unchanged, the cost is a `stat` per directory.
    /// - Throws: ``/ParlaCore/ParlaError/voiceCatalogNotFound(searched:)`` if no catalog directory exists.
    public static func `default`() throws(ParlaError) -> VoiceCatalog {
        let base = try baseCatalog.get()
        let directories = piperVoiceDirectories
        // Taken before the directories are read: a change during the read is seen next time.
        let stamps = directories.map(FileStamp.init(path:))
        return withPiper.withLock { cached in
            if let cached, cached.directories == directories, cached.stamps == stamps { return cached.catalog }
            let catalog = base.adding(piperVoicesAt: directories)
            cached = PiperScan(directories: directories, stamps: stamps, catalog: catalog)
            return catalog
        }
    }

    private static let baseCatalog: Result<VoiceCatalog, ParlaError> = Result { () throws(ParlaError) in
        try load(fromPath: locateDirectory(), userPath: userPresetDirectory)
    }

    private struct PiperScan {
        var directories: [String]
        var stamps: [FileStamp]
        var catalog: VoiceCatalog
    }
    private static let withPiper = Mutex<PiperScan?>(nil)

    /// The user's own preset directory: `$XDG_CONFIG_HOME/parla/voices` or `~/.config/parla/voices`.
    package static var userPresetDirectory: String? {
        let env = { (name: String) in getenv(name).map { String(cString: $0) } }
        if let xdg = env("XDG_CONFIG_HOME"), !xdg.isEmpty { return xdg + "/parla/voices" }
        if let home = env("HOME"), !home.isEmpty { return home + "/.config/parla/voices" }
        return nil
    }

    /// Finds the catalog directory: `explicit`, then `$PARLA_VOICES`, then `voices/` or
    /// `../share/parla/voices` next to the executable, then the source checkout.
    /// - Throws: ``/ParlaCore/ParlaError/voiceCatalogNotFound(searched:)`` listing every place tried.
    package static func locateDirectory(explicit: String? = nil) throws(ParlaError) -> String {
        // Tried one at a time, with plain system calls: this is on the start-up path of every
        // command (URL's path resolution took about 1 ms).
        var candidates: [String] = []
        func found(_ dir: String) -> Bool {
            candidates.append(dir)
            return access(dir + "/defaults.json", F_OK) == 0
        }
        func parent(_ path: String) -> String {
            guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
            return slash == path.utf8.startIndex ? "/" : String(path[..<slash])
        }
        if let explicit {
            if found(explicit) { return explicit }
            throw .voiceCatalogNotFound(searched: candidates)
        }
        if let env = getenv("PARLA_VOICES").map({ String(cString: $0) }), !env.isEmpty, found(env) { return env }
        for dir in InstallLocation.catalogCandidates() where found(dir) { return dir }
        if let real = resolvedPath("/proc/self/exe") {
            let dir = parent(real)
            if found(dir + "/voices") { return dir + "/voices" }
            let share = parent(dir) + "/share/parla/voices"
            if found(share) { return share }
            // PREFIX/libexec/parla/sd_parla (the speech-dispatcher module) → PREFIX/share/parla.
            let fromLibexec = parent(parent(dir)) + "/share/parla/voices"
            if found(fromLibexec) { return fromLibexec }
        }
        // The program as started (a symbolic link to it may have a catalog beside it).
        if let arg0 = CommandLine.arguments.first, arg0.contains("/") {
            let dir = parent(resolvedPath(arg0) ?? arg0)
            if found(dir + "/voices") { return dir + "/voices" }
        }
        // A source checkout: Sources/ParlaIO/VoiceCatalogFiles.swift → ../../voices
        let source = parent(parent(parent(#filePath))) + "/voices"
        if found(source) { return source }
        throw .voiceCatalogNotFound(searched: candidates)
    }

    /// `path` with every symbolic link resolved, nil if it does not exist.
    package static func resolvedPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The built-in presets and defaults from `index.tsv` (written by
    /// `scripts/generate-voices.py`), nil if there is none. One file read and split instead of
    /// 130 JSON decodes: a third of `parla say`'s start-up before it.
    /// - Throws: ``/ParlaCore/ParlaError/invalidVoicePreset(path:reason:)`` naming the line.
    static func loadIndex(_ path: String) throws(ParlaError) -> VoiceCatalog? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        var voices: [SpeechVoice] = []
        var languageDefaults: [String: String] = [:]
        var scriptDefaults: [String: LanguageTag] = [:]
        var variants: [String] = []
        // Split as bytes: String.split by Character breaks graphemes, and took 1.3 ms here.
        let bytes = [UInt8](data)
        for (number, line) in bytes.split(separator: 0x0A).enumerated() where line.first != UInt8(ascii: "#") {
            let f = line.split(separator: 0x09, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            func bad(_ why: String) -> ParlaError {
                .invalidVoicePreset(path: path, reason: "line \(number + 1): \(why); run 'python3 scripts/generate-voices.py --index-only'")
            }
            switch f.first {
            case "voice":
                guard f.count == 10 else { throw bad("a voice line needs 10 tab-separated fields") }
                var languages: [LanguageTag] = []
                for l in f[6].split(separator: " ") {
                    guard let tag = LanguageTag(String(l)) else { throw bad("'\(l)' is not a language tag") }
                    languages.append(tag)
                }
                guard !languages.isEmpty else { throw bad("the voice lists no languages") }
                voices.append(
                    SpeechVoice(
                        identifier: f[1], name: f[2], engine: f[3], engineVoice: f[4], variant: f[5].isEmpty ? nil : f[5],
                        languages: languages, gender: SpeechVoice.Gender(rawValue: f[7]),
                        wordsPerMinute: Double(f[8]), pitch: Double(f[9])))
            case "default":
                guard f.count == 3 else { throw bad("a default needs a language and a voice") }
                languageDefaults[f[1].lowercased()] = f[2]
            case "script":
                guard f.count == 3, let tag = LanguageTag(f[2]) else { throw bad("a script default needs a script and a language tag") }
                scriptDefaults[f[1]] = tag
            case "variant":
                guard f.count == 2 else { throw bad("a variant needs a name") }
                variants.append(f[1])
            default:
                throw bad("unknown line")
            }
        }
        return VoiceCatalog(voices: voices, variants: variants, languageDefaults: languageDefaults, scriptDefaults: scriptDefaults)
    }

    private struct DefaultsFile: Decodable {
        var languages: [String: String]
        var scripts: [String: String]?
        var variants: [String]?
    }

    private static func presets(in directory: String, excluding: String?) throws(ParlaError) -> [SpeechVoice] {
        // Presets sit in the directory itself or one level down (voices/espeak-ng/*.json).
        let fm = FileManager.default
        var paths: [String] = []
        var isDir = false
        for item in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] {
            let path = directory + "/" + item
            if item.hasSuffix(".json") {
                if path != excluding { paths.append(path) }
            } else if fm.fileExists(atPath: path, isDirectory: &isDir), isDir {
                for sub in (try? fm.contentsOfDirectory(atPath: path)) ?? [] where sub.hasSuffix(".json") {
                    paths.append(path + "/" + sub)
                }
            }
        }
        var out: [SpeechVoice] = []
        for path in paths.sorted() {
            let v = try decode(SpeechVoice.self, at: path)
            guard !v.languages.isEmpty else {
                throw .invalidVoicePreset(path: path, reason: "it lists no languages")
            }
            out.append(v)
        }
        return out
    }

    private static func decode<T: Decodable>(_ type: T.Type, at path: String) throws(ParlaError) -> T {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .invalidVoicePreset(path: path, reason: "it cannot be read")
        }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw .invalidVoicePreset(path: path, reason: "\(error)")
        }
    }
}

extension SpeechVoice {
    /// Every voice in the default catalog (empty if the catalog cannot be found).
    public static var all: [SpeechVoice] {
        (try? VoiceCatalog.default())?.voices ?? []
    }

    /// The default catalog's best voice for `language`, or nil if none speaks it.
    public init?(language: LanguageTag) {
        guard let voice = try? VoiceCatalog.default().voice(for: language) else { return nil }
        self = voice
    }

    /// The default catalog's voice with `identifier` (`espeak-ng.fr+f2` included), or nil.
    public init?(identifier: String) {
        guard let voice = try? VoiceCatalog.default().voice(identifier: identifier) else { return nil }
        self = voice
    }
}
