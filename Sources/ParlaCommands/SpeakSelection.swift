import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Subprocess
#if canImport(Glibc)
    import Glibc
#endif

import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Subprocess
#if canImport(Glibc)
    import Glibc
#endif

/// Options of `speak-selection` and `parla selection`.
struct SelectionOptions: ParsableArguments {
    @Flag(
        name: .customLong("queue"),
        help: "If another speak-selection is speaking, wait for it to finish, then speak (instead of stopping it).")
    var queue = false

    @Flag(name: .customLong("stop"), help: "Only stop a speak-selection that is speaking; speak nothing.")
    var stopOnly = false

    @Flag(name: .customLong("notify"), help: "Also show the text in a desktop notification (notify-send).")
    var notify = false

    @Flag(
        name: .customLong("print"),
        help: "Print the selected text and where it was found instead of speaking it (to check which source answers).")
    var print = false

    @Option(
        name: .customLong("config"),
        help: ArgumentHelp(
            "The settings file (default: $XDG_CONFIG_HOME/parla/speak-selection.conf, created on first use).", valueName: "file"))
    var config: String?

    @Option(name: .customLong("device"), help: ArgumentHelp("PulseAudio sink to play to (overrides the settings file).", valueName: "sink"))
    var device: String?

    @Option(
        name: .customLong("sources"),
        help: ArgumentHelp(
            "Where to look for the selected text, in order: accessibility, primary, clipboard (overrides the settings file; default accessibility,primary).",
            valueName: "list"))
    var sources: String?

    @Option(
        name: .customLong("timeout"),
        help: ArgumentHelp(
            "How long each source may take to answer, in milliseconds, 1–10000 (overrides the settings file; default 45).", valueName: "ms")
    )
    var timeout: Int?

    @Argument(
        help: ArgumentHelp(
            "'-' to speak standard input instead of the selection (waits for it to end). Without it, piped text is spoken only when nothing is selected and the text is there at once.",
            valueName: "-"))
    var source: String?

    @OptionGroup var catalogOptions: CatalogOptions

    func validate() throws {
        if let timeout, !(1...10_000).contains(timeout) { throw ValidationError("--timeout \(timeout) ms is out of range: use 1–10000.") }
        if let sources { _ = try SelectionSettings.parseSources(sources).get() }
        if let source, source != "-" {
            throw ValidationError(
                "Unexpected argument '\(source)': speak-selection takes no text, only '-' to read standard input (echo text | speak-selection -)."
            )
        }
    }
}

/// `speak-selection`: the command people bind to a hotkey.
public struct SpeakSelectionCommand: AsyncParsableCommand {
    public init() {}
    public static let configuration = CommandConfiguration(
        commandName: "speak-selection",
        abstract: "Speak the selected text in the languages it is written in; run it again to stop.",
        discussion: SelectionRun.discussion,
        version: parlaVersion)
    @OptionGroup var options: SelectionOptions
    public func run() async throws { try await SelectionRun(options: options).run() }
}

/// `parla selection`: the same as `speak-selection`.
struct SelectionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "selection",
        abstract: "Speak the selected text; run it again to stop (the same as speak-selection).",
        discussion: SelectionRun.discussion)
    @OptionGroup var options: SelectionOptions
    func run() async throws { try await SelectionRun(options: options).run() }
}

struct SelectionRun {
    static let discussion = """
        Reads the selection of the focused application over the accessibility bus (AT-SPI, as \
        screen readers do; no focus stealing, every desktop), then the PRIMARY selection (Wayland: \
        wl-paste --primary; X11: xclip or xsel), then text piped in that is there at once (an open, \
        empty pipe is never waited for); the sources setting changes the order and can add the \
        clipboard. Each source gets 45 ms (the timeout setting). '-' speaks standard input \
        instead. When the selection cannot be read, the reason is printed, spoken and sent as a \
        desktop notification. Each part is spoken by a voice of \
        its language, with your rate, voice and preferred languages from the settings file. In a \
        terminal the word being heard is highlighted; the languages found are printed on standard error.

        Run it while a previous speak-selection of yours is speaking and it stops that one at once and \
        exits (--queue waits and speaks after it; --stop only stops). Nothing selected: it says \
        "Nothing selected" and exits with status 1.

        The settings file ($XDG_CONFIG_HOME/parla/speak-selection.conf, default ~/.config/parla/...) \
        is created with every setting commented out on first use. Lines are "key = value"; keys: rate \
        (80–1000 words per minute), voice (an identifier from 'parla voices'), voices (a voice per \
        language, e.g. "en=piper.en_US-joe-medium"), languages (preferred, \
        e.g. "en, el"), device (a PulseAudio sink), notify (true/false), duck (true, false or dB: lower \
        other audio while speaking), sources (e.g. "accessibility, primary, clipboard"), timeout \
        (milliseconds each source may take).
        """

    let options: SelectionOptions

    func run() async throws {
        if options.print {
            let settings = try SelectionSettings.load(path: options.config)
            let started = monotonicNanoseconds()
            let found: Selection.Found?
            do {
                found =
                    options.source == "-"
                    ? Selection.Found(text: try TextInput.readStandardInput(), source: "standard input")
                    : try await readSelection(settings) { printError("  \($0)") }
            } catch let failure as Selection.Unreadable {
                printError("\(failure.reason) (looked in \(String(format1: Double(monotonicNanoseconds() - started) / 1e6)) ms).")
                throw ExitCode(1)
            }
            let ms = Double(monotonicNanoseconds() - started) / 1e6
            guard let found, !found.text.allSatisfy(\.isWhitespace) else {
                printError("Nothing selected (looked in \(String(format1: ms)) ms).")
                throw ExitCode(1)
            }
            printError("Source: \(found.source) (\(String(format1: ms)) ms)")
            print(found.text)
            return
        }
        let lock = try SpeakerLock.acquire(queue: options.queue)
        guard let lock else {
            // Someone was speaking and has been told to stop.
            printError("Stopped the speech in progress.")
            return
        }
        if options.stopOnly {
            printError("Nothing is speaking.")
            return
        }
        _ = lock
        let settings = try SelectionSettings.load(path: options.config)
        let catalog = try options.catalogOptions.load().preferring(settings.voices)
        var detector = try LanguageDetector.load(catalog: catalog)
        if !settings.languages.isEmpty { detector.preferences = LanguagePreferences(settings.languages) }
        let synth = SpeechSynthesizer(
            catalog: catalog, defaultLanguage: settings.languages.first ?? "en", detector: detector,
            audioOutput: AudioOutputOptions(
                device: options.device ?? settings.device, ducking: settings.duck.map { DuckingOptions(attenuation: $0) }))
        let signalHandler = Interrupt.onSignal { synth.stop(at: .immediate) }
        defer { signalHandler.cancel() }
        let ready = Task { try await synth.prepareToSpeak() }

        let text: String?
        do {
            text = options.source == "-" ? try TextInput.readStandardInput() : try await readSelection(settings)?.text
        } catch let failure as Selection.Unreadable {
            try await sayWhy(failure.reason, synth: synth, ready: ready)
        }
        guard let text, !text.allSatisfy(\.isWhitespace) else {
            try await sayWhy("Nothing selected", synth: synth, ready: ready)
        }
        var utterance = Utterance(string: text)
        if let voice = settings.voice { utterance.voice = try catalog.voice(identifier: voice) }
        utterance.wordsPerMinute = settings.rate
        let prepared = try synth.prepare(utterance)
        var seen = Set<String>()
        let languages = prepared.voices.map(\.language.identifier).filter { seen.insert($0).inserted }
        printError("Languages: \(languages.joined(separator: ", "))")
        // Shown while the speech starts, not before it.
        let notification = options.notify || settings.notify ? Task { await Selection.notify(text) } : nil
        try await ready.value
        try await playToEnd(prepared, with: synth, highlight: isatty(1) != 0, eventsJSON: false)
        await notification?.value
    }

    /// The selection, from the sources and with the timeout of the options or else the settings.
    func readSelection(_ settings: SelectionSettings, trace: ((String) -> Void)? = nil) async throws -> Selection.Found? {
        try await Selection.read(
            sources: try options.sources.map { try SelectionSettings.parseSources($0).get() } ?? settings.sources,
            timeout: options.timeout ?? settings.timeout, trace: trace)
    }

    /// Says why there is nothing to speak in every way a hotkey user can notice: on standard
    /// error, aloud, and in a desktop notification when `notify-send` exists. Exits with status 1.
    func sayWhy(_ reason: String, synth: SpeechSynthesizer, ready: Task<Void, any Error>) async throws -> Never {
        printError(reason + ".")
        let notification = Task { await Selection.notify(reason, quietly: true) }
        try? await ready.value
        // "Cannot read the selection" is heard first, as a sentence of its own: a Piper voice
        // reads a whole sentence before its first sound, so a long first one would delay it.
        let spoken =
            reason.firstIndex(of: ":").map { reason[..<$0] + ". " + reason[reason.index(after: $0)...].trimmed() + "." } ?? reason + "."
        _ = await synth.speakAndWait(Utterance(string: spoken, language: "en"))
        await notification.value
        throw ExitCode(1)
    }
}
