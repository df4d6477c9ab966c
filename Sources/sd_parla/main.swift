// sd_parla: Parla as a speech-dispatcher output module. speech-dispatcher starts it with the
// path of its configuration file, writes commands on its standard input and reads replies and
// events from its standard output; diagnostics go to standard error (the server's module log).
import FoundationEssentials
import Glibc
import Parla
import ParlaSpeechd

let usage = """
    sd_parla: Parla's speech-dispatcher output module.

    speech-dispatcher starts it (Orca, Firefox's Web Speech, spd-say and other clients then speak
    through Parla); it is not meant to be run by hand. Install it with
    scripts/install-speechd-module, then: spd-say -o parla "Hello".

    Usage: sd_parla [CONFIG-FILE]     speak the module protocol on standard input and output
           sd_parla --version | --help

    In the configuration file, lines 'ParlaPreferVoice "LANG=VOICE"' choose a voice per language
    before its default (a Piper voice for English: ParlaPreferVoice "en=piper.en_US-joe-medium"),
    and 'ParlaMaxRate N' sets the words per minute of speech-dispatcher's fastest rate (100):
    175 to 1000, default 450 (as sd_espeak-ng's EspeakMaxRate 449).

    Environment: PARLA_VOICES (the voice catalog), PARLA_PIPER_VOICES (Piper voices),
    PULSE_SERVER (the sound server).
    """

let arguments = CommandLine.arguments.dropFirst()
if arguments.first == "--help" || arguments.first == "-h" {
    print(usage)
    exit(0)
}
if arguments.first == "--version" {
    print("sd_parla (Parla \(parlaVersion))")
    exit(0)
}
signal(SIGPIPE, SIG_IGN)

/// Writes `text` whole to standard output; a server that has gone away ends the module.
@Sendable func send(_ text: String) {
    if writeAll(1, Array(text.utf8)) != nil { exit(0) }
}

@Sendable func log(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
}

/// Parla's live speech on one PulseAudio sink, its events reported to the session.
final class ParlaSpeaker: ModuleSpeaker {
    let synth: SpeechSynthesizer
    private let pump: Task<Void, Never>

    init(device: String?, session: ModuleSession) {
        let synth = SpeechSynthesizer(audioOutput: AudioOutputOptions(device: device))
        self.synth = synth
        let events = synth.events()
        pump = Task {
            for await event in events {
                let reported: ModuleEvent? =
                    switch event.kind {
                    case .started: .started
                    case .mark(let name): .mark(name)
                    case .finished: .finished
                    case .cancelled: .cancelled
                    case .failed(let error): .failed(error)
                    default: nil
                    }
                if let reported { session.deliver(reported, for: event.utterance) }
            }
        }
        // Connect to the server and start the engine now, not at the first key press.
        Task {
            do { try await synth.prepareToSpeak() } catch { log("sd_parla: \(error)") }
        }
    }

    deinit { pump.cancel() }

    func speak(_ utterance: Utterance) throws(ParlaError) -> (id: UtteranceID, voices: [String]) {
        // A plan that fails is refused now, with the server's error reply.
        let prepared = try synth.prepare(utterance)
        let voices = prepared.voices.map { "\($0.language) (\($0.voice.identifier))" }
        return (synth.speak(prepared), voices)
    }

    func stop() { _ = synth.stop(at: .immediate) }
}

/// The `ParlaPreferVoice "LANG=VOICE"` lines of the configuration file.
func voicePreferences(inConfiguration path: String?) -> [String] {
    guard let path, let data = FileManager.default.contents(atPath: path) else { return [] }
    var values: [String] = []
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
        let words = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard words.count == 2, words[0] == "ParlaPreferVoice" else { continue }
        values.append(String(words[1].filter { $0 != "\"" && !$0.isWhitespace }))
    }
    return values
}
let preferredVoices = voicePreferences(inConfiguration: arguments.first)
/// speech-dispatcher's rate 100, from `ParlaMaxRate` (a bad value is logged and the default kept).
let maxRate: Double = {
    guard let path = arguments.first, let data = FileManager.default.contents(atPath: path),
        let found = ModuleSettings.maxRate(inConfiguration: String(decoding: data, as: UTF8.self))
    else { return ModuleSettings.defaultMaxRate }
    switch found {
    case .success(let n): return n
    case .failure(let refusal):
        log("sd_parla: \(path): '\(refusal.line)': \(refusal.reason)")
        return ModuleSettings.defaultMaxRate
    }
}()

let session = ModuleSession(
    catalog: { () throws(ParlaError) in
        try VoiceCatalog.default().preferring(VoiceCatalog.parseVoicePreferences(preferredVoices))
    },
    makeSpeaker: { device, session in ParlaSpeaker(device: device, session: session) },
    output: send,
    log: log,
    maxRate: maxRate)

while let line = readLine(strippingNewline: true) {
    // scripts/bench-speechd splits cancel → silence into speechd's hop and the module's part.
    if line == "STOP" && session.logLevel >= 5 { log("sd_parla: STOP read at \(monotonicNanoseconds()) ns (CLOCK_MONOTONIC)") }
    if !session.receive(line) { exit(0) }
}
// The server closed the pipe (it quit or died): nothing more to say.
exit(0)
