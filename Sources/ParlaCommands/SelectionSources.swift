import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Subprocess
#if canImport(Glibc)
    import Glibc
#endif

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
