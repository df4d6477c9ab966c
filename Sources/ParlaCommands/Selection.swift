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

    @Argument(help: ArgumentHelp("'-' to speak standard input instead of the selection (waits for it to end). Without it, piped text is spoken only when nothing is selected and the text is there at once.", valueName: "-"))
    var source: String?

    @OptionGroup var catalogOptions: CatalogOptions

    func validate() throws {
        if let source, source != "-" { throw ValidationError("Unexpected argument '\(source)': speak-selection takes no text, only '-' to read standard input (echo text | speak-selection -).") }
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
        Reads the PRIMARY selection (Wayland: wl-paste --primary; X11: xclip or xsel), falling back to \
        the clipboard, then to text piped in that is there at once (an open, empty pipe is never \
        waited for); '-' speaks standard input instead. Each part is spoken by a voice of \
        its language, with your rate, voice and preferred languages from the settings file. In a \
        terminal the word being heard is highlighted; the languages found are printed on standard error.

        Run it while a previous speak-selection of yours is speaking and it stops that one at once and \
        exits (--queue waits and speaks after it; --stop only stops). Nothing selected: it says \
        "Nothing selected" and exits with status 1.

        The settings file ($XDG_CONFIG_HOME/parla/speak-selection.conf, default ~/.config/parla/...) \
        is created with every setting commented out on first use. Lines are "key = value"; keys: rate \
        (80–450 words per minute), voice (an identifier from 'parla voices'), languages (preferred, \
        e.g. "en, el"), device (a PulseAudio sink), notify (true/false), duck (true, false or dB: lower \
        other audio while speaking).
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
            audioOutput: AudioOutputOptions(device: options.device ?? settings.device, ducking: settings.duck.map { DuckingOptions(attenuation: $0) }))
        let signals = Interrupt.onSignal { synth.stop(at: .immediate) }
        defer { signals.forEach { $0.cancel() } }
        let ready = Task { try await synth.prepareToSpeak() }

        let text: String?
        do {
            text = options.source == "-" ? try TextInput.readStandardInput() : try Selection.read()
        } catch let failure as Selection.Unreadable {
            try await sayWhy(failure.reason, synth: synth, ready: ready)
        }
        guard let text, !text.allSatisfy(\.isWhitespace) else {
            try await sayWhy("Nothing selected", synth: synth, ready: ready)
        }
        var utterance = Utterance(string: text)
        if let voice = settings.voice { utterance.voice = try catalog.voice(identifier: voice) }
        utterance.rate = settings.rate
        let plan = try synth.plan(utterance)
        var seen = Set<String>()
        let languages = plan.segments.map(\.language.identifier).filter { seen.insert($0).inserted }
        printError("Languages: \(languages.joined(separator: ", "))")
        if options.notify || settings.notify { Selection.notify(text) }
        try await ready.value
        try await playToEnd(utterance, with: synth, highlight: isatty(1) != 0, eventsJSON: false)
    }

    /// Says why there is nothing to speak in every way a hotkey user can notice: on standard
    /// error, aloud, and in a desktop notification when `notify-send` exists. Exits with status 1.
    func sayWhy(_ reason: String, synth: SpeechSynthesizer, ready: Task<Void, any Error>) async throws -> Never {
        printError(reason + ".")
        Selection.notify(reason, quietly: true)
        try? await ready.value
        _ = await synth.speakAndWait(Utterance(string: reason, language: "en"))
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
    /// Why the selection could not be read: printed, spoken and shown as a notification, since
    /// a hotkey hides standard error.
    struct Unreadable: Error {
        let reason: String
    }

    /// How long each tool may take to answer, from its first call (a `wl-paste` that cannot get
    /// the focus on GNOME hangs). A tool that does not answer in time is not asked again.
    static let deadlineNanoseconds: UInt64 = 1_000_000_000

    /// The PRIMARY selection, else the clipboard, else standard input if text is there at once;
    /// nil when all are empty.
    /// - Throws: ``Unreadable`` naming what to install or what the tools said when no source
    ///   could be read.
    static func read() throws -> String? {
        var commands: [[String]] = []
        let env = { (name: String) in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        var missingTool: String?
        if env("WAYLAND_DISPLAY") != nil {
            if Processes.have("wl-paste") {
                commands += [["wl-paste", "--primary", "--no-newline"], ["wl-paste", "--no-newline"]]
            } else {
                missingTool = "wl-clipboard"
            }
        }
        if env("DISPLAY") != nil {
            if Processes.have("xclip") {
                commands += [["xclip", "-o", "-selection", "primary"], ["xclip", "-o", "-selection", "clipboard"]]
            } else if Processes.have("xsel") {
                commands += [["xsel", "-o", "-p"], ["xsel", "-o", "-b"]]
            } else {
                missingTool = missingTool.map { $0 + " or xclip" } ?? "xclip"
            }
        }
        var failures: [String] = [], failedTools = Set<String>(), answered = false
        var deadlines: [String: UInt64] = [:]
        for command in commands where !failedTools.contains(command[0]) {
            let deadline = deadlines[command[0]] ?? (monotonicNanoseconds() + deadlineNanoseconds)
            deadlines[command[0]] = deadline
            let result = capture(command, deadline: deadline)
            switch result {
            case .text(let bytes):
                if !bytes.isEmpty { return try TextInput.decode(bytes, source: "The selection") }
                answered = true
            case .empty:
                answered = true
            case .failed(let message):
                // The same tool would fail the same way for the clipboard.
                failedTools.insert(command[0])
                failures.append(message)
            }
        }
        if let bytes = try readyStandardInput() {
            return try TextInput.decode(bytes, source: "Standard input")
        }
        if let missingTool, !answered {
            throw Unreadable(reason: "Cannot read the selection: install \(missingTool)")
        }
        if !failures.isEmpty && !answered {
            throw Unreadable(reason: "Cannot read the selection: " + failures.joined(separator: "; "))
        }
        if commands.isEmpty && missingTool == nil {
            throw UserError("There is no X display or Wayland session (DISPLAY and WAYLAND_DISPLAY are unset) and nothing is piped in: run it in your desktop session, or pipe the text in (echo text | speak-selection).")
        }
        return nil
    }

    /// Shows `text` in a desktop notification (best effort, without waiting).
    /// When `notify-send` is missing, says so unless `quietly` (a reason that is also spoken).
    static func notify(_ text: String, quietly: Bool = false) {
        guard Processes.have("notify-send") else {
            if !quietly { printError("--notify needs notify-send (apt-get install libnotify-bin); continuing without it.") }
            return
        }
        let body = text.count > 300 ? String(text.prefix(300)) + "…" : text
        _ = Processes.spawn(["notify-send", "--app-name=Parla", "Parla", body], stdout: nil)
    }

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
            let n = Glibc.read(0, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out += buffer[0..<n]
            if wait >= 0 { wait = 200 }
        }
        return out.isEmpty ? nil : out
    }

    /// What a selection tool answered.
    enum Answer {
        /// Its standard output.
        case text([UInt8])
        /// It says there is no selection (xclip: "target … not available"; wl-paste: "Nothing
        /// is copied", "No selection").
        case empty
        /// It failed: its own message, or that it did not answer in time.
        case failed(String)
    }

    /// Runs `argv` until `deadline` (monotonic nanoseconds) and says what it answered.
    static func capture(_ argv: [String], deadline: UInt64) -> Answer {
        var out: [Int32] = [0, 0], err: [Int32] = [0, 0]
        guard pipe(&out) == 0 else { return .failed("\(argv[0]): cannot make a pipe") }
        guard pipe(&err) == 0 else {
            close(out[0]); close(out[1])
            return .failed("\(argv[0]): cannot make a pipe")
        }
        let pid = Processes.spawn(argv, stdout: out[1], stderr: err[1])
        close(out[1])
        close(err[1])
        defer { close(out[0]); close(err[0]) }
        guard let pid else { return .failed("\(argv[0]) could not be started") }
        var output: [UInt8] = [], errors: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var open = [out[0], err[0]]
        var timedOut = false
        while !open.isEmpty {
            let now = monotonicNanoseconds()
            if now >= deadline { timedOut = true; kill(pid, SIGKILL); break }
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let r = poll(&fds, nfds_t(fds.count), Int32((deadline - now) / 1_000_000) + 1)
            if r < 0 && errno == EINTR { continue }
            if r <= 0 { continue }
            for p in fds where p.revents != 0 {
                let n = Glibc.read(p.fd, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    open.removeAll { $0 == p.fd }
                } else if p.fd == out[0] {
                    output += buffer[0..<n]
                } else if errors.count < 4096 {
                    errors += buffer[0..<n]
                }
            }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut { return .failed("\(argv[0]) did not answer within \(deadlineNanoseconds / 1_000_000) ms") }
        if status == 0 { return .text(output) }
        let message = String(decoding: errors, as: UTF8.self)
            .split(separator: "\n").first.map { String($0).trimmed() } ?? ""
        let lower = message.lowercased()
        if ["not available", "nothing is copied", "no selection", "no suitable type"].contains(where: { lower.contains($0) }) {
            return .empty
        }
        return .failed(message.isEmpty ? "\(argv[0]) failed (status \((status >> 8) & 0xFF))" : "\(argv[0]): \(message)")
    }
}

/// The user's speak-selection settings.
struct SelectionSettings {
    var rate: Double?
    var voice: String?
    var languages: [LanguageTag] = []
    var device: String?
    var notify = false
    /// How far to lower other audio while speaking, in dB (nil: not at all).
    var duck: Double?

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

        # Lower other audio (music, videos) while speaking: true (by 15 dB), false, or the
        # number of dB, 1–60.
        # duck = false

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
            case "duck":
                if let b = ["true": true, "yes": true, "false": false, "no": false][value.lowercased()] {
                    s.duck = b ? 15 : nil
                } else if let dB = Double(value), (1...60).contains(dB) {
                    s.duck = dB
                } else {
                    throw fail("duck must be true, false or a number of dB from 1 to 60, not '\(value)'")
                }
            default:
                throw fail("unknown setting '\(key)' (the settings are rate, voice, languages, device, notify and duck)")
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
