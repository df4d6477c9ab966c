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

    /// The options as a plain value (what `SelectionRun` works from).
    var arguments: SelectionArguments {
        SelectionArguments(
            queue: queue, stopOnly: stopOnly, notify: notify, print: print, config: config, device: device, sources: sources,
            timeout: timeout, source: source, catalogOptions: catalogOptions.plain)
    }

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

/// What `speak-selection` was asked for, as a plain value. `SelectionOptions` fills it in; so
/// does `QuickStart` for the hotkey's command line, which has no arguments.
struct SelectionArguments: Equatable, Sendable {
    var queue = false
    var stopOnly = false
    var notify = false
    var print = false
    var config: String? = nil
    var device: String? = nil
    var sources: String? = nil
    var timeout: Int? = nil
    var source: String? = nil
    var catalogOptions = CatalogOptions.Plain(voicesDirectory: nil)
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
    public func run() async throws { try await SelectionRun(options: options.arguments).run() }
}

/// `parla selection`: the same as `speak-selection`.
struct SelectionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "selection",
        abstract: "Speak the selected text; run it again to stop (the same as speak-selection).",
        discussion: SelectionRun.discussion)
    @OptionGroup var options: SelectionOptions
    func run() async throws { try await SelectionRun(options: options.arguments).run() }
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
        (80–450 words per minute), voice (an identifier from 'parla voices'), voices (a voice per \
        language, e.g. "en=piper.en_US-joe-medium"), languages (preferred, \
        e.g. "en, el"), device (a PulseAudio sink), notify (true/false), duck (true, false or dB: lower \
        other audio while speaking), sources (e.g. "accessibility, primary, clipboard"), timeout \
        (milliseconds each source may take).
        """

    let options: SelectionArguments

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
        let signals = Interrupt.onSignal { synth.stop(at: .immediate) }
        defer { signals.forEach { $0.cancel() } }
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
        let plan = try synth.plan(utterance)
        var seen = Set<String>()
        let languages = plan.segments.map(\.language.identifier).filter { seen.insert($0).inserted }
        printError("Languages: \(languages.joined(separator: ", "))")
        // Shown while the speech starts, not before it.
        let notification = options.notify || settings.notify ? Task { await Selection.notify(text) } : nil
        try await ready.value
        try await playToEnd(utterance, plannedAs: plan, with: synth, highlight: isatty(1) != 0, eventsJSON: false)
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
        // "Cannot read the selection" is heard first, as a sentence of its own: a sentence is
        // synthesized whole before it plays, so a long first one would delay the first sound.
        let spoken =
            reason.firstIndex(of: ":").map { reason[..<$0] + ". " + reason[reason.index(after: $0)...].trimmed() + "." } ?? reason + "."
        _ = await synth.speakAndWait(Utterance(string: spoken, language: "en"))
        await notification.value
        throw ExitCode(1)
    }
}

/// One speaker per user: the process that speaks holds an exclusive `flock` on a file in the
/// user's runtime directory and writes its PID there. The kernel drops the lock when the process
/// ends however it ends (`kill -9` included), so a lock is never stale.
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
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if queue {
                while flock(fd, LOCK_EX) != 0 && errno == EINTR {}
            } else {
                var buffer = [UInt8](repeating: 0, count: 32)
                let n = pread(fd, &buffer, 31, 0)
                if n > 0, let pid = Int32(String(decoding: buffer[0..<n], as: UTF8.self).trimmed()), pid > 0 {
                    kill(pid, SIGTERM)
                }
                close(fd)
                return nil
            }
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
    }
}

/// Where the selected text comes from.
enum Selection {
    /// Why the selection could not be read: printed, spoken and shown as a notification, since
    /// a hotkey hides standard error.
    struct Unreadable: Error {
        let reason: String
    }

    /// A place the selected text can be read from, in the order of the `sources` setting.
    enum Source: String, CaseIterable, Sendable {
        /// The selection of the focused application, over the AT-SPI accessibility bus (as Orca
        /// reads it): works on every Wayland compositor, GNOME's included, without stealing focus.
        case accessibility
        /// The PRIMARY selection: `wl-paste --primary` on Wayland, xclip or xsel on X11.
        case primary
        /// The clipboard (what was last copied, even if nothing is highlighted now).
        case clipboard

        static let defaults: [Source] = [.accessibility, .primary]
    }

    /// The default time each source may take, in milliseconds: with the default two sources,
    /// the whole lookup takes at most 100 ms when nothing answers.
    static let defaultTimeoutMilliseconds = 45

    /// Text found, and the name of the source it came from.
    struct Found {
        var text: String
        var source: String
    }

    /// The first selection found in `sources`, else standard input if text is there at once;
    /// nil when all are empty. Each source gets `timeout` milliseconds; the tools of one
    /// source (Wayland's and X11's) are asked at the same time, and a tool that did not answer
    /// in time is not asked again.
    /// - Throws: ``Unreadable`` naming what to install or what the sources said when no source
    ///   could be read.
    static func read(sources: [Source] = Source.defaults, timeout: Int = defaultTimeoutMilliseconds, trace: ((String) -> Void)? = nil)
        async throws -> Found?
    {
        let env = { (name: String) in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        var missingTool: String?
        var failures: [String] = [], failedTools = Set<String>(), answered = false, reachable = false
        for source in sources {
            switch source {
            case .accessibility:
                let answer = Accessibility.selection(timeoutMilliseconds: timeout)
                trace?("accessibility: \(answer)")
                switch answer {
                case .text(let text):
                    if !text.allSatisfy(\.isWhitespace) { return Found(text: text, source: "accessibility (AT-SPI)") }
                    reachable = true
                    answered = true
                case .nothing:
                    reachable = true
                    answered = true
                case .unavailable:
                    break
                case .failed(let reason):
                    reachable = true
                    failures.append(reason.contains("accessibility") ? reason : "the accessibility bus: " + reason)
                }
            case .primary, .clipboard:
                let primary = source == .primary
                var commands: [[String]] = []
                if env("WAYLAND_DISPLAY") != nil {
                    if Processes.have("wl-paste") {
                        commands.append(primary ? ["wl-paste", "--primary", "--no-newline"] : ["wl-paste", "--no-newline"])
                    } else if missingTool == nil {
                        missingTool = "wl-clipboard"
                    }
                }
                if env("DISPLAY") != nil {
                    if Processes.have("xclip") {
                        commands.append(["xclip", "-o", "-selection", primary ? "primary" : "clipboard"])
                    } else if Processes.have("xsel") {
                        commands.append(["xsel", "-o", primary ? "-p" : "-b"])
                    } else if missingTool?.hasSuffix("xclip") != true {
                        missingTool = missingTool.map { $0 + " or xclip" } ?? "xclip"
                    }
                }
                commands.removeAll { failedTools.contains($0[0]) }
                if !commands.isEmpty { reachable = true }
                let answers = await capture(commands, deadline: monotonicNanoseconds() + UInt64(timeout) * 1_000_000, timeout: timeout)
                // In the order asked: Wayland's selection before XWayland's.
                for (command, answer) in zip(commands, answers) {
                    trace?("\(source.rawValue): \(command[0]): \(answer)")
                    switch answer {
                    case .text(let bytes):
                        let text = try TextInput.decode(bytes, source: "The selection")
                        if !text.allSatisfy(\.isWhitespace) { return Found(text: text, source: "\(source.rawValue) (\(command[0]))") }
                        answered = true
                    case .empty:
                        answered = true
                    case .failed(let message):
                        // The same tool would fail the same way for the clipboard.
                        failedTools.insert(command[0])
                        failures.append(message)
                    }
                }
            }
        }
        if let bytes = try readyStandardInput() {
            return Found(text: try TextInput.decode(bytes, source: "Standard input"), source: "standard input")
        }
        if answered { return nil }
        if let missingTool {
            throw Unreadable(reason: "Cannot read the selection: install \(missingTool)")
        }
        if !failures.isEmpty {
            throw Unreadable(reason: "Cannot read the selection: " + failures.joined(separator: "; "))
        }
        if !reachable {
            throw UserError(
                "There is no X display, Wayland session or accessibility bus (DISPLAY, WAYLAND_DISPLAY and DBUS_SESSION_BUS_ADDRESS are unset) and nothing is piped in: run it in your desktop session, or pipe the text in (echo text | speak-selection -)."
            )
        }
        return nil
    }

    /// Shows `text` in a desktop notification (best effort, without waiting).
    /// When `notify-send` is missing, says so unless `quietly` (a reason that is also spoken).
    /// A notification daemon that does not answer is given up after ``notificationDeadline``
    /// (notify-send itself would wait 25 s), so it never keeps the program waiting.
    static func notify(_ text: String, quietly: Bool = false) async {
        guard Processes.have("notify-send") else {
            if !quietly { printError("--notify needs notify-send (apt-get install libnotify-bin); continuing without it.") }
            return
        }
        let body = text.count > 300 ? String(text.prefix(300)) + "…" : text
        _ = try? await withThrowingTaskGroup(of: Void.self) { race in
            race.addTask { _ = try await run(.name("notify-send"), arguments: ["--app-name=Parla", "Parla", body], output: .discarded) }
            race.addTask { try await Task.sleep(for: notificationDeadline) }
            defer { race.cancelAll() }
            try await race.next()
        }
    }

    /// How long notify-send may take to hand a notification over.
    static let notificationDeadline = Duration.seconds(2)

    /// Standard input, if it is a file, or a pipe or socket with text there within 50 ms; nil
    /// otherwise. An open pipe that stays empty (some launchers give one) is not waited for, and
    /// reading stops at the end of input or when nothing more comes for 200 ms.
    /// - Throws: a `UserError` if more than 64 MB is piped in.
    static func readyStandardInput() throws -> [UInt8]? {
        var st = stat()
        guard fstat(0, &st) == 0 else { return nil }
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFIFO || kind == S_IFREG || kind == S_IFSOCK else { return nil }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var wait: Int32 = kind == S_IFREG ? -1 : 50
        while true {
            if out.count > 64 << 20 {
                throw UserError("More than 64 MB was piped in: that is not a selection. Use 'parla say -f -' for long texts.")
            }
            if wait >= 0 {
                var p = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                let r = poll(&p, 1, wait)
                if r < 0 && errno == EINTR { continue }
                if r <= 0 { break }
            }
            let n = buffer.withUnsafeMutableBytes { readSome(0, into: $0) }
            if n <= 0 { break }
            out += buffer[0..<n]
            if wait >= 0 { wait = 200 }
        }
        return out.isEmpty ? nil : out
    }

    /// What a selection tool answered (`--print` shows it).
    enum Answer: CustomStringConvertible {
        /// Its standard output.
        case text([UInt8])
        /// It says there is no selection (xclip: "target … not available"; wl-paste: "Nothing
        /// is copied", "No selection").
        case empty
        /// It failed: its own message, or that it did not answer in time.
        case failed(String)

        var description: String {
            switch self {
            case .text(let bytes): "text (\(bytes.count) bytes)"
            case .empty: "empty"
            case .failed(let message): "failed(\(message))"
            }
        }
    }

    /// Runs every command at once until `deadline` (monotonic nanoseconds) and says what each
    /// answered, in the same order. `timeout` (ms) is only for the message of one that is late.
    static func capture(_ commands: [[String]], deadline: UInt64, timeout: Int) async -> [Answer] {
        await withTaskGroup(of: (Int, Answer).self) { group in
            for (i, argv) in commands.enumerated() {
                group.addTask { (i, await answer(of: argv, deadline: deadline, timeout: timeout)) }
            }
            var answers = [Answer](repeating: .empty, count: commands.count)
            for await (i, answer) in group { answers[i] = answer }
            return answers
        }
    }

    /// What one command answered by `deadline`. A command still running then is killed (the
    /// run is cancelled, and swift-subprocess ends a cancelled process with SIGKILL).
    private static func answer(of argv: [String], deadline: UInt64, timeout: Int) async -> Answer {
        guard let tool = argv.first else { return .failed("no command") }
        let now = monotonicNanoseconds()
        let left = deadline > now ? deadline - now : 0
        typealias Result = ExecutionResult<Void, BytesOutput, StringOutput<UTF8>>
        let result: Result?
        do {
            result = try await withThrowingTaskGroup(of: Result?.self) { race in
                race.addTask {
                    try await run(
                        .name(tool), arguments: Arguments(Array(argv.dropFirst())), input: .none,
                        output: .bytes(limit: 64 << 20), error: .string(limit: 64 << 10))
                }
                race.addTask {
                    try await Task.sleep(nanoseconds: left)
                    return nil
                }
                defer { race.cancelAll() }
                return try await race.next() ?? nil
            }
        } catch {
            return .failed("\(tool) could not be run: \(error)")
        }
        guard let result else { return .failed("\(tool) did not answer within \(timeout) ms") }
        if result.terminationStatus.isSuccess { return .text(result.standardOutput) }
        let message = result.standardError.split(separator: "\n").first.map { String($0).trimmed() } ?? ""
        let lower = message.lowercased()
        if ["not available", "nothing is copied", "no selection", "no suitable type"].contains(where: { lower.contains($0) }) {
            return .empty
        }
        if tool == "wl-paste"
            && (lower.contains("missing a seat") || lower.contains("does not support") || lower.contains("doesn't support"))
        {
            // weston and other compositors without data-control or primary-selection.
            return .failed("the compositor does not share it with other programs (wl-paste: \(message))")
        }
        if !message.isEmpty { return .failed("\(tool): \(message)") }
        switch result.terminationStatus {
        case .exited(let code): return .failed("\(tool) failed (status \(code))")
        case .signaled(let signal): return .failed("\(tool) was killed by signal \(signal)")
        }
    }
}

/// The user's speak-selection settings.
struct SelectionSettings {
    var rate: Double?
    var voice: String?
    /// A voice per language (language → voice identifier).
    var voices: [LanguageTag: String] = [:]
    var languages: [LanguageTag] = []
    var device: String?
    var notify = false
    /// How far to lower other audio while speaking, in dB (nil: not at all).
    var duck: Double?
    /// Where to look for the selected text, in order.
    var sources = Selection.Source.defaults
    /// How long each source may take, in milliseconds.
    var timeout = Selection.defaultTimeoutMilliseconds

    static let template = """
        # Parla speak-selection settings. One "key = value" per line; '#' starts a comment.
        # Remove the '#' in front of a setting to use it.

        # Speaking rate in words per minute, 80–450 (default: the voice's, 175).
        # rate = 175

        # The voice for text in its language (see 'parla voices'), e.g. espeak-ng.en-gb.
        # voice = espeak-ng.en-us

        # A voice per language, before each language's default: a Piper neural voice for
        # English, say (see 'parla voices'; Piper voices go in ~/.local/share/parla/voices).
        # voices = en=piper.en_US-joe-medium, fr=espeak-ng.fr

        # Preferred languages, most preferred first, for text the detector cannot decide
        # (default: from $LANGUAGE / $LANG).
        # languages = en, el

        # The PulseAudio sink to play to (default: the server's default sink).
        # device = alsa_output.pci-0000_00_1f.3.analog-stereo

        # Also show the text in a desktop notification.
        # notify = false

        # Lower other audio (music, videos) while speaking: true (by 15 dB), false, or the
        # number of dB, 1–60.
        # duck = false

        # Where to look for the selected text, in order: accessibility (the focused
        # application's selection, as screen readers read it), primary (the highlighted text,
        # through wl-paste or xclip), clipboard (what was last copied).
        # sources = accessibility, primary

        # How long each source may take to answer, in milliseconds.
        # timeout = 45

        """

    static var defaultPath: String {
        let base =
            getenv("XDG_CONFIG_HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            ?? ((getenv("HOME").map { String(cString: $0) } ?? "") + "/.config")
        return base + "/parla/speak-selection.conf"
    }

    /// Reads the settings file, creating it with the commented template when it does not exist.
    /// - Throws: a `UserError` naming the file and line of a bad setting.
    static func load(path explicit: String?) throws -> SelectionSettings {
        let path = explicit ?? defaultPath
        if access(path, F_OK) != 0 {
            if explicit != nil { throw UserError("The settings file \(path) does not exist.") }
            create(path)
            return SelectionSettings()
        }
        let text = try TextInput.read(path: path)
        return try parse(text, path: path)
    }

    static func create(_ path: String) {
        _ = AtomicFile.makeDirectories(String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]))
        guard let file = fopen(path, "wx") else { return }  // never overwrite
        fputs(template, file)
        fclose(file)
    }

    /// A list of sources, like "accessibility, primary".
    static func parseSources(_ value: String) -> Result<[Selection.Source], UserError> {
        var sources: [Selection.Source] = []
        for name in value.split(separator: ",").map({ $0.trimmed().lowercased() }) where !name.isEmpty {
            guard let source = Selection.Source(rawValue: name) else {
                return .failure(
                    UserError("sources must be some of accessibility, primary and clipboard, separated by commas, not '\(name)'"))
            }
            if !sources.contains(source) { sources.append(source) }
        }
        if sources.isEmpty { return .failure(UserError("sources must name at least one of accessibility, primary and clipboard")) }
        return .success(sources)
    }

    static func parse(_ text: String, path: String) throws -> SelectionSettings {
        var s = SelectionSettings()
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let trimmed = line.trimmed()
            if trimmed.isEmpty { continue }
            func fail(_ why: String) -> UserError {
                UserError("\(path), line \(i + 1): \(why). Fix the line or delete the file to get the defaults back.")
            }
            guard let eq = trimmed.firstIndex(of: "=") else { throw fail("expected 'key = value', found '\(trimmed)'") }
            let key = trimmed[..<eq].trimmed().lowercased()
            let value = trimmed[trimmed.index(after: eq)...].trimmed()
            switch key {
            case "rate":
                guard let r = Double(value), SpeechPlan.rateRange.contains(r) else {
                    throw fail("rate must be a number from 80 to 450, not '\(value)'")
                }
                s.rate = r
            case "voice":
                s.voice = value.isEmpty ? nil : value
            case "voices":
                do {
                    s.voices = try VoiceCatalog.parseVoicePreferences([value])
                } catch {
                    throw fail("voices must be LANG=VOICE pairs separated by commas, like 'en=piper.en_US-joe-medium' (\(error))")
                }
            case "languages":
                do {
                    s.languages = try value.split(separator: ",").map { try LanguageTag(parsing: $0.trimmed()) }
                } catch {
                    throw fail("languages must be language tags separated by commas, like 'en, el' (\(error))")
                }
            case "device":
                s.device = value.isEmpty ? nil : value
            case "notify":
                guard let b = ["true": true, "yes": true, "1": true, "false": false, "no": false, "0": false][value.lowercased()] else {
                    throw fail("notify must be true or false, not '\(value)'")
                }
                s.notify = b
            case "duck":
                if let b = ["true": true, "yes": true, "false": false, "no": false][value.lowercased()] {
                    s.duck = b ? 15 : nil
                } else if let dB = Double(value), (1...60).contains(dB) {
                    s.duck = dB
                } else {
                    throw fail("duck must be true, false or a number of dB from 1 to 60, not '\(value)'")
                }
            case "sources":
                switch parseSources(value) {
                case .success(let sources): s.sources = sources
                case .failure(let error): throw fail(error.description)
                }
            case "timeout":
                guard let ms = Int(value), (1...10_000).contains(ms) else {
                    throw fail("timeout must be a number of milliseconds from 1 to 10000, not '\(value)'")
                }
                s.timeout = ms
            default:
                throw fail(
                    "unknown setting '\(key)' (the settings are rate, voice, voices, languages, device, notify, duck, sources and timeout)")
            }
        }
        return s
    }
}

extension StringProtocol {
    /// Without leading and trailing whitespace.
    func trimmed() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}

/// An error the user can act on: printed as "Error: …" without the usage text.
struct UserError: Error, CustomStringConvertible, Equatable {
    var description: String
    init(_ description: String) { self.description = description }
}
