import FoundationEssentials
import ParlaCore
import Synchronization

/// What the module speaks with: Parla's live speech in `sd_parla`, a fake in unit tests.
package protocol ModuleSpeaker: AnyObject, Sendable {
    /// Starts speaking `utterance` (the module speaks one message at a time).
    /// - Returns: its id, and the language and voice of each part (for the log).
    /// - Throws: when it cannot be spoken at all (its plan fails: a language no voice speaks).
    func speak(_ utterance: Utterance) throws(ParlaError) -> (id: UtteranceID, voices: [String])
    /// Cuts off what is speaking, at once.
    func stop()
}

/// What happened to the message being spoken, as the listener hears it.
package enum ModuleEvent: Sendable {
    case started
    case mark(String)
    case finished
    case cancelled
    case failed(ParlaError)
}

/// One speech-dispatcher output-module conversation: the server's commands in, replies and
/// events out (the protocol of speech-dispatcher 0.11, "Communication Protocol for Output
/// Modules" in its manual).
///
/// The rules the server relies on, kept here:
/// - a reply or event block is written whole (one `write` under the session lock);
/// - events go out only for the message being spoken, after its `200 OK SPEAKING`: `701 BEGIN`
///   first, `700` for each mark as the listener reaches it, then exactly one of `702 END`,
///   `703 STOP` or `704 PAUSE`; never while idle (a `STOP` after the end writes nothing);
/// - `PAUSE` plays on to the next `__spd_` mark (the server inserts one after each sentence and
///   resumes by sending the text after the last one it got), reports it, then `704 PAUSE`;
/// - `STOP` and `PAUSE` get no reply.
package final class ModuleSession: Sendable {
    private let loadCatalog: @Sendable () throws(ParlaError) -> VoiceCatalog
    private let makeSpeaker: @Sendable (_ device: String?, _ session: ModuleSession) -> any ModuleSpeaker
    private let output: @Sendable (String) -> Void
    private let log: @Sendable (String) -> Void
    private let state = Mutex(State())

    private enum Input {
        case command
        case body(String, [String])
        case settings(String, [String])
    }

    private struct Current {
        var id: UtteranceID
        var begun = false
        var pauseRequested = false
        var pausing = false
    }

    private struct State {
        var input = Input.command
        var settings = ModuleSettings()
        var catalog: VoiceCatalog?
        var device: String?
        var speaker: (any ModuleSpeaker)?
        var current: Current?
        var logLevel = 3
    }

    /// - Parameters:
    ///   - catalog: loads the voices (at `INIT`; a failure refuses the module).
    ///   - makeSpeaker: creates the speaker for a PulseAudio sink (nil: the default one), once
    ///     the server has said where audio goes (`AUDIO`), or at the first message; it reports
    ///     events to the session (``deliver(_:for:)``).
    ///   - output: writes a block of protocol lines to the server.
    ///   - log: writes a diagnostic line (speech-dispatcher keeps the module's stderr in its log).
    ///   - maxRate: the words per minute of speech-dispatcher's rate 100 (the configuration's
    ///     `ParlaMaxRate`).
    package init(
        catalog: @escaping @Sendable () throws(ParlaError) -> VoiceCatalog,
        makeSpeaker: @escaping @Sendable (_ device: String?, _ session: ModuleSession) -> any ModuleSpeaker,
        output: @escaping @Sendable (String) -> Void,
        log: @escaping @Sendable (String) -> Void,
        maxRate: Double = ModuleSettings.defaultMaxRate
    ) {
        self.loadCatalog = catalog
        self.makeSpeaker = makeSpeaker
        self.output = output
        self.log = log
        state.withLock { $0.settings.maxRate = maxRate }
    }

    /// Handles one line from the server (without its line feed).
    /// - Returns: false once the server said `QUIT` (the reply is written).
    package func receive(_ line: String) -> Bool {
        state.withLock { s in
            switch s.input {
            case .command:
                return command(line, in: &s)
            case .body(let kind, var lines):
                guard line != "." else {
                    s.input = .command
                    message(kind, lines, in: &s)
                    return true
                }
                // The server doubles a leading dot of every line of the body.
                lines.append(line.hasPrefix("..") ? String(line.dropFirst()) : line)
                s.input = .body(kind, lines)
            case .settings(let kind, var lines):
                guard line != "." else {
                    s.input = .command
                    settings(kind, lines, in: &s)
                    return true
                }
                lines.append(line)
                s.input = .settings(kind, lines)
            }
            return true
        }
    }

    /// Reports an event of utterance `id`; ignored unless it is the message being spoken.
    package func deliver(_ event: ModuleEvent, for id: UtteranceID) {
        state.withLock { s in
            guard var current = s.current, current.id == id else { return }
            if !current.begun {
                current.begun = true
                output("701 BEGIN\n")
            }
            switch event {
            case .started:
                break
            case .mark(let name):
                guard !current.pausing else { break }  // the server resumes after the last mark it got
                output("700-\(name)\n700 INDEX MARK\n")
                if current.pauseRequested, name.hasPrefix("__spd_") {
                    current.pausing = true
                    s.speaker?.stop()
                }
            case .finished:
                output("702 END\n")
                s.current = nil
                return
            case .cancelled:
                output(current.pausing ? "704 PAUSE\n" : "703 STOP\n")
                s.current = nil
                return
            case .failed(let error):
                log("sd_parla: the message could not be spoken: \(error)")
                output(current.pausing ? "704 PAUSE\n" : "703 STOP\n")
                s.current = nil
                return
            }
            s.current = current
        }
    }

    /// Whether a message is being spoken (its terminal event not yet written).
    package var isSpeaking: Bool { state.withLock { $0.current != nil } }

    /// The server's log level (`LOGLEVEL`): 4 logs each message's voices, 5 also when STOP is read.
    package var logLevel: Int { state.withLock { $0.logLevel } }

    // MARK: Commands (state lock held)

    private func command(_ line: String, in s: inout State) -> Bool {
        let words = line.split(separator: " ", omittingEmptySubsequences: true)
        let verb = words.first.map(String.init) ?? ""
        switch verb {
        case "INIT":
            do {
                let catalog = try catalog(in: &s)
                output("299-Parla: \(catalog.voices.count) voices, \(catalog.languages.count) languages\n299 OK LOADED SUCCESSFULLY\n")
            } catch {
                log("sd_parla: cannot start: \(error)")
                output("399-\(oneLine(error.description))\n399 ERR CANT INIT MODULE\n")
            }
        case "SPEAK", "CHAR", "KEY", "SOUND_ICON":
            s.input = .body(verb, [])
            output("202 OK RECEIVING MESSAGE\n")
        case "SET":
            s.input = .settings(verb, [])
            output("203 OK RECEIVING SETTINGS\n")
        case "AUDIO":
            s.input = .settings(verb, [])
            output("207 OK RECEIVING AUDIO SETTINGS\n")
        case "LOGLEVEL":
            s.input = .settings(verb, [])
            output("207 OK RECEIVING LOGLEVEL SETTINGS\n")
        case "LIST" where words.count > 1 && words[1] == "VOICES":
            listVoices(in: &s)
        case "STOP":
            if s.current != nil { s.speaker?.stop() }
        case "PAUSE":
            s.current?.pauseRequested = true
        case "DEBUG":
            output(words.count > 1 && words[1] == "ON" ? "200 OK DEBUGGING ON\n" : "200 OK DEBUGGING OFF\n")
        case "QUIT":
            if s.current != nil { s.speaker?.stop() }
            output("210 OK QUIT\n")
            return false
        default:
            output("300 ERR UNKNOWN COMMAND\n")
        }
        return true
    }

    private func listVoices(in s: inout State) {
        guard let catalog = try? catalog(in: &s), !catalog.voices.isEmpty else {
            output("304 CANT LIST VOICES\n")
            return
        }
        var reply = ""
        for voice in catalog.voices {
            let language = voice.primaryLanguage?.identifier ?? "none"
            reply += "200-\(voice.identifier)\t\(language)\t\(voice.variant ?? "none")\n"
        }
        output(reply + "200 OK VOICE LIST SENT\n")
    }

    private func settings(_ kind: String, _ lines: [String], in s: inout State) {
        switch kind {
        case "SET":
            var next = s.settings
            for line in lines {
                do throws(ModuleSettings.Refusal) {
                    try next.apply(line)
                } catch {
                    log("sd_parla: refused setting '\(error.line)': \(error.reason)")
                    output("303 ERROR INVALID PARAMETER OR VALUE\n")
                    return
                }
            }
            if let catalog = s.catalog, let name = next.synthesisVoice, (try? catalog.voice(identifier: name)) == nil {
                log("sd_parla: refused synthesis_voice=\(name): no such voice (LIST VOICES gives the names)")
                output("303 ERROR INVALID PARAMETER OR VALUE\n")
                return
            }
            s.settings = next
            output("203 OK SETTINGS RECEIVED\n")
        case "AUDIO":
            var values: [String: String] = [:]
            for line in lines {
                if let eq = line.firstIndex(of: "=") { values[String(line[..<eq])] = String(line[line.index(after: eq)...]) }
            }
            let methods = (values["audio_output_method"] ?? "").split(separator: ",").map { $0.trimmingASCIIWhitespace() }
            if methods == ["server"] {
                // Parla plays through its own PulseAudio stream: its events are timed to that
                // stream, and stop is immediate. The server then offers its own audio settings.
                output("300-Parla plays through PulseAudio itself\n300 MODULE ERROR\n")
                return
            }
            if let device = values["audio_pulse_device"], device != "default", !device.isEmpty { s.device = device }
            if s.speaker == nil { s.speaker = makeSpeaker(s.device, self) }
            output("203 OK AUDIO INITIALIZED\n")
        default:  // LOGLEVEL
            for line in lines where line.hasPrefix("log_level=") { s.logLevel = Int(line.dropFirst(10)) ?? s.logLevel }
            output("203 OK LOGLEVEL SET\n")
        }
    }

    private func message(_ kind: String, _ lines: [String], in s: inout State) {
        if let current = s.current {
            // The server sent a new message before the last one ended: end it now.
            log("sd_parla: a new message came before the last one ended; stopping it")
            if !current.begun { output("701 BEGIN\n") }
            output("703 STOP\n")
            s.current = nil
            s.speaker?.stop()
        }
        if kind != "SPEAK", lines.count > 1 {
            output("305 DATA MORE THAN ONE LINE\n")
            return
        }
        let body = lines.joined(separator: "\n")
        do throws(ParlaError) {
            let catalog = try catalog(in: &s)
            var utterance: Utterance
            switch kind {
            case "SPEAK": utterance = try ModuleMessage.speech(body)
            case "CHAR": utterance = try ModuleMessage.character(body, capitals: s.settings.capitalLetters)
            case "KEY": utterance = try ModuleMessage.key(body)
            default: utterance = try ModuleMessage.soundIcon(body)
            }
            var settings = s.settings
            if kind != "SPEAK" { settings.spelling = false }  // characters and keys are spelled already
            try settings.configure(&utterance, catalog: catalog)
            if s.speaker == nil { s.speaker = makeSpeaker(s.device, self) }
            guard let speaker = s.speaker else { throw .audioFailure("no speaker") }
            let (id, voices) = try speaker.speak(utterance)
            output("200 OK SPEAKING\n")
            s.current = Current(id: id)
            if s.logLevel >= 4 {
                log("sd_parla: \(kind) of \(utterance.string.unicodeScalars.count) characters: \(voices.joined(separator: ", "))")
            }
        } catch {
            log("sd_parla: cannot speak this \(kind) message (\(body.unicodeScalars.count) characters): \(error)")
            output("301 ERROR CANT SPEAK\n")
        }
    }

    /// The catalog, loaded once.
    private func catalog(in s: inout State) throws(ParlaError) -> VoiceCatalog {
        if let loaded = s.catalog { return loaded }
        let loaded = try loadCatalog()
        s.catalog = loaded
        return loaded
    }

    private func oneLine(_ s: String) -> String {
        String(s.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}
