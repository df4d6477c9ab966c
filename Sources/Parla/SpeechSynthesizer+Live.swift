import FoundationEssentials
import ParlaCore
import ParlaEngine
import ParlaPulseAudio
import Synchronization

/// Live speech through PulseAudio, with the scheduling of `AVSpeechSynthesizer` and
/// accessibility announcements.
///
/// ```swift
/// let synth = SpeechSynthesizer()
/// for await event in synth.events() { … }      // word ranges as the listener hears them
/// synth.speak(Utterance(string: "Hello"))         // queues (first in, first out)
/// await synth.announce("Battery low")             // interrupts, then reports wasSuccessful
/// ```
extension SpeechSynthesizer {
    var live: LiveSpeech {
        liveSpeechStorage.withLock { stored in
            if let stored { return stored }
            let output = givenOutput ?? PulseAudioOutput(options: audioOutput)
            let made = LiveSpeech(output: output, engine: engine) { [weak self] u throws(ParlaError) in
                guard let self else { throw .cancelled }
                return try self.plan(u)
            }
            stored = made
            return made
        }
    }

    /// Makes live speech play through `output`, spoken by `engine`, timed by `now` and moved on
    /// only by ``tickLiveSpeech()`` (no clock thread), with every event also passed to
    /// `observer` as it is delivered: ParlaTesting's rig. Call it before any live call; live
    /// speech that has started already keeps its drivers.
    package func useLiveDrivers(
        output: any AudioSink, engine: any SpeechEngine, now: @escaping @Sendable () -> SpeechInstant,
        observer: @escaping @Sendable (SpeechEvent) -> Void
    ) {
        liveSpeechStorage.withLock { stored in
            guard stored == nil else { return }
            let made = LiveSpeech(output: output, engine: engine, clock: .manual(now: now)) { [weak self] u throws(ParlaError) in
                guard let self else { throw .cancelled }
                return try self.plan(u)
            }
            made.observe(observer)
            stored = made
        }
    }

    /// Delivers every live event the listener has reached, with drivers from
    /// ``useLiveDrivers(output:engine:now:observer:)``.
    package func tickLiveSpeech() { live.tick() }

    /// Appends `utterance` to the queue; it plays when everything before it has finished.
    /// Never throws: an utterance that cannot be spoken ends with a `failed` event.
    /// - Returns: the identifier its events carry.
    @discardableResult
    public func speak(_ utterance: Utterance) -> UtteranceID {
        live.submit(utterance, kind: .speech, announcement: nil)
    }

    /// Queues an utterance prepared with ``prepare(_:)`` like ``speak(_:)-(Utterance)``, without
    /// resolving it again.
    @discardableResult
    public func speak(_ prepared: PreparedUtterance) -> UtteranceID {
        live.submit(prepared.utterance, plan: prepared.plan, kind: .speech, announcement: nil)
    }

    /// Appends plain `text` to the queue (see ``speak(_:)-(Utterance)``).
    @discardableResult
    public func speak(_ text: String) -> UtteranceID {
        speak(Utterance(string: text))
    }

    /// Queues `utterance` like ``speak(_:)-(Utterance)`` and waits for its terminal event
    /// (`finished`, `cancelled` or `failed`). Cancelling the calling task gives the utterance
    /// up: cut off at once if it is speaking, withdrawn if it waits.
    public func speakAndWait(_ utterance: Utterance) async -> SpeechEvent {
        await live.submitAndWait(utterance, kind: .speech, announcement: nil)
    }

    /// Speaks an announcement and waits until it ends. By default it interrupts current speech;
    /// the queue-announcement attribute (``/ParlaCore/SpeechAttributes/QueueAnnouncementAttribute``) makes
    /// it wait its turn, and the priority attribute sets high (not interrupted once started),
    /// default or low (waits for everything else). The scheduler (`SpeechScheduler`) holds the rules.
    /// Cancelling the calling task gives the announcement up, as for ``speakAndWait(_:)``.
    /// - Returns: the string and whether it was spoken to the end. Observers get the same
    ///   result on the announcement's terminal event (``/ParlaCore/SpeechEvent/announcement``).
    @discardableResult
    public func announce(_ text: AttributedString, language: LanguageTag? = nil) async -> AnnouncementResult {
        var queued = false
        var priority = AnnouncementPriority.default
        for run in text.runs {
            if let q = run[SpeechAttributes.QueueAnnouncementAttribute.self] { queued = q }
            if let p = run[SpeechAttributes.AnnouncementPriorityAttribute.self] { priority = p }
        }
        let string = String(text.characters[...])
        let event = await live.submitAndWait(
            Utterance(text, language: language), kind: .announcement(priority: priority, queued: queued), announcement: string)
        return event.announcement ?? AnnouncementResult(string: string, wasSuccessful: false)
    }

    /// Schedules `utterance` as an announcement and returns at once (the form for callers that
    /// follow events rather than await: the C library, the Python package). `queued` makes it
    /// wait its turn instead of interrupting; `priority` is as in
    /// ``announce(_:language:)-(AttributedString,_)``. Its terminal event carries the
    /// ``/ParlaCore/AnnouncementResult`` (``/ParlaCore/SpeechEvent/announcement``).
    /// - Returns: the identifier its events carry.
    @discardableResult
    public func beginAnnouncement(_ utterance: Utterance, priority: AnnouncementPriority = .default, queued: Bool = false) -> UtteranceID {
        live.submit(utterance, kind: .announcement(priority: priority, queued: queued), announcement: utterance.string)
    }

    /// Announces plain `text` (see ``announce(_:language:)-(AttributedString,_)``).
    @discardableResult
    public func announce(_ text: String, language: LanguageTag? = nil) async -> AnnouncementResult {
        await announce(AttributedString(text), language: language)
    }

    /// Stops all speech: what is speaking is cut off at `boundary` (it ends `cancelled`,
    /// interrupted) and everything queued is dropped (each ends `cancelled`, dropped).
    /// - Returns: false if nothing was speaking or queued (like ``pause(at:)``).
    @discardableResult
    public func stop(at boundary: SpeechBoundary = .immediate) -> Bool {
        live.stop(at: boundary)
    }

    /// Pauses what is speaking at `boundary`; queued speech waits.
    /// - Returns: false if nothing was speaking or speech was already paused.
    @discardableResult
    public func pause(at boundary: SpeechBoundary = .immediate) -> Bool {
        live.pause(at: boundary)
    }

    /// Resumes paused speech where it stopped.
    /// - Returns: false if speech was not paused.
    @discardableResult
    public func `continue`() -> Bool {
        live.resume()
    }

    /// Live rate, pitch and volume: what ``setRate(_:)``, ``setPitch(_:)`` and
    /// ``setVolume(_:)`` set last.
    public var liveProsody: LiveProsody { live.prosody }

    /// Changes the speaking rate now, as a multiple of each utterance's own rate (1: as
    /// planned), for the speech now playing and everything after it.
    ///
    /// Speech already synthesized plays on up to the first word whose audio the server does not
    /// hold yet (typically 0.1 to 0.4 s of audio: the server's buffer, a margin of 60 ms, and the
    /// rest of the word being heard); from that word on it is spoken again at the new rate.
    /// Word events keep their offsets: no word is repeated or skipped. The result stays inside
    /// the engine's 80 to 1,000 words per minute.
    /// - Throws: ``/ParlaCore/ParlaError/parameterOutOfRange(name:value:range:)`` outside
    ///   ``LiveProsody/rateRange``.
    public func setRate(_ multiplier: Double) throws(ParlaError) {
        try LiveProsody.check("Live rate (multiplier)", multiplier, LiveProsody.rateRange)
        live.setProsody { $0.rate = multiplier }
    }

    /// Changes the pitch now, as a multiple of each utterance's own pitch, from the same word
    /// on as ``setRate(_:)``.
    /// - Throws: ``/ParlaCore/ParlaError/parameterOutOfRange(name:value:range:)`` outside
    ///   ``LiveProsody/pitchRange``.
    public func setPitch(_ multiplier: Double) throws(ParlaError) {
        try LiveProsody.check("Live pitch (multiplier)", multiplier, LiveProsody.pitchRange)
        live.setProsody { $0.pitch = multiplier }
    }

    /// Changes the volume of live speech at once, as a multiple of each utterance's volume (0
    /// to 2, like ``setRate(_:)`` and ``setPitch(_:)``): every sample not yet at the sound
    /// server is scaled (above 1, a soft limiter bends the loudest peaks so that nothing
    /// clips), so the change is heard once the server's short buffer
    /// has played (`AudioOutputOptions.targetLatency`, 30 ms by default). The
    /// server's own stream volume is left alone: the server would remember it for every later
    /// stream of the same role, a screen reader's included.
    /// - Throws: ``/ParlaCore/ParlaError/parameterOutOfRange(name:value:range:)`` outside
    ///   ``LiveProsody/volumeRange``.
    public func setVolume(_ volume: Double) throws(ParlaError) {
        try LiveProsody.check("Live volume", volume, LiveProsody.volumeRange)
        live.setProsody { $0.volume = volume }
    }

    /// The latest changes of rate or pitch as they took effect (for benchmarks and tests).
    package var recentProsodyChanges: [LiveProsodyChange] { live.recentChanges }

    /// How many utterances wait in the queue behind the one speaking (for tests that must know
    /// one has been queued).
    package var waitingCount: Int { live.waitingCount }

    /// Whether anything is speaking or queued.
    public var isSpeaking: Bool { live.isSpeaking }

    /// Whether speech is paused.
    public var isPaused: Bool { live.isPaused }

    /// A new stream of every live-speech event from now on (one per subscriber). Word events
    /// arrive when the word's audio reaches the listener; each utterance ends with exactly one
    /// terminal event.
    public func events() -> AsyncStream<SpeechEvent> {
        live.events()
    }

    /// Connects to the sound server, starts the engine and loads the voice of
    /// ``defaultLanguage`` ahead of time (a Piper voice's model included), so the first
    /// ``speak(_:)-(Utterance)`` starts sooner.
    /// - Throws: ``/ParlaCore/ParlaError/audioServerUnavailable(reason:)`` if there is no sound server.
    public func prepareToSpeak() async throws(ParlaError) {
        let voice = try? catalog().voice(for: defaultLanguage)
        try await prepareToSpeak(voices: voice.map { [$0] } ?? [])
    }

    /// Connects to the sound server, starts the engine and loads `voices` (a Piper voice takes
    /// about half a second to load; an espeak-ng voice nothing), so that speaking with them
    /// starts at once. ``prepareToSpeak()`` loads the voice of ``defaultLanguage``.
    /// - Throws: ``/ParlaCore/ParlaError`` if the server, the engine or a voice cannot be reached or loaded.
    public func prepareToSpeak(voices: [SpeechVoice]) async throws(ParlaError) {
        let output = live.output
        // Both at once: the connection waits on the server, the engine on its own process.
        // (`async let` would forget the error's type: the connection's comes back as a Result.)
        async let connected = capturingResult { () async throws(ParlaError) in
            try await onThreadOfItsOwn("parla.connect") { () throws(ParlaError) in try output.connect() }
        }
        let started = await capturingResult { () async throws(ParlaError) in
            _ = try await engine.start()
            try await engine.preload(voices)
        }
        try await connected.get()
        try started.get()
    }
}

/// How live speech sounds now, on top of what each utterance asks for (see
/// ``SpeechSynthesizer/setRate(_:)``).
public struct LiveProsody: Sendable, Hashable {
    /// Rate, as a multiple of each utterance's rate.
    public var rate: Double = 1
    /// Pitch, as a multiple of each utterance's pitch.
    public var pitch: Double = 1
    /// Volume, as a multiple of each utterance's volume (applied to the samples Parla sends;
    /// above 1 a soft limiter keeps the peaks below full scale).
    public var volume: Double = 1

    /// Accepted live rates.
    public static let rateRange: ClosedRange<Double> = 0.25...6
    /// Accepted live pitches.
    public static let pitchRange: ClosedRange<Double> = 0...2
    /// Accepted live volumes.
    public static let volumeRange: ClosedRange<Double> = 0...2

    /// Creates the prosody of speech as planned.
    public init() {}

    static func check(_ name: String, _ value: Double, _ range: ClosedRange<Double>) throws(ParlaError) {
        guard range.contains(value) else { throw .parameterOutOfRange(name: name, value: value, range: range) }
    }
}
