import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
#if canImport(Glibc)
import Glibc
#endif

/// `parla say`: render text to a WAV file with an optional word timeline.
struct Say: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Speak text: render it to a WAV file, with word timings as JSON.",
        discussion: """
            The text comes from the arguments, from -f FILE, or from standard input ('-' or a pipe).
            Plain text is spoken literally ('<' and '&' are text); use --ssml for SSML markup.
            Text is split by language automatically (see 'parla detect'): every part is spoken by
            a voice of its language. -l LANG (or an xml:lang in SSML) makes the language explicit;
            --no-detect turns detection off; --prefer fr,de breaks ties the text cannot.
            Live playback through PulseAudio is not available yet: pass -o FILE.wav.

            The --timings file lists every segment (language, voice), sentence and word with its
            range in the input (Unicode-scalar offsets, end exclusive) and its start and end in
            milliseconds of the audio. See README.md for the schema.
            """
    )

    @Argument(help: "The text to speak ('-' reads standard input).")
    var text: [String] = []

    @Option(name: [.customShort("f"), .customLong("file")], help: ArgumentHelp("Read the text from a UTF-8 file ('-' for standard input).", valueName: "file"))
    var file: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("Write the audio to this WAV file (16-bit PCM, mono, the engine's rate).", valueName: "file.wav"))
    var output: String?

    @Option(name: .customLong("timings"), help: ArgumentHelp("Also write the word timeline to this JSON file ('-' prints it on standard output; needs -o).", valueName: "file.json"))
    var timings: String?

    @Option(name: [.customShort("v"), .customLong("voice")], help: ArgumentHelp("Voice identifier, e.g. espeak-ng.en-us or espeak-ng.fr+f2 (see 'parla voices').", valueName: "id"))
    var voice: String?

    @Option(name: [.customShort("l"), .customLong("language")], help: ArgumentHelp("Language of text without an explicit language (BCP 47, e.g. en, pt-BR).", valueName: "tag"))
    var language: String?

    @Option(name: [.customShort("r"), .customLong("rate")], help: ArgumentHelp("Speaking rate in words per minute, 80–450 (default: the voice's, 175).", valueName: "wpm"))
    var rate: Double?

    @Option(name: [.customShort("p"), .customLong("pitch")], help: ArgumentHelp("Pitch, 0–99 (default 50).", valueName: "n"))
    var pitch: Double?

    @Option(name: [.customShort("a"), .customLong("volume")], help: ArgumentHelp("Volume (amplitude), 0–200 (default 100).", valueName: "n"))
    var volume: Double?

    @Option(name: .customLong("punctuation"), help: ArgumentHelp("Punctuation to read aloud: none, some or all.", valueName: "mode"))
    var punctuation: PunctuationMode = .none

    @Flag(name: .customLong("ssml"), help: "The input is an SSML document (<speak>…</speak>).")
    var ssml = false

    @Flag(name: .customLong("no-detect"), help: "Do not detect languages: speak text without a language in -l, the voice's language, or the first preferred language.")
    var noDetect = false

    @Option(name: .customLong("prefer"), help: ArgumentHelp("Preferred languages for text the detector cannot decide, most preferred first (default: from $LANGUAGE/$LANG).", valueName: "fr,de"))
    var prefer: String?

    @OptionGroup var catalogOptions: CatalogOptions

    func validate() throws {
        if output == nil {
            throw ValidationError("Live playback through PulseAudio is not implemented yet: pass -o FILE.wav to render to a file.")
        }
        if timings != nil && output == nil { throw ValidationError("--timings needs -o FILE.wav.") }
        if file != nil && !text.isEmpty { throw ValidationError("Give the text as arguments or with -f, not both.") }
        if let pitch, !(0...99).contains(pitch) { throw ValidationError("Pitch \(pitch) is out of range: use 0–99.") }
        if let volume, !(0...200).contains(volume) { throw ValidationError("Volume \(volume) is out of range: use 0–200.") }
        if let rate, !SpeechPlan.rateRange.contains(rate) { throw ValidationError("Rate \(rate) is out of range: use 80–450 words per minute.") }
    }

    func run() async throws {
        let catalog = try catalogOptions.load()
        let input = try readInput()
        var utterance = ssml ? try Utterance(ssml: input) : Utterance(string: input)
        if let language { utterance.language = try LanguageTag(parsing: language) }
        if let voice { utterance.voice = try catalog.voice(identifier: voice) }
        utterance.rate = rate
        if let pitch { utterance.pitchMultiplier = pitch / 50 }
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
            detectsLanguages: detector != nil, detector: detector)
        _ = try synth.plan(utterance)  // report bad input before any file is created
        guard let output else { return }
        let request = utterance
        let timeline = try await Interrupt.cancellingOnSignal {
            try await synth.write(
                request, to: URL(fileURLWithPath: output),
                timingsURL: timings.flatMap { $0 == "-" ? nil : URL(fileURLWithPath: $0) })
        }
        if timings == "-" { print(timeline.json(), terminator: "") }
        let seconds = Double(timeline.sampleCount) / Double(timeline.sampleRate)
        let languages = timeline.segments.map(\.language.identifier)
        var seen = Set<String>()
        let unique = languages.filter { seen.insert($0).inserted }
        printError("Wrote \(output): \(String(format1: seconds)) s, \(timeline.words.count) words, languages: \(unique.joined(separator: ", "))"
            + (timings.map { "; timings in \($0)" } ?? ""))
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

extension String {
    /// `value` with one decimal.
    init(format1 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(abs(tenths % 10))"
    }
}

/// Writes a line to standard error.
func printError(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Turns Ctrl-C and SIGTERM into task cancellation, so work stops cleanly and leaves no partial files.
enum Interrupt {
    /// Runs `body`; on SIGINT or SIGTERM it is cancelled and the process exits with 130 (SIGINT) or 143.
    static func cancellingOnSignal<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task { try await body() }
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let sources = [(SIGINT, Int32(130)), (SIGTERM, Int32(143))].map { sig, code in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                task.cancel()
                Signalled.code.withLock { $0 = code }
            }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }
        do {
            return try await task.value
        } catch {
            if let code = Signalled.code.withLock({ $0 }) {
                printError("Interrupted; no output was written.")
                throw ExitCode(code)
            }
            throw error
        }
    }
}

import Synchronization
private enum Signalled {
    static let code = Mutex<Int32?>(nil)
}
