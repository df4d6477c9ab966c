internal import CESpeakNG
import ParlaCore
import Synchronization

/// A flag that stops synthesis at the engine's next audio block (within tens of milliseconds),
/// without waiting for the engine's thread.
public final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    /// Creates a lowered flag.
    public init() {}
    /// Asks the synthesis that watches this flag to stop.
    public func raise() { raised.store(true, ordering: .releasing) }
    /// Whether stop has been requested.
    public var isRaised: Bool { raised.load(ordering: .acquiring) }
}

/// The espeak-ng engine. espeak-ng is one global state per process, so there is exactly one
/// engine, and every call to the C library runs on the engine's own thread.
public actor ESpeakEngine {
    /// The process's engine.
    public static let shared = ESpeakEngine()

    private static let executor = ThreadExecutor(name: "parla.espeak-ng")
    /// Runs the actor on the engine's dedicated thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { Self.executor.asUnownedSerialExecutor() }

    private let core = ESpeakCore()

    private init() {}

    /// Initialises espeak-ng once and returns its output sample rate (22050 Hz for the stock voices).
    /// - Throws: ``ParlaError/engineFailure(_:)`` if espeak-ng or its data cannot be loaded.
    public func start() throws(ParlaError) -> Int { try core.start() }

    /// Names of the voices the installed espeak-ng offers (its `--voices` list), as the engine
    /// selects them: the voice file's name, e.g. `en-US`, `fr`, `cmn`.
    public func installedVoices() throws(ParlaError) -> [String] { try core.installedVoices() }

    /// Speaks `plan`, passing audio and timed marks to `emit` on the engine thread as they are
    /// produced. Returns the number of samples produced.
    /// - Throws: ``ParlaError/cancelled`` if `stop` was raised, ``ParlaError/engineFailure(_:)``
    ///   if espeak-ng rejects a voice or the text.
    public func synthesize(
        _ plan: SpeechPlan, stop: StopFlag, emit: @escaping @Sendable (SynthesisEvent) -> Void
    ) throws(ParlaError) -> Int {
        try core.synthesize(plan, stop: stop, emit: emit)
    }
}

/// espeak-ng driven directly from the calling thread, for a process that synthesizes on one
/// thread only and never touches ``ESpeakEngine/shared``: Parla's render workers, which fork
/// a copy of themselves per chunk of items so every chunk starts from the same engine state (espeak-ng
/// keeps hidden state, such as its pitch flutter phase, from one synthesis to the next).
public final class ESpeakDirectEngine {
    private let core = ESpeakCore()

    /// Creates the engine; call ``start()`` before forking so children share the loaded data.
    public init() {}

    /// Initialises espeak-ng and reads its list of voices, and returns its sample rate.
    ///
    /// Forked children inherit what is loaded here. The list of voices is read once so that
    /// selecting a voice in a child does not scan espeak-ng's voice files again; no voice is
    /// selected here, because selecting voices leaves state behind (a child of a process that
    /// had selected other voices before speaks some texts differently).
    /// - Throws: ``ParlaError/engineFailure(_:)``.
    public func start() throws(ParlaError) -> Int {
        let rate = try core.start()
        _ = try core.installedVoices()
        return rate
    }

    /// Speaks `plan` on the calling thread, passing audio and marks to `emit`; returns the
    /// number of samples produced. Without `marksWords`, only audio and segments are emitted
    /// (``TimelineBuilder/marksWords``).
    /// - Throws: ``ParlaError/cancelled`` if `stop` was raised, ``ParlaError/engineFailure(_:)``.
    public func synthesize(_ plan: SpeechPlan, stop: StopFlag, marksWords: Bool = true, emit: @escaping (SynthesisEvent) -> Void) throws(ParlaError) -> Int {
        try core.synthesize(plan, stop: stop, marksWords: marksWords, emit: emit)
    }
}

/// The calls into espeak-ng, confined by its owner to one thread at a time.
private final class ESpeakCore {
    private var sampleRate: Int?
    private var currentVoice: String?

    func start() throws(ParlaError) -> Int {
        if let sampleRate { return sampleRate }
        let options: Int32 = 0x8000  // espeakINITIALIZE_DONT_EXIT: report errors instead of exiting
        let rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 100, nil, options)
        guard rate > 0 else {
            throw .engineFailure("espeak-ng could not be initialised (is the espeak-ng-data package installed? Run scripts/setup)")
        }
        espeak_SetSynthCallback(synthCallback)
        // "some" punctuation: the symbols that carry meaning, as speech-dispatcher reads them.
        var list: [wchar_t] = "@#$%^&_[]{}\\~".unicodeScalars.map { wchar_t(bitPattern: $0.value) } + [0]
        espeak_SetPunctuationList(&list)
        sampleRate = Int(rate)
        return Int(rate)
    }

    func installedVoices() throws(ParlaError) -> [String] {
        _ = try start()
        guard let list = espeak_ListVoices(nil) else { return [] }
        var names: [String] = []
        var i = 0
        while let v = list[i] {
            if let id = v.pointee.identifier {
                names.append(String(String(cString: id).split(separator: "/").last ?? ""))
            }
            i += 1
        }
        return names
    }

    func synthesize(_ plan: SpeechPlan, stop: StopFlag, marksWords: Bool = true, emit: @escaping (SynthesisEvent) -> Void) throws(ParlaError) -> Int {
        let rate = try start()
        let context = SynthContext(builder: TimelineBuilder(plan: plan, sampleRate: rate, emit: emit), stop: stop)
        context.builder.marksWords = marksWords
        context.builder.silence(plan.leadingSilence)
        for (index, run) in plan.runs.enumerated() {
            if stop.isRaised { throw .cancelled }
            context.builder.silence(run.silenceBefore)
            try setVoice(run.voice.engineVoiceName)
            espeak_SetParameter(espeakRATE, Int32(run.rate), 0)
            espeak_SetParameter(espeakPITCH, Int32(run.pitch), 0)
            espeak_SetParameter(espeakVOLUME, Int32(run.volume), 0)
            let punct: espeak_PUNCT_TYPE = switch run.punctuation {
            case .none: espeakPUNCT_NONE
            case .some: espeakPUNCT_SOME
            case .all: espeakPUNCT_ALL
            }
            espeak_SetParameter(espeakPUNCTUATION, Int32(punct.rawValue), 0)

            let input = context.builder.beginRun(index)
            var flags = UInt32(espeakCHARS_UTF8)
            if input.isMarkup { flags |= UInt32(espeakSSML) }
            if index == plan.runs.count - 1 || context.builder.runEndsSentence(index) { flags |= UInt32(espeakENDPAUSE) }
            let status = withExtendedLifetime(context) {
                input.text.withCString { cText in
                    espeak_Synth(
                        cText, input.text.utf8.count + 1, 0, POS_CHARACTER, 0, flags, nil,
                        Unmanaged.passUnretained(context).toOpaque())
                }
            }
            if stop.isRaised { throw .cancelled }
            guard status == EE_OK else {
                throw .engineFailure("espeak_Synth returned error \(status.rawValue) for run \(index)")
            }
            context.builder.endRun()
        }
        context.builder.silence(plan.trailingSilence)
        context.builder.finish()
        return context.builder.sampleCount
    }

    private func setVoice(_ name: String) throws(ParlaError) {
        guard name != currentVoice else { return }
        let status = espeak_SetVoiceByName(name)
        guard status == EE_OK else {
            currentVoice = nil
            throw .engineFailure("espeak-ng has no voice '\(name)' (the voice catalog may be out of date: run 'python3 scripts/generate-voices.py')")
        }
        currentVoice = name
    }
}

/// What the C callback needs while one `espeak_Synth` call runs; touched only on the engine thread.
private final class SynthContext {
    var builder: TimelineBuilder
    let stop: StopFlag

    init(builder: TimelineBuilder, stop: StopFlag) {
        self.builder = builder
        self.stop = stop
    }
}

/// espeak-ng's synthesis callback: audio first, then the events that belong to it.
/// Returns 1 to make espeak-ng abort when stop was requested.
private func synthCallback(
    _ wav: UnsafeMutablePointer<Int16>?, _ count: Int32, _ events: UnsafeMutablePointer<espeak_EVENT>?
) -> Int32 {
    guard let events else { return 0 }
    var e = events
    while e.pointee.type != espeakEVENT_LIST_TERMINATED { e += 1 }
    guard let userData = e.pointee.user_data ?? events.pointee.user_data else { return 0 }
    let context = Unmanaged<SynthContext>.fromOpaque(userData).takeUnretainedValue()
    if context.stop.isRaised { return 1 }
    if let wav, count > 0 {
        context.builder.audio(Array(UnsafeBufferPointer(start: wav, count: Int(count))))
    }
    var ev = events
    while ev.pointee.type != espeakEVENT_LIST_TERMINATED {
        switch ev.pointee.type {
        case espeakEVENT_WORD:
            context.builder.word(position: Int(ev.pointee.text_position), length: Int(ev.pointee.length), runSample: Int(ev.pointee.sample))
        case espeakEVENT_SENTENCE:
            context.builder.sentence(position: Int(ev.pointee.text_position), runSample: Int(ev.pointee.sample))
        default:
            break
        }
        ev += 1
    }
    return 0
}
