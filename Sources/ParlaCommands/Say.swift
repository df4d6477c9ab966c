import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import ParlaEngine
import ParlaIO
import ParlaPulseAudio
#if canImport(Glibc)
    import Glibc
#endif

/// `parla say`: render text to a WAV file with an optional word timeline.
struct Say: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Speak text aloud through PulseAudio, or render it to a WAV file with word timings.",
        discussion: """
            The text comes from the arguments, from -f FILE, or from standard input ('-' or a pipe). \
            Plain text is spoken literally ('<' and '&' are text); use --ssml for SSML markup.

            Text is split by language automatically (see 'parla detect'): every part is spoken by a voice \
            of its language. -l LANG (or an xml:lang in SSML) makes the language explicit; --no-detect turns \
            detection off; --prefer fr,de breaks ties the text cannot.

            Without -o the text plays through PulseAudio (or PipeWire's pulse server). --device picks the \
            sink; --highlight shows the text with the word being heard highlighted, and takes keys while it \
            plays: + and - make it faster and slower (10 % a press, from the next word not yet buffered), ] and \
            [ louder and quieter (3 dB a press, at once), space pauses and resumes; --events json prints \
            one JSON object per line for every event, such as \
            {"event": "word", "t_ns": 123, "utterance": 1, "start": 0, "end": 5, "text": "Hello", "audio_ms": 42.1} \
            (event: started, sentence, word, paused, continued, finished, interrupted or failed; t_ns: \
            CLOCK_MONOTONIC when delivered; start/end: Unicode-scalar offsets into the input; audio_ms: the \
            word's offset in the utterance's audio; the last event of each utterance adds underflows, the \
            times the sound server ran out of audio, and buffer_ms, the buffer its stream kept at the end, \
            which grows after each underflow). Ctrl-C or SIGTERM silences the audio at once and exits \
            with status 130. With no sound server, it says so: render with -o FILE.wav instead.

            The --timings file lists every segment (language, voice), sentence and word with its range in \
            the input (Unicode-scalar offsets, end exclusive) and its start and end in milliseconds of the \
            audio. See README.md for the schema.
            """
    )

    @Argument(help: "The text to speak ('-' reads standard input).")
    var text: [String] = []

    @Option(
        name: [.customShort("f"), .customLong("file")],
        help: ArgumentHelp("Read the text from a UTF-8 file ('-' for standard input).", valueName: "file"))
    var file: String?

    @Option(
        name: [.customShort(OutputOption.short), .customLong(OutputOption.output)],
        help: ArgumentHelp("Write the audio to this WAV file (16-bit PCM, mono, the engine's rate).", valueName: "file.wav"))
    var output: String?

    @Option(
        name: .customLong("timings"),
        help: ArgumentHelp(
            "Also write the word timeline to this JSON file ('-' prints it on standard output; needs -o).", valueName: "file.json"))
    var timings: String?

    @Option(
        name: [.customShort("v"), .customLong("voice")],
        help: ArgumentHelp("Voice identifier, e.g. espeak-ng.en-us or espeak-ng.fr+f2 (see 'parla voices').", valueName: "id"))
    var voice: String?

    @Option(
        name: [.customShort("l"), .customLong("language")],
        help: ArgumentHelp("Language of text without an explicit language (BCP 47, e.g. en, pt-BR).", valueName: "tag"))
    var language: String?

    @Option(
        name: [.customShort("r"), .customLong("rate")],
        help: ArgumentHelp("Speaking rate in words per minute, 80–1000 (default: the voice's, 175).", valueName: "wpm"))
    var rate: Double?

    @Option(name: [.customShort("p"), .customLong("pitch")], help: ArgumentHelp("Pitch, 0–99 (default 50).", valueName: "n"))
    var pitch: Double?

    @Option(
        name: [.customShort("a"), .customLong("volume")], help: ArgumentHelp("Volume (amplitude), 0–200 (default 100).", valueName: "n"))
    var volume: Double?

    @Option(name: .customLong("punctuation"), help: ArgumentHelp("Punctuation to read aloud: none, some or all.", valueName: "mode"))
    var punctuation: PunctuationMode = .none

    @Flag(name: .customLong("ssml"), help: "The input is an SSML document (<speak>…</speak>).")
    var ssml = false

    @Flag(
        name: .customLong("no-detect"),
        help: "Do not detect languages: speak text without a language in -l, the voice's language, or the first preferred language.")
    var noDetect = false

    @Option(
        name: .customLong("prefer"),
        help: ArgumentHelp(
            "Preferred languages for text the detector cannot decide, most preferred first (default: from $LANGUAGE/$LANG).",
            valueName: "fr,de"))
    var prefer: String?

    @Option(
        name: .customLong(OutputOption.device),
        help: ArgumentHelp(
            "PulseAudio sink to play to (default: the server's default; list them with 'pactl list short sinks').", valueName: "sink"))
    var device: String?

    @Option(
        name: .customLong(OutputOption.latency),
        help: ArgumentHelp(
            "Audio the server buffers ahead, in milliseconds (default 30; more if playback stutters on a busy machine).", valueName: "ms"))
    var latency: Int = 30

    @Flag(
        name: .customLong(OutputOption.duck),
        help: "Lower other programs' audio (music, videos) while speaking, and restore it afterwards, even if parla is killed.")
    var duck = false

    @Option(
        name: .customLong(OutputOption.duckBy),
        help: ArgumentHelp("How far --duck lowers other audio, in dB, 1–60 (default 15; implies --duck).", valueName: "dB"))
    var duckBy: Double?

    @Flag(
        name: .customLong("highlight"),
        help: "Show the text with the word being heard highlighted (live playback); keys: + - rate, ] [ volume, space pause.")
    var highlight = false

    @Option(
        name: .customLong("events"),
        help: ArgumentHelp(
            "Print every playback event on standard output in this format (only 'json': one object per line).", valueName: "json"))
    var events: EventFormat?

    enum EventFormat: String, ExpressibleByArgument { case json }

    @Flag(
        name: .customLong("ipa"),
        help:
            "Print the phonemes each word is spoken with (IPA, as the voice was given them), a sentence a line: as it is heard, or with -o once written."
    )
    var ipa = false

    @OptionGroup var catalogOptions: CatalogOptions

    /// One `--events json` line.
    static func json(_ event: SpeechEvent) -> String {
        var fields = [
            "\"event\": \(JSONText.quoted(event.kind.name))", "\"t_ns\": \(event.time.nanoseconds)", "\"utterance\": \(event.utterance)",
        ]
        switch event.kind {
        case .willSpeakWord(let r), .willSpeakSentence(let r), .resumed(from: let r):
            fields += [
                "\"start\": \(r.scalarRange.lowerBound)", "\"end\": \(r.scalarRange.upperBound)",
                "\"text\": \(JSONText.quoted(r.text))", "\"audio_ms\": \(String(format1: r.audioTime.inMilliseconds))",
            ]
            if let phonemes = r.phonemes { fields.append("\"phonemes\": \(JSONText.quoted(phonemes))") }
        case .mark(let name):
            fields.append("\"name\": \(JSONText.quoted(name))")
        case .failed(let error):
            fields.append("\"error\": \(JSONText.quoted(error.description))")
        default:
            break
        }
        if let playback = event.playback {
            fields += ["\"underflows\": \(playback.underflows)", "\"buffer_ms\": \(String(format1: playback.latency.inMilliseconds))"]
        }
        return "{" + fields.joined(separator: ", ") + "}\n"
    }

}

extension Say {
    func validate() throws {
        if output != nil && (highlight || events != nil || device != nil || duck || duckBy != nil) {
            throw ValidationError(
                "--highlight, --events, --device and --duck are for live playback; leave out -o FILE.wav to play the text.")
        }
        if [highlight, events != nil, ipa].filter({ $0 }).count > 1 {
            throw ValidationError("Use one of --highlight, --events json and --ipa: each writes to standard output.")
        }
        if ipa && timings == "-" { throw ValidationError("--ipa and --timings - both write to standard output: give --timings a file.") }
        if !(5...2000).contains(latency) { throw ValidationError("Latency \(latency) ms is out of range: use 5–2000.") }
        if timings != nil && output == nil { throw ValidationError("--timings needs -o FILE.wav.") }
        if file != nil && !text.isEmpty { throw ValidationError("Give the text as arguments or with -f, not both.") }
        if let pitch, !(0...99).contains(pitch) { throw ValidationError("Pitch \(pitch) is out of range: use 0–99.") }
        if let volume, !(0...200).contains(volume) { throw ValidationError("Volume \(volume) is out of range: use 0–200.") }
        if let duckBy, !(1...60).contains(duckBy) { throw ValidationError("--duck-by \(duckBy) dB is out of range: use 1–60.") }
        if let rate, !SpeechPlan.rateRange.contains(rate) {
            throw ValidationError("Rate \(rate) is out of range: use 80–1000 words per minute.")
        }
    }

    func run() async throws {
        // The engine loads in its own process while this one reads the catalog and the text,
        // and live speech connects to the sound server meanwhile (on a thread: it blocks).
        let audioOutput = self.audioOutput
        SpeechSynthesizer.warmUp(audioOutput: output == nil ? audioOutput : nil)
        let catalog = try catalogOptions.load()
        let input = try readInput()
        var utterance = ssml ? try Utterance(ssml: input) : Utterance(string: input)
        if let language { utterance.language = try LanguageTag(parsing: language) }
        if let voice { utterance.voice = try catalog.voice(identifier: voice) }
        utterance.wordsPerMinute = rate
        if let pitch { utterance.pitch = pitch / 50 }
        if let volume { utterance.volume = volume / 100 }
        utterance.punctuation = punctuation

        // -l makes the whole text explicit; otherwise text is segmented by language unless
        // --no-detect is given.
        var detector: LanguageDetector? = nil
        if !noDetect && language == nil {
            detector = try makeDetector(catalog: catalog, prefer: prefer, only: nil)
        }
        let synth = SpeechSynthesizer(
            catalog: catalog,
            defaultLanguage: try prefer.map { try parseTagList($0, option: "--prefer")[0] } ?? "en",
            detectsLanguages: detector != nil, detector: detector, audioOutput: audioOutput)
        let prepared = try synth.prepare(utterance)  // report bad input before any file is created
        guard let output else {
            try await play(prepared, with: synth)
            return
        }
        let timeline = try await Interrupt.cancellingOnSignal {
            try await synth.write(
                prepared, to: URL(fileURLWithPath: output),
                timingsURL: timings.flatMap { $0 == "-" ? nil : URL(fileURLWithPath: $0) })
        }
        if timings == "-" { print(timeline.json(), terminator: "") }
        if ipa { writeStandardOutput(IPALines.lines(timeline)) }
        let seconds = Double(timeline.sampleCount) / Double(timeline.sampleRate)
        let languages = timeline.segments.map(\.language.identifier)
        var seen = Set<String>()
        let unique = languages.filter { seen.insert($0).inserted }
        printError(
            "Wrote \(output): \(String(format1: seconds)) s, \(timeline.words.count) words, languages: \(unique.joined(separator: ", "))"
                + (timings.map { "; timings in \($0)" } ?? ""))
    }

    /// Plays `utterance` live, printing events or the highlighted text, until it ends.
    private func play(_ prepared: PreparedUtterance, with synth: SpeechSynthesizer) async throws {
        let signalHandler = Interrupt.onSignal { synth.stop(at: .immediate) }
        defer { signalHandler.cancel() }
        // Speaking starts at once: the engine and the connection begun in run() are under
        // way, the utterance opens its stream while the engine gets ready, and a failure of
        // either is the utterance's, reported as it fails.
        try await playToEnd(
            prepared, with: synth, highlight: highlight, eventsJSON: events == .json, ipa: ipa, keys: highlight)
    }

    /// Where and how live speech plays, from `--device`, `--latency`, `--duck` and `--duck-by`.
    var audioOutput: AudioOutputOptions {
        AudioOutputOptions(
            device: device, targetLatency: .milliseconds(latency),
            ducking: duck || duckBy != nil ? DuckingOptions(attenuation: duckBy ?? 15) : nil)
    }

    /// The names of the options that decide whether `say` plays and how (`-o`, `--device`,
    /// `--latency`, `--duck`, `--duck-by`): its options use them, and the quick start reads a
    /// line for them before the parser has run (``playsWithDefaultOutput(_:)``).
    enum OutputOption {
        static let short: Character = "o"
        static let output = "output", device = "device", latency = "latency", duck = "duck", duckBy = "duck-by"
        static let long = [output, device, latency, duck, duckBy]
    }

    /// Whether the arguments after `say` certainly hold none of the ``OutputOption`` options,
    /// so that the command, if its parser takes them, plays live with ``AudioOutputOptions``'
    /// defaults: read before the parse (which takes a few ms), so that the connection to the
    /// sound server starts at once, as the engine host did before `main`. Any word that might
    /// be one of them (a long option of those names, or a cluster of short options holding
    /// `o`, anywhere on the line, after `--` too) answers false: the connection then waits for
    /// the parse, as any other line's does.
    static func playsWithDefaultOutput(_ arguments: [String]) -> Bool {
        for word in arguments where word.hasPrefix("-") {
            if word.hasPrefix("--") {
                let name = word.dropFirst(2).prefix { $0 != "=" }
                if OutputOption.long.contains(where: { $0.hasPrefix(name) && !name.isEmpty }) { return false }
            } else if word.contains(OutputOption.short) {
                return false
            }
        }
        return true
    }

    private func readInput() throws -> String {
        if let file { return try TextInput.read(path: file) }
        if text == ["-"] || (text.isEmpty && isatty(0) == 0) { return try TextInput.readStandardInput() }
        if text.isEmpty {
            throw ValidationError("Nothing to say: give the text as an argument, with -f FILE, or on standard input.")
        }
        return text.joined(separator: " ")
    }
}

extension PunctuationMode: ExpressibleByArgument {}

/// What `--ipa` prints: each word's phonemes, separated by spaces, a sentence a line (a word
/// whose phonemes the engine did not give is left out).
enum IPALines {
    /// The lines of a written utterance's timeline.
    static func lines(_ timeline: SpeechTimeline) -> String {
        var out = "", line: [String] = [], sentence = 0
        for w in timeline.words {
            while sentence + 1 < timeline.sentences.count, timeline.sentences[sentence + 1].range.lowerBound <= w.range.lowerBound {
                sentence += 1
                if !line.isEmpty { out += line.joined(separator: " ") + "\n" }
                line = []
            }
            if let p = w.phonemes { line.append(p) }
        }
        if !line.isEmpty { out += line.joined(separator: " ") + "\n" }
        return out
    }
}
