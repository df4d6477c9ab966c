import ArgumentParser
import Parla
import ParlaEngine
import ParlaIO
#if canImport(Glibc)
    import Glibc
#endif

/// `parla voices`: list the voices, and install or remove Piper's voices by name.
struct Voices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the voices Parla can use; install or remove Piper's natural voices by name.",
        discussion: """
            Examples:
              parla voices                                 (the voices installed)
              parla voices -l de --available               (Piper's German voices to install)
              parla voices install en_US-joe-medium
              parla voices remove en_US-joe-medium
            """,
        subcommands: [ListVoices.self, InstallVoices.self, RemoveVoices.self],
        defaultSubcommand: ListVoices.self
    )
}

/// Where Piper's catalog is: `--catalog`.
struct VoiceCatalogSource: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Piper's voice catalog: a URL or directory holding voices.json and the voices' files, as Hugging Face's rhasspy/piper-voices does (default: $PARLA_VOICE_CATALOG, then \(PiperVoiceIndex.defaultRoot)). A mirror, for offline networks and companies.",
            valueName: "url"))
    var catalog: String?

    /// Fetches and reads the catalog.
    func load(scratch: String) throws -> PiperVoiceIndex {
        do {
            return try PiperVoiceIndex.load(root: PiperVoiceIndex.root(catalog), scratch: scratch)
        } catch {
            throw UserError(error.description)
        }
    }
}

/// The directory `install` and `remove` work in: the user's, or the prefix's with `--system`.
struct VoiceDirectoryChoice: ParsableArguments {
    @Flag(help: "The voices of every user of this installation (PREFIX/share/parla/voices) instead of yours (~/.local/share/parla/voices).")
    var system = false

    func installer() throws -> PiperVoiceInstaller {
        guard let dir = system ? PiperVoiceInstaller.systemDirectory : PiperVoiceInstaller.userDirectory else {
            throw UserError(system ? "Cannot tell where this program is installed." : "Neither XDG_DATA_HOME nor HOME is set: set one.")
        }
        return PiperVoiceInstaller(directory: dir)
    }
}

/// `parla voices install NAME…`.
struct InstallVoices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Install Piper voices by name from Piper's catalog (see 'parla voices --available').",
        discussion: """
            Each file is checked against the catalog's size and md5 before it counts; a transfer that \
            breaks off resumes where it stopped when the command runs again. A voice is listed only \
            once all its files are in place, and running programs (speak-selection, sd_parla, the Spiel \
            provider) hear it at once. Needs curl.
            """)

    @Argument(help: ArgumentHelp("Voice names, such as en_US-joe-medium (piper.en_US-joe-medium works too).", valueName: "name"))
    var names: [String]

    @OptionGroup var source: VoiceCatalogSource
    @OptionGroup var where_: VoiceDirectoryChoice

    func validate() throws {
        guard !names.isEmpty else {
            throw ValidationError("Name at least one voice, such as en_US-joe-medium ('parla voices --available' lists them).")
        }
    }

    func run() throws {
        let installer = try where_.installer()
        if let code = AtomicFile.makeDirectories(installer.directory) {
            throw UserError("Cannot create \(installer.directory): \(String(cString: strerror(code))).")
        }
        let index = try source.load(scratch: installer.directory)
        var chosen: [PiperCatalogVoice] = []
        do {
            for name in names { chosen.append(try index.voice(named: name)) }
        } catch {
            throw UserError(error.description)
        }
        let report = InstallReport(terminal: isatty(2) != 0)
        for voice in chosen {
            do {
                try installer.install(voice, from: index) { report.show($0) }
            } catch {
                report.endLine()
                throw UserError(error.description)
            }
        }
    }
}

/// Shows an install's progress on standard error: on a terminal, one line redrawn with bytes,
/// rate and time left; elsewhere, one line per file.
final class InstallReport {
    private let terminal: Bool
    private var name = "", size: Int64 = 0, startBytes: Int64 = 0
    private var start: UInt64 = 0, lastDraw: UInt64 = 0
    private var drawn = false

    init(terminal: Bool) { self.terminal = terminal }

    func show(_ event: VoiceInstallProgress) {
        switch event {
        case .fileStarted(let name, let size, let resumedAt):
            self.name = name
            self.size = size
            start = monotonicNanoseconds()
            startBytes = resumedAt
            if resumedAt > 0, !terminal { printError("\(name): resuming at \(megabytes(resumedAt)) of \(megabytes(size))") }
            if terminal { draw(resumedAt, force: true) }
        case .bytes(let bytes):
            if terminal { draw(bytes, force: false) }
        case .fileChecked(let name, let size):
            if terminal {
                draw(size, force: true)
                endLine()
            } else {
                printError("\(name): \(megabytes(size)), size and md5 checked")
            }
        case .installed(let voice, let directory):
            print("Installed piper.\(voice) in \(directory). Try: parla say -v piper.\(voice) \"Hello\"")
            // Its maker's licence, as the model card names it (Piper's catalog gives each voice one).
            let card = directory + "/" + voice + ".MODEL_CARD"
            print(
                SpeechVoice.license(modelCard: card).map { "Its licence, as its model card (\(card)) says: \($0)." }
                    ?? "Its model card names no licence: ask its maker before you ship its audio.")
        case .alreadyInstalled(let voice, let directory):
            print("piper.\(voice) is already installed in \(directory).")
        }
    }

    func endLine() {
        if drawn { printError("") }
        drawn = false
    }

    private func draw(_ bytes: Int64, force: Bool) {
        let now = monotonicNanoseconds()
        guard force || now - lastDraw > 100_000_000 else { return }
        lastDraw = now
        let seconds = Double(now - start) / 1e9
        let rate = seconds > 0.2 ? Double(bytes - startBytes) / seconds : 0
        let left = rate > 0 ? Int(Double(size - bytes) / rate) : -1
        let percent = size > 0 ? Int(Double(bytes) * 100 / Double(size)) : 100
        let width = 24, filled = size > 0 ? Int(Double(width) * Double(bytes) / Double(size)) : width
        let bar = String(repeating: "#", count: max(0, min(width, filled))) + String(repeating: "-", count: max(0, width - filled))
        let eta = left < 0 ? "--:--" : String(format2: left / 60) + ":" + String(format2: left % 60)
        printError(
            "\r\(name)  [\(bar)] \(percent)%  \(megabytes(bytes)) of \(megabytes(size))  \(megabytes(Int64(rate)))/s  \(eta) left\u{1B}[K",
            terminator: "")
        drawn = true
    }
}

extension String {
    /// A number of at least two digits ("05").
    fileprivate init(format2 value: Int) { self = value < 10 ? "0\(value)" : "\(value)" }
}

/// `parla voices remove NAME…`.
struct RemoveVoices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove Piper voices that 'parla voices install' installed (and their prepared copies in the cache).")

    @Argument(help: ArgumentHelp("Voice names, such as en_US-joe-medium.", valueName: "name"))
    var names: [String]

    @OptionGroup var where_: VoiceDirectoryChoice

    func validate() throws {
        guard !names.isEmpty else { throw ValidationError("Name at least one voice to remove.") }
    }

    func run() throws {
        let installer = try where_.installer()
        for name in names {
            do {
                let removed = try installer.remove(name, elsewhere: VoiceCatalog.piperVoiceDirectories)
                let bare = name.hasPrefix("piper.") ? String(name.dropFirst(6)) : name
                print("Removed piper.\(bare) from \(installer.directory) (\(removed.count) files).")
            } catch {
                throw UserError(error.description)
            }
        }
    }
}

/// `parla voices [list]`: the voices installed, or Piper's catalog with `--available`.
struct ListVoices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the voices Parla can use: identifier, engine, quality, rate, streaming, name, languages, gender.",
        discussion: """
            Add your own presets as JSON files in ~/.config/parla/voices (see README.md). Piper's neural \
            voices (MODEL.onnx with MODEL.onnx.json beside it) are found in $PARLA_PIPER_VOICES, \
            ~/.local/share/parla/voices ($XDG_DATA_HOME) and /usr/share/parla/voices ($XDG_DATA_DIRS), \
            and are named piper.MODEL; one is the default for its language. STREAM says whether a voice \
            is heard as its audio is made ("yes"), or a Piper voice whose model does not split at its \
            decoder is made a whole sentence at a time ("whole"; --json gives the reason).
            """
    )

    @Option(
        name: [.customShort("l"), .customLong("language")],
        help: ArgumentHelp("Only voices that speak this language (BCP 47, e.g. en, pt-BR).", valueName: "tag"))
    var language: String?

    @Flag(help: "Print JSON (an array of voice objects).")
    var json = false

    @Flag(help: "List the voices Piper's catalog offers to install (see --catalog), marking those installed.")
    var available = false

    @OptionGroup var source: VoiceCatalogSource

    @OptionGroup var catalogOptions: CatalogOptions

    func run() throws {
        let catalog = try catalogOptions.load()
        if available { return try listAvailable(installed: catalog) }
        if language == nil {
            for v in catalog.unusableVoices {
                printError("warning: \(v.identifier) cannot be used: \(v.path): \(v.reason).")
            }
        }
        if !json {
            for v in catalog.voices {
                if let p = v.piperPhonemizer(), !p.isTrained { printError("warning: " + p.warning(voice: v.identifier) + ".") }
            }
        }
        var voices = catalog.voices
        if let language {
            let tag = try LanguageTag(parsing: language)
            voices = catalog.voices(speaking: tag)
            if voices.isEmpty {
                // A less specific match (en-AU → en voices) is still useful; none at all is an error.
                voices = catalog.voices(speaking: LanguageTag(tag.language) ?? tag)
            }
            guard !voices.isEmpty else { throw ParlaError.noVoiceForLanguage(tag) }
        }
        if json {
            var out = "["
            for (i, v) in voices.enumerated() {
                out += i == 0 ? "\n  " : ",\n  "
                out += "{\"identifier\": \(JSONText.quoted(v.identifier)), \"name\": \(JSONText.quoted(v.name)), \"languages\": ["
                out += v.languages.map { JSONText.quoted($0.identifier) }.joined(separator: ", ")
                out += "], \"gender\": " + (v.gender.map { JSONText.quoted($0.rawValue) } ?? "null")
                out += ", \"engine\": \(JSONText.quoted(v.engine)), \"quality\": " + (v.quality.map { JSONText.quoted($0) } ?? "null")
                out += ", \"sample_rate\": " + (v.sampleRate.map(String.init) ?? "null")
                out += ", \"license\": " + (v.license().map(JSONText.quoted) ?? "null")
                // The rates and pitch it honours (a Piper voice needs libsonic past 450 and for pitch).
                let piper = v.engine == SpeechVoice.piperEngine
                out += ", \"max_rate\": \(piper ? PiperProsody.maxRate : Int(SpeechPlan.rateRange.upperBound))"
                out += ", \"pitch\": \(piper ? PiperProsody.canStretch : true)"
                if let p = v.piperPhonemizer() {
                    // The espeak-ng it was trained with, and the one that gives its phonemes.
                    out += ", \"phonemizer\": {\"trained\": \(JSONText.quoted(p.trained)), \"as_trained\": \(p.isTrained), "
                    out += "\"library\": " + (p.directory.map { JSONText.quoted($0 + "/libespeak-ng.so.1") } ?? "null") + "}"
                }
                switch v.piperDecoding() {
                case .wholeSentences(let reason)?, .unreadable(let reason)?:
                    out += ", \"streams\": false, \"whole_sentences_because\": \(JSONText.quoted(reason))}"
                default: out += ", \"streams\": true}"
                }
            }
            for (i, v) in (language == nil ? catalog.unusableVoices : []).enumerated() {
                out += voices.isEmpty && i == 0 ? "\n  " : ",\n  "
                out += "{\"identifier\": \(JSONText.quoted(v.identifier)), \"engine\": \"piper\", \"usable\": false"
                out += ", \"path\": \(JSONText.quoted(v.path)), \"unusable_because\": \(JSONText.quoted(v.reason))}"
            }
            print(out + (voices.isEmpty && (language != nil || catalog.unusableVoices.isEmpty) ? "]" : "\n]"))
            return
        }
        let idWidth = max(10, voices.map(\.identifier.count).max() ?? 0)
        let nameWidth = max(4, voices.map(\.name.count).max() ?? 0)
        print(pad("IDENTIFIER", idWidth) + "  ENGINE     QUALITY  RATE   STREAM  " + pad("NAME", nameWidth) + "  GENDER  LANGUAGES")
        for v in voices {
            let stream: String
            switch v.piperDecoding() {
            case .wholeSentences?: stream = "whole"
            case .unreadable?: stream = "?"
            default: stream = "yes"
            }
            print(
                pad(v.identifier, idWidth) + "  " + pad(v.engine, 9) + "  " + pad(v.quality ?? "-", 7) + "  "
                    + pad(v.sampleRate.map(String.init) ?? "22050", 5) + "  " + pad(stream, 6) + "  " + pad(v.name, nameWidth) + "  "
                    + pad(v.gender?.rawValue ?? "-", 6) + "  " + v.languages.map(\.identifier).joined(separator: ", "))
        }
    }

    /// Piper's catalog, filtered by --language, each marked if installed.
    private func listAvailable(installed: VoiceCatalog) throws {
        let scratch =
            PiperVoiceInstaller.userDirectory.map { dir -> String in
                _ = AtomicFile.makeDirectories(dir)
                return dir
            } ?? "/tmp"
        let index = try source.load(scratch: scratch)
        var voices = index.voices.values.sorted { $0.name < $1.name }
        if let language {
            let tag = try LanguageTag(parsing: language)
            voices = voices.filter { v in
                guard let l = v.language else { return false }
                return l == tag || l.isSpecialization(of: tag)
            }
            guard !voices.isEmpty else { throw UserError("Piper's catalog has no voice for '\(language)'.") }
        }
        let have = Set(installed.voices.map { $0.identifier.lowercased() })
        let isInstalled = { (v: PiperCatalogVoice) in have.contains("piper." + v.name.lowercased()) }
        if json {
            let items = voices.map { v in
                "{\"name\": \(JSONText.quoted(v.name)), \"identifier\": \(JSONText.quoted("piper." + v.name)), \"language\": "
                    + JSONText.quoted(v.language?.identifier ?? v.languageCode)
                    + ", \"language_name\": \(JSONText.quoted(v.languageName)), "
                    + "\"quality\": " + (v.quality.map { JSONText.quoted($0) } ?? "null") + ", \"speakers\": \(v.speakers), "
                    + "\"size_bytes\": \(v.size), \"installed\": \(isInstalled(v))}"
            }
            print(items.isEmpty ? "[]" : "[\n  " + items.joined(separator: ",\n  ") + "\n]")
            return
        }
        let nameWidth = max(4, voices.map(\.name.count).max() ?? 0)
        print(pad("NAME", nameWidth) + "  LANGUAGE  QUALITY  SPEAKERS  SIZE       INSTALLED  LANGUAGE NAME")
        for v in voices {
            let place = [v.languageName, v.country].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ", ")
            print(
                pad(v.name, nameWidth) + "  " + pad(v.language?.identifier ?? v.languageCode, 8) + "  " + pad(v.quality ?? "-", 7) + "  "
                    + pad(String(v.speakers), 8) + "  " + pad(megabytes(v.size), 9) + "  " + pad(isInstalled(v) ? "yes" : "-", 9) + "  "
                    + place)
        }
    }

    private func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }
}
