import ArgumentParser
internal import CParlaCommandLine
import FoundationEssentials
import ParlaEngine
import Parla
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

/// The command lines whose start-up matters most, `parla say TEXT…` (with or without
/// `-o FILE`) and a hotkey's bare `speak-selection`, recognised without swift-argument-parser.
/// Its first parse reflects over every option of the command: about 1.8 ms of CPU in the
/// static binary, mostly protocol-conformance lookups, while the engine host and the sound
/// server's connection are starting on the two cores. Every other command line goes to the
/// parser, and a test checks that the parser reads the recognised ones the same way.
enum QuickStart: Equatable {
    case say(SayArguments)
    case selection(SelectionArguments)

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

    /// `arguments` as the process got them (the program first); nil unless they are
    /// `parla say` followed by words none of which starts with '-' (and at most one `-o FILE`),
    /// or `speak-selection` (or `parla selection`) alone. The reading is the prestart
    /// constructor's own (`parla_read_command_line`), so the two never disagree.
    init?(root: Any.Type, arguments: [String]) {
        let program =
            ObjectIdentifier(root) == ObjectIdentifier(ParlaCommand.self)
            ? PARLA_PROGRAM_PARLA
            : ObjectIdentifier(root) == ObjectIdentifier(SpeakSelectionCommand.self) ? PARLA_PROGRAM_SPEAK_SELECTION : PARLA_PROGRAM_OTHER
        let line = Self.read(arguments, program: Int32(program))
        switch Int(line.quick) {
        case PARLA_QUICK_SELECTION:
            self = .selection(SelectionArguments())
        case PARLA_QUICK_SAY:
            var say = SayArguments()
            let output = Int(line.output)
            for i in Int(line.first_argument)..<arguments.count where i != output && i + 1 != output {
                say.text.append(arguments[i])
            }
            if output >= 0 { say.output = arguments[output] }
            self = .say(say)
        default:
            return nil
        }
    }

    func run() async throws {
        switch self {
        case .say(let arguments):
            try arguments.validate()
            try await arguments.run()
        case .selection(let arguments):
            try await SelectionRun(options: arguments).run()
        }
    }
}
