@_exported import ParlaCore
@_exported import ParlaPulseAudio
@_exported import ParlaIO
@_exported import ParlaBatch
import FoundationEssentials
import ParlaEngine
import ParlaPulseAudio
import Synchronization

/// Connections ``SpeechSynthesizer/warmUp(audioOutput:)`` began, each waiting for the first
/// synthesizer made with its options.
private let earlyConnections = Mutex<[AudioOutputOptions: PulseAudioOutput]>([:])

/// Speaks utterances aloud, or to files, buffers or streams, in the language of every span.
///
/// ```swift
/// let synth = SpeechSynthesizer()
/// synth.speak("Hello, Καλημέρα, مرحبا")          // plays through PulseAudio
/// let u = Utterance(string: "Bonjour", language: "fr")
/// try await synth.write(u, to: URL(fileURLWithPath: "bonjour.wav"))
/// ```
public final class SpeechSynthesizer: Sendable {
    private let explicitCatalog: VoiceCatalog?
    /// The language of text that has no language attribute and no utterance language.
    public let defaultLanguage: LanguageTag

    /// Whether text without a language attribute (and without an utterance language) is
    /// segmented by language automatically.
    public let detectsLanguages: Bool
    private let explicitDetector: LanguageDetector?
    private let loadedDetector = Mutex<LanguageDetector?>(nil)
    /// Where live speech plays (device, latency, stream role).
    public let audioOutput: AudioOutputOptions
    let liveSpeechStorage = Mutex<LiveSpeech?>(nil)
    /// The output live speech plays through, when the creator made it (and may already be
    /// connecting it); otherwise live speech makes one on first use.
    let givenOutput: PulseAudioOutput?
    /// The engine that speaks (``SynthesisEngine/shared`` unless a test gives it its own).
    let engine: SynthesisEngine

    /// Creates a synthesizer using `catalog` (default: the catalog found next to the program,
    /// through `PARLA_VOICES`, or in the source checkout).
    /// - Parameters:
    ///   - catalog: the voices to choose from.
    ///   - defaultLanguage: the language of text nothing else gives one.
    ///   - detectsLanguages: segment text without language attributes by language (on by
    ///     default); explicit language spans and ``/ParlaCore/Utterance/language`` always win.
    ///   - detector: the detector to use (default: the catalog's model, with the user's
    ///     languages from `LANGUAGE`/`LANG` as preferences).
    ///   - audioOutput: where ``speak(_:)-(Utterance)`` and ``announce(_:language:)-(AttributedString,_)`` play.
    public convenience init(
        catalog: VoiceCatalog? = nil, defaultLanguage: LanguageTag = "en", detectsLanguages: Bool = true,
        detector: LanguageDetector? = nil, audioOutput: AudioOutputOptions = AudioOutputOptions()
    ) {
        self.init(
            catalog: catalog, defaultLanguage: defaultLanguage, detectsLanguages: detectsLanguages, detector: detector,
            audioOutput: audioOutput, engine: .shared)
    }

    /// A synthesizer on `engine`: tests give it an engine of its own. It adopts a connection
    /// ``warmUp(audioOutput:)`` began with the same options, if one waits.
    package init(
        catalog: VoiceCatalog? = nil, defaultLanguage: LanguageTag = "en", detectsLanguages: Bool = true,
        detector: LanguageDetector? = nil, audioOutput: AudioOutputOptions = AudioOutputOptions(), engine: SynthesisEngine
    ) {
        self.engine = engine
        self.audioOutput = audioOutput
        self.givenOutput = earlyConnections.withLock { $0.removeValue(forKey: audioOutput) }
        self.explicitCatalog = catalog
        self.defaultLanguage = defaultLanguage
        self.detectsLanguages = detectsLanguages
        self.explicitDetector = detector
    }

    /// Starts, in the background, what the first synthesizer needs, and returns at once: the
    /// speech engine, and a connection to the sound server that the next synthesizer made with
    /// the same `audioOutput` adopts. Call it first thing when the time to the first sound
    /// matters and there is work to do before the synthesizer can be made (reading voices or
    /// text): `parla say` does. Pass nil to start only the engine, as before writing to files.
    ///
    /// A failure to connect is not reported here: it is the first utterance's, which fails
    /// with ``/ParlaCore/ParlaError/audioServerUnavailable(reason:)``. For an answer now, use
    /// ``prepareToSpeak()`` on the synthesizer instead.
    public static func warmUp(audioOutput: AudioOutputOptions? = AudioOutputOptions()) {
        // The engine's thread is made before the connection starts loading libpulse: a thread
        // made while the loader maps libpulse and its 28 libraries waits for it (glibc's TLS
        // lock), and perf sched traces showed the engine's first use waiting for it.
        let engine = SynthesisEngine.shared
        Task { await engine.prepare() }
        guard let audioOutput else { return }
        // One waits already: calling this again changes nothing.
        let output: PulseAudioOutput? = earlyConnections.withLock { waiting in
            guard waiting[audioOutput] == nil else { return nil }
            let made = PulseAudioOutput(options: audioOutput)
            waiting[audioOutput] = made
            return made
        }
        guard let output else { return }
        // On a thread of its own, which loads libpulse (1.5 ms on an idle core, 2.5–6 at
        // start-up: see CPulseAudioLazy): it starts at once, where a task of the cooperative
        // pool took 2–4 ms to run at start-up (perf probes), while the pool's threads were made.
        startThread(name: "parla.connect") {
            // A failure here is the first utterance's: it is reported when that one fails.
            try? output.connect()
        }
    }

    /// Releasing the synthesizer stops its live speech at once (as `AVSpeechSynthesizer` does):
    /// keep a reference for as long as it should speak.
    deinit {
        _ = liveSpeechStorage.withLock { $0 }?.stop(at: .immediate)
    }

    /// The language detector used for text without language attributes, nil when detection is
    /// off. Loaded on first use.
    /// - Throws: ``/ParlaCore/ParlaError/languageModelNotFound(searched:)`` or
    ///   ``/ParlaCore/ParlaError/languageModelInvalid(path:reason:)``.
    public func detector() throws(ParlaError) -> LanguageDetector? {
        guard detectsLanguages else { return nil }
        if let explicitDetector { return explicitDetector }
        if let d = loadedDetector.withLock({ $0 }) { return d }
        let d = try LanguageDetector.load(catalog: catalog())
        loadedDetector.withLock { $0 = d }
        return d
    }

    /// The catalog voices are chosen from.
    /// - Throws: ``/ParlaCore/ParlaError/voiceCatalogNotFound(searched:)`` if there is none.
    public func catalog() throws(ParlaError) -> VoiceCatalog {
        if let explicitCatalog { return explicitCatalog }
        return try VoiceCatalog.default()
    }

    /// Resolves `utterance` into runs (languages, voices, prosody) without synthesizing it.
    /// - Throws: ``/ParlaCore/ParlaError`` for empty text, bad settings or languages no voice speaks.
    package func plan(_ utterance: Utterance) throws(ParlaError) -> SpeechPlan {
        let detector = utterance.language == nil ? try detector() : nil
        return try SpeechPlan(utterance, catalog: catalog(), defaultLanguage: defaultLanguage, detector: detector)
    }

    /// Resolves `utterance` ahead of speaking or writing it: its languages and voices are
    /// chosen and its settings checked, so that bad input fails here, before anything plays or
    /// any file exists, and ``speak(_:)-(PreparedUtterance)`` or
    /// ``write(_:to:timingsURL:)-(PreparedUtterance,_,_)`` do not resolve it again.
    /// - Throws: ``/ParlaCore/ParlaError`` for empty text, bad settings or languages no voice speaks.
    public func prepare(_ utterance: Utterance) throws(ParlaError) -> PreparedUtterance {
        PreparedUtterance(utterance: utterance, plan: try plan(utterance))
    }

    /// The sample rate of the audio this synthesizer produces (22050 Hz with espeak-ng's voices).
    public func sampleRate() async throws(ParlaError) -> Int {
        try await engine.start()
    }

    /// Synthesizes `utterance`, calling `callback` with each audio block and each timed mark as it
    /// is produced (like `AVSpeechSynthesizer.write(_:toBufferCallback:toMarkerCallback:)`).
    /// The callback runs on the engine's thread: keep it short. Cancelling the task stops
    /// synthesis at the next audio block.
    /// - Returns: the complete timeline.
    /// - Throws: ``/ParlaCore/ParlaError``, including ``/ParlaCore/ParlaError/cancelled``.
    @discardableResult
    public func write(
        _ utterance: Utterance, toBufferCallback callback: @escaping @Sendable (SynthesisEvent) -> Void
    ) async throws(ParlaError) -> SpeechTimeline {
        try await write(utterance, forPlayback: false, toBufferCallback: callback)
    }

    /// ``write(_:toBufferCallback:)``, or with `forPlayback` for a caller that plays the audio
    /// as it comes (libparla's `parla_synthesize_for_playback`, the Spiel provider): a Piper
    /// voice's first sound comes sooner, as in live speech (a long first sentence spoken as two
    /// clauses, from a short first chunk), so its audio is not a file's bytes.
    @discardableResult
    package func write(
        _ utterance: Utterance, forPlayback: Bool, toBufferCallback callback: @escaping @Sendable (SynthesisEvent) -> Void
    ) async throws(ParlaError) -> SpeechTimeline {
        let plan = try plan(utterance)
        // Made once the engine has its sample rate: it loads and starts speaking meanwhile.
        let timeline = Mutex<SpeechTimeline?>(nil)
        let stop = StopFlag()
        _ = try await withCancellation(raising: stop) { () throws(ParlaError) in
            try await engine.synthesize(
                plan, stop: stop, skipsLeadingSilence: false, forPlayback: forPlayback,
                started: { rate in timeline.withLock { $0 = SpeechTimeline(sampleRate: rate) } }
            ) { event in
                timeline.withLock { $0?.record(event) }
                callback(event)
            }
        }
        guard let made = timeline.withLock({ $0 }) else { throw ParlaError.engineFailure("espeak-ng never said its sample rate") }
        return made
    }

    /// Synthesizes `utterance` as an asynchronous stream of audio blocks and timed marks.
    /// Ending the iteration early stops synthesis.
    public func stream(_ utterance: Utterance) -> AsyncThrowingStream<SynthesisEvent, any Error> {
        stream(utterance, forPlayback: false)
    }

    /// ``stream(_:)``, made for playback as it comes with `forPlayback` (see
    /// ``write(_:forPlayback:toBufferCallback:)``).
    package func stream(_ utterance: Utterance, forPlayback: Bool) -> AsyncThrowingStream<SynthesisEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: SynthesisEvent.self)
        let task = Task {
            do {
                try await self.write(utterance, forPlayback: forPlayback) { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Renders `utterance` to a 16-bit mono WAV file at `url`, and its timeline as JSON to
    /// `timingsURL` if given. Both files are written under temporary names and renamed into place
    /// only when complete: on any error neither destination is created or changed.
    /// - Returns: the timeline.
    /// - Throws: ``/ParlaCore/ParlaError`` (unwritable path, empty text, unknown language, cancelled, …).
    @discardableResult
    public func write(_ utterance: Utterance, to url: URL, timingsURL: URL? = nil) async throws(ParlaError) -> SpeechTimeline {
        try await write(prepare(utterance), to: url, timingsURL: timingsURL)  // bad input fails before any file exists
    }

    /// Renders an utterance prepared with ``prepare(_:)`` like ``write(_:to:timingsURL:)-(Utterance,_,_)``,
    /// without resolving it again.
    @discardableResult
    public func write(_ prepared: PreparedUtterance, to url: URL, timingsURL: URL? = nil) async throws(ParlaError) -> SpeechTimeline {
        let plan = prepared.plan
        let utterance = prepared.utterance
        let wavFile = try AtomicFile(path: url.path)
        let timingsFile: AtomicFile?
        do {
            timingsFile = try timingsURL.map { url throws(ParlaError) in try AtomicFile(path: url.path) }
        } catch {
            wavFile.discard()
            throw error
        }
        // The WAV header needs the sample rate: it is written once the engine has loaded, which
        // it does while it starts on the first words.
        let sink = FileSink(file: wavFile)
        let stop = StopFlag()
        do throws(ParlaError) {
            _ = try await withCancellation(raising: stop) { () throws(ParlaError) in
                try await engine.synthesize(
                    plan, stop: stop, started: { rate throws(ParlaError) in try sink.start(sampleRate: rate) },
                    emit: { event in sink.take(event, stop: stop) })
            }
            let timeline = try sink.finish()
            if let timingsFile {
                if let broken = timeline.invariantViolation(input: utterance.inputText) { throw ParlaError.invalidTimeline(broken) }
                try timingsFile.write(Array(timeline.json().utf8))
                try timingsFile.commit()
            }
            return timeline
        } catch {
            sink.discard()
            timingsFile?.discard()
            if let error = sink.error { throw error }
            throw error
        }
    }
}

/// Collects a rendering on the engine thread: audio to the WAV file, marks to the timeline.
/// Both start when the engine has its sample rate (``start(sampleRate:)``). It owns the file;
/// the engine thread writes and the caller finishes, each holding the lock.
private final class FileSink: Sendable {
    private struct State {
        let file: AtomicFile
        var wav: WAVFileWriter?
        var timeline: SpeechTimeline?
        var error: ParlaError?
    }
    private let state: Mutex<State>

    init(file: sending AtomicFile) {
        state = Mutex(State(file: file))
    }

    /// Why writing failed, if it did.
    var error: ParlaError? { state.withLock { $0.error } }

    func start(sampleRate: Int) throws(ParlaError) {
        try state.withLock { (state: inout State) throws(ParlaError) in
            state.wav = try WAVFileWriter(file: state.file, sampleRate: sampleRate)
            state.timeline = SpeechTimeline(sampleRate: sampleRate)
        }
    }

    func take(_ event: SynthesisEvent, stop: StopFlag) {
        state.withLock { state in
            guard state.error == nil, let wav = state.wav else { return }
            if case .audio(let b) = event {
                do throws(ParlaError) { try wav.append(b.samples) } catch {
                    state.error = error
                    stop.raise()
                }
            }
            state.timeline?.record(event)
        }
    }

    /// Finishes the WAV file and returns the timeline.
    /// - Throws: the error writing met, or ``ParlaError/engineFailure(_:engine:)`` if the engine never
    ///   started.
    func finish() throws(ParlaError) -> SpeechTimeline {
        try state.withLock { (state: inout State) throws(ParlaError) -> SpeechTimeline in
            if let error = state.error { throw error }
            guard let wav = state.wav, let timeline = state.timeline else {
                throw ParlaError.engineFailure("espeak-ng never said its sample rate")
            }
            try wav.finish()
            return timeline
        }
    }

    /// Removes what was written.
    func discard() { state.withLock { $0.file.discard() } }
}
