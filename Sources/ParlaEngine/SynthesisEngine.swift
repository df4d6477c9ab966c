internal import CParlaEngineDriver
internal import CParlaEngineHost
import ParlaCore
import ParlaIO
import Synchronization

/// The speech engine of live speech and of ``SpeechSynthesizer``'s renderings: espeak-ng's
/// voices and Piper's neural voices, both run by one C driver (CParlaEngineDriver).
///
/// The driver runs in an engine host: a process of its own (`parla-engine`, or this program
/// started again), because espeak-ng 1.51 can crash on some texts (it overflows fixed buffers and reads
/// uninitialised memory; see docs/DESIGN.md). A crash there fails the one utterance being
/// spoken, with an error that says so, and the next utterance starts a new host: the program
/// that uses Parla never dies of it. Every call runs on the engine's own thread.
public actor SynthesisEngine {
    /// The engine synthesizers share.
    public static let shared = SynthesisEngine(shared: true)
    /// Whether the shared engine has been started (read without creating it).
    private static let sharedStarted = Atomic<Bool>(false)

    private let executor: ThreadExecutor
    private let isShared: Bool
    /// Runs the actor on the engine's dedicated thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The engine's thread, for a task that has nothing to do but speak: it reaches the engine
    /// without waiting for a thread of the cooperative pool (0.3–3.8 ms at start-up).
    package nonisolated var taskExecutor: any TaskExecutor { executor }

    private let host = EngineHost()

    /// An engine with a thread and a host of its own (the thread lives as long as the
    /// process): for tests that must not disturb the shared engine.
    package init() {
        self.init(shared: false)
    }

    private init(shared: Bool) {
        executor = ThreadExecutor(name: "parla.engine")
        isShared = shared
    }

    /// Ends the shared engine's host if it was ever started, and waits for it to exit (see
    /// ``shutDown()``); does nothing otherwise.
    public static func shutDownShared() async {
        guard sharedStarted.load(ordering: .acquiring) else { return }
        await shared.shutDown()
    }

    /// Starts the engine host (once) and returns its output sample rate (22050 Hz for the
    /// stock voices).
    /// - Throws: ``ParlaError/engineFailure(_:engine:)`` if espeak-ng or its data cannot be loaded.
    public func start() throws(ParlaError) -> Int {
        if isShared { Self.sharedStarted.store(true, ordering: .releasing) }
        return try host.start()
    }

    /// Starts loading the engine in the background (in its own process) and returns at once,
    /// so that it is ready sooner when the first utterance needs it. Errors surface later,
    /// from ``start()`` or ``synthesize(_:stop:emit:)``.
    public func prepare() {
        if isShared { Self.sharedStarted.store(true, ordering: .releasing) }
        try? host.launch()
    }

    /// Loads these voices' models now, where loading takes time (Piper's: about half a second
    /// for a medium voice), so that their first utterance starts at once; other voices need
    /// nothing. The engine keeps them loaded.
    /// - Throws: ``ParlaError/engineFailure(_:engine:)`` if one cannot be loaded, saying why.
    public func preload(_ voices: [SpeechVoice]) throws(ParlaError) {
        if isShared { Self.sharedStarted.store(true, ordering: .releasing) }
        _ = try host.start()
        try host.prepare(voices: voices.map(\.engineVoiceName))
    }

    /// Names of the voices the installed espeak-ng offers (its `--voices` list), as the engine
    /// selects them: the voice file's name, e.g. `en-US`, `fr`, `cmn`.
    public func installedVoices() throws(ParlaError) -> [String] {
        if isShared { Self.sharedStarted.store(true, ordering: .releasing) }
        return try host.installedVoices()
    }

    /// The engine host's process id, nil while none runs (for tests that kill it).
    package func hostProcessID() -> Int32? { host.processID }

    /// Ends the engine host and waits for it to exit (a program that exits without this
    /// leaves the host to notice its input closing, a moment later); the next use starts a
    /// new one.
    public func shutDown() { host.stop() }

    /// Speaks `plan`, passing audio and timed marks to `emit` on the engine thread as they are
    /// produced. Returns the number of samples produced. `started` is told the sample rate on
    /// that thread once the engine has loaded, before the first event: the engine loads (on
    /// first use) and starts on the first words meanwhile. An error it throws ends synthesis.
    /// With `skipsLeadingSilence` (live speech), the engine's silence before the first sound
    /// is not passed on (``TimelineBuilder/skipsLeadingSilence``). Live speech, and with
    /// `forPlayback` a caller that plays the audio as it comes, have a Piper voice's first
    /// sentence made as it is heard soonest (`PARLA_RUN_EARLY_FIRST_CLAUSE`).
    /// - Throws: ``ParlaError/cancelled`` if `stop` was raised, ``ParlaError/engineFailure(_:engine:)``
    ///   if espeak-ng cannot be loaded, rejects a voice or the text, or crashes on it; what
    ///   `started` throws.
    package func synthesize(
        _ plan: SpeechPlan, stop: StopFlag, skipsLeadingSilence: Bool = false,
        started: @Sendable (Int) throws(ParlaError) -> Void = { _ in }, emit: @escaping @Sendable (SynthesisEvent) -> Void
    ) throws(ParlaError) -> Int {
        try synthesize(
            plan, stop: stop, skipsLeadingSilence: skipsLeadingSilence, forPlayback: skipsLeadingSilence, started: started, emit: emit)
    }

    /// ``synthesize(_:stop:skipsLeadingSilence:started:emit:)``, made for playback as it comes
    /// or not whatever `skipsLeadingSilence` says.
    package func synthesize(
        _ plan: SpeechPlan, stop: StopFlag, skipsLeadingSilence: Bool, forPlayback: Bool,
        started: @Sendable (Int) throws(ParlaError) -> Void, emit: @escaping @Sendable (SynthesisEvent) -> Void
    ) throws(ParlaError) -> Int {
        if isShared { Self.sharedStarted.store(true, ordering: .releasing) }
        return try synthesizePlan(
            plan, engine: host, stop: stop, marksWords: true, skipsLeadingSilence: skipsLeadingSilence, forPlayback: forPlayback,
            started: started, emit: emit)
    }
}

/// The engine driver (espeak-ng and Piper) run directly from the calling thread, for a process that synthesizes on one
/// thread only and never touches ``SynthesisEngine/shared``: Parla's render workers, which fork
/// a copy of themselves per chunk of items so every chunk starts from the same engine state (espeak-ng
/// keeps hidden state, such as its pitch flutter phase, from one synthesis to the next). A
/// crash of espeak-ng there ends only the chunk's process, and the worker reports the item.
package final class InProcessEngine {
    private let core = DriverCore()

    /// Creates the engine; call ``start()`` before forking so children share the loaded data.
    package init() {}

    /// Initialises espeak-ng and reads its list of voices, and returns its sample rate.
    ///
    /// Forked children inherit what is loaded here. The list of voices is read once so that
    /// selecting a voice in a child does not scan espeak-ng's voice files again; no voice is
    /// selected here, because selecting voices leaves state behind (a child of a process that
    /// had selected other voices before speaks some texts differently).
    /// - Throws: ``ParlaError/engineFailure(_:engine:)``.
    package func start() throws(ParlaError) -> Int {
        let rate = try core.start()
        _ = try core.installedVoices()
        return rate
    }

    /// Loads the Piper voices among `voices` (engine voice names) into this process, once: a
    /// worker calls it before it forks, so its children speak with them at once.
    /// - Throws: ``ParlaError/engineFailure(_:engine:)`` if one cannot be loaded.
    package func prepare(voices: [String]) throws(ParlaError) {
        try core.prepare(voices: voices)
    }

    /// Speaks `plan` on the calling thread, passing audio and marks to `emit`; returns the
    /// number of samples produced. Without `marksWords`, only audio and segments are emitted
    /// (``TimelineBuilder/marksWords``).
    /// - Throws: ``ParlaError/cancelled`` if `stop` was raised, ``ParlaError/engineFailure(_:engine:)``.
    package func synthesize(_ plan: SpeechPlan, stop: StopFlag, marksWords: Bool = true, emit: @escaping (SynthesisEvent) -> Void)
        throws(ParlaError) -> Int
    {
        try synthesizePlan(plan, engine: core, stop: stop, marksWords: marksWords, emit: emit)
    }
}

/// How an engine voice name names a Piper voice: this prefix, then the model's path.
let piperVoicePrefix = "piper:"

/// One run for the engine: the voice, prosody and text of a ``SpeechPlan/Run``.
struct RunRequest {
    var voice: String
    var rate: Int32
    var pitch: Int32
    var volume: Int32
    var punctuation: Int32
    var flags: UInt32
    var text: String
}

/// An engine that speaks runs: the driver in this process (``DriverCore``) or in an engine
/// host (``EngineHost``).
protocol RunEngine: AnyObject {
    /// Loads the engine; returns its sample rate.
    func start() throws(ParlaError) -> Int
    /// The runs that follow, until ``endUtterance()``, are one utterance. `first`, its first
    /// run, may be started on before it is asked for (an engine host speaks it while this side
    /// waits for it to load); the first ``speak(_:shouldStop:audio:event:)`` must then be for
    /// that run.
    func beginUtterance(first: RunRequest?) throws(ParlaError)
    /// The utterance is over.
    func endUtterance()
    /// Loads the Piper voices among `voices` (engine voice names) ahead of the utterance that
    /// uses them, where that makes them warm for it.
    func prepare(voices: [String]) throws(ParlaError)
    /// Speaks one run, passing audio and raw events on as they come; `shouldStop` is asked
    /// at every audio block.
    /// - Throws: ``ParlaError/cancelled`` once stopped, ``ParlaError/engineFailure(_:engine:)``.
    func speak(
        _ run: RunRequest, shouldStop: () -> Bool,
        audio: ([Int16]) -> Void, event: (RawEngineEvent) -> Void
    ) throws(ParlaError)
}

/// Speaks `plan` run by run with `engine`, turning what it reports into timed events.
/// `started` is told the engine's sample rate once it has loaded, before the first event.
/// `forPlayback`: the audio is heard as it comes, so a Piper voice's first run is made to be
/// heard soonest.
func synthesizePlan(
    _ plan: SpeechPlan, engine: some RunEngine, stop: StopFlag, marksWords: Bool, skipsLeadingSilence: Bool = false,
    forPlayback: Bool = false, started: (Int) throws(ParlaError) -> Void = { _ in }, emit: @escaping (SynthesisEvent) -> Void
) throws(ParlaError) -> Int {
    func request(_ index: Int, _ input: EngineInput, endsSentence: Bool) -> RunRequest {
        let run = plan.runs[index]
        let punctuation =
            switch run.punctuation {
            case .none: PARLA_PUNCTUATION_NONE
            case .some: PARLA_PUNCTUATION_SOME
            case .all: PARLA_PUNCTUATION_ALL
            }
        var flags: UInt32 = 0
        if input.isMarkup { flags |= UInt32(PARLA_RUN_SSML) }
        if index == plan.runs.count - 1 || endsSentence { flags |= UInt32(PARLA_RUN_END_PAUSE) }
        // Live speech's first run, in a Piper voice: its first clause is heard sooner alone.
        if forPlayback, index == 0, run.voice.engine == SpeechVoice.piperEngine { flags |= UInt32(PARLA_RUN_EARLY_FIRST_CLAUSE) }
        return RunRequest(
            voice: run.voice.engineVoiceName, rate: Int32(clamping: run.rate), pitch: Int32(clamping: run.pitch),
            volume: Int32(clamping: run.volume), punctuation: Int32(punctuation), flags: flags, text: input.text)
    }
    // The first run goes with the utterance's start, before waiting for the engine to load:
    // it is spoken as soon as the engine is ready.
    let first = plan.runs.isEmpty ? nil : TimelineBuilder.engineInput(of: plan, run: 0)
    var voices: [String] = []
    for run in plan.runs {
        PiperProsody.check(voice: run.voice, rate: run.rate, pitch: run.pitch)
        guard !voices.contains(run.voice.engineVoiceName) else { continue }
        voices.append(run.voice.engineVoiceName)
        PiperPhonemizerWarning.check(run.voice)
    }
    try engine.prepare(voices: voices)
    try engine.beginUtterance(first: first.map { request(0, $0.input, endsSentence: $0.endsSentence) })
    defer { engine.endUtterance() }
    let rate = try engine.start()
    try started(rate)
    var builder = TimelineBuilder(plan: plan, sampleRate: rate, emit: emit)
    builder.marksWords = marksWords
    builder.skipsLeadingSilence = skipsLeadingSilence
    // Live speech also ends at the last sound, and takes a Piper voice's faint noise for silence.
    builder.skipsTrailingSilence = skipsLeadingSilence
    if skipsLeadingSilence { builder.silenceThreshold = 32 }
    builder.silence(plan.leadingSilence)
    for (index, run) in plan.runs.enumerated() {
        if stop.isRaised { throw .cancelled }
        builder.silence(run.silenceBefore)
        let input: EngineInput
        if index == 0, let first {
            input = first.input
            builder.beginRun(0, input: input)
        } else {
            input = builder.beginRun(index)
        }
        try engine.speak(
            request(index, input, endsSentence: builder.runEndsSentence(index)), shouldStop: { stop.isRaised },
            audio: { samples in
                builder.engineAudio(samples)
            },
            event: { e in
                switch e.kind {
                case .word: builder.word(position: Int(e.position), length: Int(e.length), runSample: Int(e.sample), estimated: e.estimated)
                case .sentence: builder.sentence(position: Int(e.position), runSample: Int(e.sample), estimated: e.estimated)
                case .phonemes: builder.phonemes(position: Int(e.position), ipa: e.phonemes)
                }
            })
        if stop.isRaised { throw .cancelled }
        builder.endRun()
    }
    builder.endEngineAudio()
    builder.silence(plan.trailingSilence)
    builder.finish()
    return builder.sampleCount
}

/// The engine driver (`engine_driver.c`, the one that also speaks in the engine host) in this
/// process, confined by its owner to one thread at a time.
final class DriverCore: RunEngine {
    private var sampleRate: Int?

    // In this process, an utterance is only the runs in a row.
    func beginUtterance(first: RunRequest?) {}
    func endUtterance() {}

    func start() throws(ParlaError) -> Int {
        if let sampleRate { return sampleRate }
        var error = [CChar](repeating: 0, count: 1024)
        let rate = parla_engine_init(&error, error.count)
        guard rate > 0 else { throw .engineUnavailable("espeak-ng", reason: Self.text(error, or: "espeak-ng could not be initialised")) }
        sampleRate = Int(rate)
        return Int(rate)
    }

    func prepare(voices: [String]) throws(ParlaError) {
        for voice in voices where voice.hasPrefix(piperVoicePrefix) {
            _ = try start()
            var error = [CChar](repeating: 0, count: 2048)
            let status = parla_engine_preload(voice, &error, error.count)
            guard status == 1 else {
                throw .runFailed(status, voice: voice, reason: Self.text(error, or: "the Piper voice could not be loaded"))
            }
        }
    }

    func installedVoices() throws(ParlaError) -> [String] {
        _ = try start()
        final class Names { var list: [String] = [] }
        let names = Names()
        parla_engine_voice_names(
            { context, name in
                guard let context, let name else { return }
                Unmanaged<Names>.fromOpaque(context).takeUnretainedValue().list.append(String(cString: name))
            }, Unmanaged.passUnretained(names).toOpaque())
        return withExtendedLifetime(names) { names.list }
    }

    func speak(
        _ run: RunRequest, shouldStop: () -> Bool,
        audio: ([Int16]) -> Void, event: (RawEngineEvent) -> Void
    ) throws(ParlaError) {
        _ = try start()
        var error = [CChar](repeating: 0, count: 2048)
        let status = withoutActuallyEscaping(shouldStop) { shouldStop in
            withoutActuallyEscaping(audio) { audio in
                withoutActuallyEscaping(event) { event in
                    let context = SynthContext(shouldStop: shouldStop, audio: audio, event: event)
                    return withExtendedLifetime(context) {
                        var output = parla_run_output(
                            context: Unmanaged.passUnretained(context).toOpaque(),
                            should_stop: { c in
                                guard let c else { return 1 }
                                return Unmanaged<SynthContext>.fromOpaque(c).takeUnretainedValue().shouldStop() ? 1 : 0
                            },
                            audio: { c, samples, count in
                                guard let c, let samples, count > 0 else { return }
                                Unmanaged<SynthContext>.fromOpaque(c).takeUnretainedValue().audio(
                                    Array(UnsafeBufferPointer(start: samples, count: Int(count))))
                            },
                            event: { c, kind, position, length, sample in
                                guard let c, let e = RawEngineEvent(kind: kind, position: position, length: length, sample: sample) else {
                                    return
                                }
                                Unmanaged<SynthContext>.fromOpaque(c).takeUnretainedValue().event(e)
                            },
                            phonemes: { c, position, ipa, length in
                                guard let c, let ipa, length > 0 else { return }
                                let bytes = UnsafeRawBufferPointer(start: ipa, count: Int(length))
                                Unmanaged<SynthContext>.fromOpaque(c).takeUnretainedValue().event(
                                    RawEngineEvent(position: position, phonemes: bytes))
                            })
                        return run.voice.withCString { voice in
                            run.text.withCString { text in
                                var request = parla_run(
                                    voice: voice, text: text, text_length: run.text.utf8.count, rate: run.rate, pitch: run.pitch,
                                    volume: run.volume, punctuation: run.punctuation, flags: run.flags)
                                return parla_engine_speak(&request, &output, &error, error.count)
                            }
                        }
                    }
                }
            }
        }
        if shouldStop() || Int(status) == PARLA_RUN_STOPPED { throw .cancelled }
        switch Int(status) {
        case PARLA_RUN_OK: return
        case PARLA_RUN_UNKNOWN_VOICE: throw .unknownEngineVoice(run.voice)
        default: throw .runFailed(status, voice: run.voice, reason: Self.text(error, or: "espeak-ng could not speak this text"))
        }
    }

    /// A C string the driver wrote, or `fallback` if it is empty.
    private static func text(_ buffer: [CChar], or fallback: String) -> String {
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.isEmpty ? fallback : text
    }
}

extension ParlaError {
    /// espeak-ng has no voice of this name.
    static func unknownEngineVoice(_ name: String) -> ParlaError {
        ParlaError(
            .unknownVoice,
            "espeak-ng has no voice '\(name)' (the voice catalog may be out of date: run 'python3 scripts/generate-voices.py').",
            subject: name)
    }

    /// The engine that speaks an engine voice name: `piper` or `espeak-ng`.
    static func engine(of voice: String) -> String { voice.hasPrefix(piperVoicePrefix) ? "piper" : "espeak-ng" }

    /// The error of a run (or a voice's load) that ended with PARLA_RUN_ failure `status`.
    static func runFailed(_ status: Int32, voice: String, reason: String) -> ParlaError {
        switch status {
        case Int32(PARLA_RUN_UNAVAILABLE):
            return .engineUnavailable(voice.hasPrefix(piperVoicePrefix) ? "onnxruntime" : "espeak-ng", reason: reason)
        case Int32(PARLA_RUN_VOICE_UNUSABLE):
            let piper = voice.hasPrefix(piperVoicePrefix)
            let name = piper ? SpeechVoice.piperIdentifier(modelPath: String(voice.dropFirst(piperVoicePrefix.count))) : voice
            return .voiceUnavailable(name, reason: reason)
        default:
            return .engineFailure(reason, engine: engine(of: voice))
        }
    }
}

/// What the C callback needs while one `espeak_Synth` call runs; touched only on its thread.
private final class SynthContext {
    let shouldStop: () -> Bool
    let audio: ([Int16]) -> Void
    let event: (RawEngineEvent) -> Void

    init(shouldStop: @escaping () -> Bool, audio: @escaping ([Int16]) -> Void, event: @escaping (RawEngineEvent) -> Void) {
        self.shouldStop = shouldStop
        self.audio = audio
        self.event = event
    }
}
