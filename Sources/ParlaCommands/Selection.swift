import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
#if canImport(Glibc)
import Glibc
#endif

/// Options of `speak-selection` and `parla selection`.
struct SelectionOptions: ParsableArguments {
    @Flag(name: .customLong("queue"), help: "If another speak-selection is speaking, wait for it to finish, then speak (instead of stopping it).")
    var queue = false

    @Flag(name: .customLong("stop"), help: "Only stop a speak-selection that is speaking; speak nothing.")
    var stopOnly = false

    @Flag(name: .customLong("notify"), help: "Also show the text in a desktop notification (notify-send).")
    var notify = false

    @Option(name: .customLong("config"), help: ArgumentHelp("The settings file (default: $XDG_CONFIG_HOME/parla/speak-selection.conf, created on first use).", valueName: "file"))
    var config: String?

    @Option(name: .customLong("device"), help: ArgumentHelp("PulseAudio sink to play to (overrides the settings file).", valueName: "sink"))
    var device: String?

    @OptionGroup var catalogOptions: CatalogOptions
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
        Reads the PRIMARY selection (Wayland: wl-paste --primary; X11: xclip or xsel), falling back to \
        the clipboard, and to standard input when text is piped in. Each part is spoken by a voice of \
        its language, with your rate, voice and preferred languages from the settings file. In a \
        terminal the word being heard is highlighted; the languages found are printed on standard error.

        Run it while a previous speak-selection of yours is speaking and it stops that one at once and \
        exits (--queue waits and speaks after it; --stop only stops). Nothing selected: it says \
        "Nothing selected" and exits with status 1.

        The settings file ($XDG_CONFIG_HOME/parla/speak-selection.conf, default ~/.config/parla/...) \
        is created with every setting commented out on first use. Lines are "key = value"; keys: rate \
        (80–450 words per minute), voice (an identifier from 'parla voices'), languages (preferred, \
        e.g. "en, el"), device (a PulseAudio sink), notify (true/false).
        """

    let options: SelectionOptions

    func run() async throws {
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
        let catalog = try options.catalogOptions.load()
        var detector = try LanguageDetector.load(catalog: catalog)
        if !settings.languages.isEmpty { detector.preferences = LanguagePreferences(settings.languages) }
        let synth = SpeechSynthesizer(
            catalog: catalog, defaultLanguage: settings.languages.first ?? "en", detector: detector,
            audioOutput: AudioOutputOptions(device: options.device ?? settings.device))
        let signals = Interrupt.onSignal { synth.stop(at: .immediate) }
        defer { signals.forEach { $0.cancel() } }
        async let ready: Void = synth.prepareToSpeak()

        let text = try Selection.read()
        guard let text, !text.allSatisfy(\.isWhitespace) else {
            printError("Nothing selected.")
            try? await ready
            _ = await synth.speakAndWait(Utterance(string: "Nothing selected", language: "en"))
            throw ExitCode(1)
        }
        var utterance = Utterance(string: text)
        if let voice = settings.voice { utterance.voice = try catalog.voice(identifier: voice) }
        utterance.rate = settings.rate
        let plan = try synth.plan(utterance)
        var seen = Set<String>()
        let languages = plan.segments.map(\.language.identifier).filter { seen.insert($0).inserted }
        printError("Languages: \(languages.joined(separator: ", "))")
        if options.notify || settings.notify { Selection.notify(text) }
        try await ready
        try await playToEnd(utterance, with: synth, highlight: isatty(1) != 0, eventsJSON: false)
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
            throw UserError("Cannot open the lock file \(path): \(String(cString: strerror(errno))). Check that the directory is writable.")
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
    /// The PRIMARY selection, else the clipboard, else piped standard input; nil when all are empty.
    /// - Throws: a `UserError` naming what to install or do when no source can be read.
    static func read() throws -> String? {
        var commands: [[String]] = []
        let env = { (name: String) in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        var missingTool: String?
        if env("WAYLAND_DISPLAY") != nil {
            if Processes.have("wl-paste") {
                commands += [["wl-paste", "--primary", "--no-newline"], ["wl-paste", "--no-newline"]]
            } else {
                missingTool = "wl-paste (apt-get install wl-clipboard)"
            }
        }
        if env("DISPLAY") != nil {
            if Processes.have("xclip") {
                commands += [["xclip", "-o", "-selection", "primary"], ["xclip", "-o", "-selection", "clipboard"]]
            } else if Processes.have("xsel") {
                commands += [["xsel", "-o", "-p"], ["xsel", "-o", "-b"]]
            } else {
                missingTool = "xclip or xsel (apt-get install xclip)"
            }
        }
        for command in commands {
            if let bytes = capture(command), !bytes.isEmpty {
                return try TextInput.decode(bytes, source: "The selection")
            }
        }
        if stdinIsPiped() {
            return try TextInput.readStandardInput()
        }
        if commands.isEmpty {
            if let missingTool {
                throw UserError("Cannot read the selection: install \(missingTool), or pipe the text in (echo text | speak-selection).")
            }
            throw UserError("There is no X display or Wayland session (DISPLAY and WAYLAND_DISPLAY are unset) and nothing is piped in: run it in your desktop session, or pipe the text in (echo text | speak-selection).")
        }
        return nil
    }

    /// Shows `text` in a desktop notification (best effort, without waiting).
    static func notify(_ text: String) {
        guard Processes.have("notify-send") else {
            printError("--notify needs notify-send (apt-get install libnotify-bin); continuing without it.")
            return
        }
        let body = text.count > 300 ? String(text.prefix(300)) + "…" : text
        _ = Processes.spawn(["notify-send", "--app-name=Parla", "Parla", body], stdout: nil)
    }

    static func stdinIsPiped() -> Bool {
        var st = stat()
        guard fstat(0, &st) == 0 else { return false }
        let kind = st.st_mode & S_IFMT
        return kind == S_IFIFO || kind == S_IFREG || kind == S_IFSOCK
    }

    /// Runs `argv` and returns its standard output, or nil if it failed or took over 2 s.
    static func capture(_ argv: [String]) -> [UInt8]? {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        let pid = Processes.spawn(argv, stdout: fds[1])
        close(fds[1])
        defer { close(fds[0]) }
        guard let pid else { return nil }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = monotonicNanoseconds() + 2_000_000_000
        while true {
            let now = monotonicNanoseconds()
            if now >= deadline { kill(pid, SIGKILL); break }
            var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, Int32((deadline - now) / 1_000_000) + 1)
            if r < 0 && errno == EINTR { continue }
            if r <= 0 { continue }
            let n = Glibc.read(fds[0], &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status == 0 ? out : nil
    }
}

/// The user's speak-selection settings.
struct SelectionSettings {
    var rate: Double?
    var voice: String?
    var languages: [LanguageTag] = []
    var device: String?
    var notify = false

    static let template = """
        # Parla speak-selection settings. One "key = value" per line; '#' starts a comment.
        # Remove the '#' in front of a setting to use it.

        # Speaking rate in words per minute, 80–450 (default: the voice's, 175).
        # rate = 175

        # The voice for text in its language (see 'parla voices'), e.g. espeak-ng.en-gb.
        # voice = espeak-ng.en-us

        # Preferred languages, most preferred first, for text the detector cannot decide
        # (default: from $LANGUAGE / $LANG).
        # languages = en, el

        # The PulseAudio sink to play to (default: the server's default sink).
        # device = alsa_output.pci-0000_00_1f.3.analog-stereo

        # Also show the text in a desktop notification.
        # notify = false

        """

    static var defaultPath: String {
        let base = getenv("XDG_CONFIG_HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
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
                guard let r = Double(value), SpeechPlan.rateRange.contains(r) else { throw fail("rate must be a number from 80 to 450, not '\(value)'") }
                s.rate = r
            case "voice":
                s.voice = value.isEmpty ? nil : value
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
            default:
                throw fail("unknown setting '\(key)' (the settings are rate, voice, languages, device and notify)")
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
struct UserError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
