import ArgumentParser
import ParlaESpeak
import Parla

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
            "The voice catalog directory (default: $PARLA_VOICES, then 'voices' next to the program, then the source checkout).",
            valueName: "dir"))
    var voicesDirectory: String?

    /// Loads the catalog, plus the user's presets in ~/.config/parla/voices.
    func load() throws -> VoiceCatalog {
        if voicesDirectory == nil { return try VoiceCatalog.default() }
        return try VoiceCatalog.load(
            from: VoiceCatalog.locateDirectory(explicit: voicesDirectory),
            userDirectory: VoiceCatalog.userPresetDirectory)
    }
}

/// Parses the process's arguments for `Command` and runs it, as `AsyncParsableCommand.main()`
/// does. (Called from an executable's top-level code, `Command.main()` resolves to the
/// synchronous overload, which refuses to run an asynchronous command.)
public func runAsRoot<Command: AsyncParsableCommand>(_: Command.Type) async {
    do {
        var command = try Command.parseAsRoot()
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    } catch {
        await ESpeakEngine.shutDownShared()
        Command.exit(withError: error)
    }
    // The engine host exits and is waited for, so that its CPU time counts as this
    // command's (for `time` and the benchmarks) and nothing outlives the command.
    await ESpeakEngine.shutDownShared()
}
