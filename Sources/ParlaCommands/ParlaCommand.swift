import ArgumentParser
internal import CParlaCommandLine
import FoundationEssentials
import ParlaEngine
import Parla
import ParlaPulseAudio
#if canImport(Glibc)
    import Glibc
#endif

/// `parla`: speak text in the right language aloud or to WAV with word timings, detect languages, list voices.
public struct ParlaCommand: AsyncParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        commandName: "parla",
        abstract: "Speak text in the right language for every part of it, with word timings.",
        discussion: """
            Examples:
              parla say "Hello world, Καλημέρα"          (plays through PulseAudio)
              parla say --highlight -f story.txt
              parla say --events json "Hello world"
              parla say "Hello world" -o hello.wav
              parla say -f story.txt -o story.wav --timings story.json
              echo "Bonjour" | parla say -l fr -o bonjour.wav
              parla voices --language de
              parla detect "Hello, Καλημέρα, مرحبا"
            """,
        version: parlaVersion,
        subcommands: [Say.self, Render.self, Detect.self, Voices.self, SelectionCommand.self]
    )
}

/// Options shared by commands that need the voice catalog.
struct CatalogOptions: ParsableArguments {
    @Option(
        name: .customLong("voices"),
        help: ArgumentHelp(
            "The voice catalog directory (default: $PARLA_VOICES, then 'voices' next to the program, then the source checkout), or a directory of Piper voices (MODEL.onnx with MODEL.onnx.json) to add.",
            valueName: "dir"))
    var voicesDirectory: String?

    @Option(
        name: .customLong("prefer-voice"),
        help: ArgumentHelp(
            "The voice for a language, before the default: LANG=VOICE, such as en=piper.en_US-joe-medium (several: repeat the option, or separate them with commas).",
            valueName: "lang=voice"))
    var preferVoice: [String] = []

    /// Loads the catalog, plus the user's presets in ~/.config/parla/voices.
    func load() throws -> VoiceCatalog { try plain.load() }

    /// The same options as a plain value.
    var plain: Plain { Plain(voicesDirectory: voicesDirectory, preferVoice: preferVoice) }

    /// The same options as a plain value, for commands that run from plain arguments.
    struct Plain: Equatable, Sendable {
        var voicesDirectory: String?
        var preferVoice: [String] = []

        /// Whether the directory given holds Piper voices (and no catalog).
        var isPiperDirectory: Bool {
            guard let voicesDirectory else { return false }
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: voicesDirectory)) ?? []
            return !entries.contains("defaults.json") && entries.contains { $0.hasSuffix(".onnx") }
        }

        /// The catalog directory given, nil if none was (or the one given holds Piper voices).
        var catalogDirectory: String? { isPiperDirectory ? nil : voicesDirectory }

        /// Where Piper voices are found: the directory given if it holds them, then the usual places.
        var piperDirectories: [String] {
            (isPiperDirectory ? [voicesDirectory ?? ""] : []) + VoiceCatalog.piperVoiceDirectories
        }

        /// Loads the catalog, plus the user's presets in ~/.config/parla/voices.
        func load() throws -> VoiceCatalog {
            let catalog = try loadWithoutPreferences()
            guard !preferVoice.isEmpty else { return catalog }
            return try catalog.preferring(VoiceCatalog.parseVoicePreferences(preferVoice))
        }

        private func loadWithoutPreferences() throws -> VoiceCatalog {
            guard let voicesDirectory else { return try VoiceCatalog.default() }
            // A directory of Piper voices (MODEL.onnx + MODEL.onnx.json) adds to the default catalog.
            if isPiperDirectory { return try VoiceCatalog.default().adding(piperVoicesAt: [voicesDirectory]) }
            return try VoiceCatalog.load(
                fromPath: VoiceCatalog.locateDirectory(explicit: voicesDirectory),
                userPath: VoiceCatalog.userPresetDirectory
            ).adding(piperVoicesAt: VoiceCatalog.piperVoiceDirectories)
        }
    }
}

/// Parses the process's arguments for `Command` and runs it, as `AsyncParsableCommand.main()`
/// does. (Called from an executable's top-level code, `Command.main()` resolves to the
/// synchronous overload, which refuses to run an asynchronous command.)
public func runAsRoot<Command: AsyncParsableCommand>(_: Command.Type) async {
    do {
        if let quick = QuickStart(root: Command.self, arguments: CommandLine.arguments) {
            try await quick.run()
            await SynthesisEngine.shutDownShared()
            return
        }
        var command = try Command.parseAsRoot()
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    } catch let error as ParlaError {
        await SynthesisEngine.shutDownShared()
        Command.exit(withError: UserError(error.commandLineMessage))
    } catch {
        await SynthesisEngine.shutDownShared()
        Command.exit(withError: error)
    }
    // The engine host exits and is waited for, so that its CPU time counts as this
    // command's (for `time` and the benchmarks) and nothing outlives the command.
    await SynthesisEngine.shutDownShared()
}

/// The command lines whose start-up matters most, `parla say …` and a hotkey's bare
/// `speak-selection`, parsed by their own command's parser rather than the whole tree's: the
/// root parser reflects over every command on the way (`parla say -o x.wav "Hello world."`:
/// 14.5 ms wall, 15.8 ms CPU, against 12.8 / 14.3 with `Say.parse`; release, 40 runs), while
/// the engine host and the sound server's connection start on the two cores. A line the
/// command's parser refuses goes to the root parser, which reports it as it would any other.
enum QuickStart {
    case say(Say)
    case selection(SelectionOptions)

    /// Whether the prestart constructor starts the engine host before `main` for `arguments`
    /// (the program first, named by its file).
    static func speaks(_ arguments: [String]) -> Bool {
        read(arguments, program: parla_program_named(arguments.first ?? "")).speaks != 0
    }

    /// `arguments` read with the table the prestart constructor reads.
    private static func read(_ arguments: [String], program: Int32) -> parla_command_line {
        var line = parla_command_line()
        let pointers = arguments.map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        pointers.map { UnsafePointer($0) }.withUnsafeBufferPointer { argv in
            parla_read_command_line(program, Int32(arguments.count), argv.baseAddress, &line)
        }
        return line
    }

    /// `arguments` as the process got them (the program first), parsed by `say`'s or the
    /// selection's own parser; nil unless they are `parla say …` without an option that only
    /// prints, or `speak-selection` (or `parla selection`) alone, and that parser accepts them.
    /// Which command a line is comes from the prestart constructor's reading
    /// (`parla_read_command_line`), so the two never disagree.
    init?(root: Any.Type, arguments: [String]) {
        let program =
            ObjectIdentifier(root) == ObjectIdentifier(ParlaCommand.self)
            ? PARLA_PROGRAM_PARLA
            : ObjectIdentifier(root) == ObjectIdentifier(SpeakSelectionCommand.self) ? PARLA_PROGRAM_SPEAK_SELECTION : PARLA_PROGRAM_OTHER
        let line = Self.read(arguments, program: Int32(program))
        switch Int(line.quick) {
        case PARLA_QUICK_SELECTION:
            guard let options = try? SelectionOptions.parse([]) else { return nil }
            self = .selection(options)
        case PARLA_QUICK_SAY:
            // The default voice catalog and the language model (which a `say` reads, and which
            // are kept once loaded) load on the other core while the command's parser runs.
            startThread(name: "parla.catalog") {
                guard let catalog = try? VoiceCatalog.default() else { return }
                _ = try? LanguageDetector.load(catalog: catalog)
            }
            let words = Array(arguments.dropFirst(Int(line.first_argument)))
            // A line that plays to the default output connects to the sound server now, while
            // it is parsed (`Say.run` asks for the same connection, which is then under way).
            if Say.playsWithDefaultOutput(words) { SpeechSynthesizer.warmUp(audioOutput: AudioOutputOptions()) }
            guard let quick = try? QuickSay.parse(words) else { return nil }
            self = .say(quick.say)
        default:
            return nil
        }
    }

    /// `say`'s own options (one definition: ``Say``'s), parsed as a command whose configuration
    /// names `parla` as its super-command. ArgumentParser then skips its search of the line for
    /// `--generate-completion-script`, which builds two more parsers by reflection and was half
    /// of the parse (`perf record`, `say -o x.wav Hello`: 8 % of the main thread's samples, of
    /// 16 % in all). A line with that option is refused here and goes to the root parser, as
    /// every line this parser refuses does. `Say.validate()` runs as the group is decoded.
    private struct QuickSay: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "say", _superCommandName: "parla")
        @OptionGroup var say: Say
    }

    func run() async throws {
        switch self {
        case .say(let say):
            try await say.run()
        case .selection(let options):
            try await SelectionRun(options: options).run()
        }
    }
}
