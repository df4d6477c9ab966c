import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaEngine
import ParlaPulseAudio
import Synchronization

/// Live speech: the scheduler, the PulseAudio streams and the clock that delivers events when
/// the listener hears them.
///
/// One lock (``state``) guards the scheduler, every playback and the subscribers; it may be
/// taken before the PulseAudio lock, never after it. Three kinds of thread meet here: callers
/// (speak, stop, pause), the engine thread (audio and marks as they are synthesized), and the
/// playback clock (a dedicated thread that polls each stream's played position and delivers
/// what the listener has reached).
final class LiveSpeech: Sendable {
    static let ids = Atomic<Int>(0)

    let output: any AudioSink
    let engine: any SpeechEngine
    let planner: @Sendable (Utterance) throws(ParlaError) -> SpeechPlan
    /// The clock events are stamped with.
    let now: @Sendable () -> SpeechInstant
    /// Whether a thread of its own delivers events (false: the owner calls ``tick()``).
    let runsItsOwnClock: Bool
    let state = Mutex(State())
    let wake = DispatchSemaphore(value: 0)
    let clockQueue = DispatchQueue(label: "parla.playback-clock")
    let clockStarted = Atomic<Bool>(false)

    struct Request {
        var utterance: Utterance
        /// Its plan, when the caller has made it already (nil: planned when it starts).
        var plan: SpeechPlan?
        var announcement: String?
        var waiter: CheckedContinuation<SpeechEvent, Never>?
        /// Whether its audio has been heard (it was suspended after `started`).
        var hasStarted = false
        /// Where it carries on after a suspension (nil: from the start).
        var resume: Resume?
    }

    typealias Resume = PlaybackStateMachine.Resume

    struct State {
        var scheduler = SpeechScheduler()
        var requests: [UtteranceID: Request] = [:]
        var playing: [Playback] = []
        var paused = false
        var subscribers: [Int: AsyncStream<SpeechEvent>.Continuation] = [:]
        /// Told of every event as it is delivered, under the lock (tests).
        var observers: [@Sendable (SpeechEvent) -> Void] = []
        var nextSubscriber = 0
        /// Live rate, pitch and volume, applied to what is speaking and to what comes next.
        var prosody = LiveProsody()
        /// The latest changes of rate or pitch that took effect (for benchmarks and tests).
        var changes: [LiveProsodyChange] = []

        /// Where the playback `key` is in ``playing``; nil once it has ended or was suspended.
        func index(_ key: Int) -> Int? { playing.firstIndex { $0.key == key } }

        /// Where the playback `key` is, if synthesis pass `number` is still its current pass.
        func index(_ key: Int, pass number: Int) -> Int? {
            guard let i = index(key), playing[i].pass?.number == number else { return nil }
            return i
        }
    }

    /// Where events come from in time: a playback clock thread of its own, or the caller, who
    /// calls ``tick()`` when it decides time has passed (tests, with a manual clock).
    enum Clock {
        case thread
        case manual(now: @Sendable () -> SpeechInstant)
    }

    init(
        output: any AudioSink, engine: any SpeechEngine, clock: Clock = .thread,
        planner: @escaping @Sendable (Utterance) throws(ParlaError) -> SpeechPlan
    ) {
        self.output = output
        self.engine = engine
        self.planner = planner
        switch clock {
        case .thread:
            now = { .now }
            runsItsOwnClock = true
        case .manual(let now):
            self.now = now
            runsItsOwnClock = false
        }
    }

    // MARK: Requests

    func submit(
        _ utterance: Utterance, plan: SpeechPlan? = nil, kind: SpeechRequestKind, announcement: String?,
        waiter: CheckedContinuation<SpeechEvent, Never>? = nil
    ) -> UtteranceID {
        let id = UtteranceID(Self.ids.add(1, ordering: .relaxed).newValue)
        startClock()
        let resumes =
            utterance.resumesAfterInterruption
            || utterance.text.runs.contains { $0[SpeechAttributes.ResumesAfterInterruptionAttribute.self] == true }
        state.withLock { s in
            s.requests[id] = Request(utterance: utterance, plan: plan, announcement: announcement, waiter: waiter)
            perform(s.scheduler.submit(.init(id: id, kind: kind, resumesAfterInterruption: resumes)), in: &s)
        }
        wake.signal()
        return id
    }

    func stop(at boundary: SpeechBoundary) -> Bool {
        let actions = state.withLock { s in
            let actions = s.scheduler.stop(at: boundary)
            perform(actions, in: &s)
            if boundary == .immediate { s.paused = false }
            return actions
        }
        wake.signal()
        return !actions.isEmpty
    }

    /// Gives up request `id`: cut off at once if it is speaking (it ends `cancelled`,
    /// interrupted), withdrawn if it waits (`cancelled`, dropped); nothing if it has ended.
    func cancel(_ id: UtteranceID) {
        state.withLock { s in
            if let pb = s.playing.first(where: { $0.id == id }) {
                end(pb.key, .cancelled(.interrupted), in: &s)
            } else {
                perform(s.scheduler.withdraw(id), in: &s)
            }
        }
        wake.signal()
    }

    /// Submits like ``submit(_:kind:announcement:waiter:)`` and waits for the terminal event;
    /// if the calling task is cancelled, the request is given up (``cancel(_:)``) and its
    /// terminal event returned.
    func submitAndWait(_ utterance: Utterance, kind: SpeechRequestKind, announcement: String?) async -> SpeechEvent {
        // The id once submitted, and whether cancellation came first.
        let ticket = Mutex<(id: UtteranceID?, cancelled: Bool)>((nil, false))
        return await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let id = submit(utterance, kind: kind, announcement: announcement, waiter: c)
                let cancelled = ticket.withLock { t in
                    t.id = id
                    return t.cancelled
                }
                if cancelled { cancel(id) }
            }
        } onCancel: {
            let id = ticket.withLock { t in
                t.cancelled = true
                return t.id
            }
            if let id { cancel(id) }
        }
    }

    func pause(at boundary: SpeechBoundary) -> Bool {
        let done = state.withLock { s -> Bool in
            // What pauses is what the scheduler has speaking now.
            guard !s.paused, let id = s.scheduler.current?.id, let i = s.playing.firstIndex(where: { $0.id == id }) else { return false }
            s.paused = true
            let actions = s.playing[i].machine.pause(at: boundary, played: s.playing[i].stream?.playedSamples())
            carryOut(actions, for: s.playing[i].key, in: &s)
            return true
        }
        wake.signal()
        return done
    }

    func resume() -> Bool {
        let done = state.withLock { s -> Bool in
            guard s.paused else { return false }
            s.paused = false
            for key in s.playing.map(\.key) {
                guard let i = s.index(key) else { continue }
                carryOut(s.playing[i].machine.carryOn(), for: key, in: &s)
            }
            return true
        }
        wake.signal()
        return done
    }

    var prosody: LiveProsody { state.withLock { $0.prosody } }

    /// The latest changes of rate or pitch, oldest first.
    var recentChanges: [LiveProsodyChange] { state.withLock { $0.changes } }

    /// Sets the live prosody. Volume applies at once to what each stream has not yet sent; a new rate
    /// or pitch applies from the first word whose audio the server has not been given yet:
    /// the audio after it is dropped and synthesis starts again there.
    func setProsody(_ change: (inout LiveProsody) -> Void) {
        state.withLock { s in
            let old = s.prosody
            change(&s.prosody)
            if s.prosody.volume != old.volume {
                for pb in s.playing { pb.stream?.setVolume(s.prosody.volume) }
            }
            guard s.prosody.rate != old.rate || s.prosody.pitch != old.pitch else { return }
            for key in s.playing.map(\.key) {
                // Not planned yet: its first pass will be made with the new settings.
                guard let i = s.index(key), s.playing[i].plan != nil else { continue }
                let stream = s.playing[i].stream
                let step = s.playing[i].machine.changeRequested(
                    at: now().nanoseconds, heard: stream.map { $0.playedSamples() ?? 0 },
                    passSentenceStart: s.playing[i].pass?.sentences.sentenceStart,
                    drop: { stream?.discard(from: $0, margin: $1) ?? false })
                carryOut(step, for: key, pass: nil, in: &s)
            }
        }
        wake.signal()
    }

    var isSpeaking: Bool { state.withLock { $0.scheduler.isBusy } }
    /// How many utterances wait in the queue behind the one speaking.
    var waitingCount: Int { state.withLock { $0.scheduler.waiting.count } }
    var isPaused: Bool { state.withLock { $0.paused } }

    /// Calls `body` with every event from now on, as it is delivered (on the thread that
    /// delivers it, under the state lock: it must not call back into live speech).
    func observe(_ body: @escaping @Sendable (SpeechEvent) -> Void) {
        state.withLock { $0.observers.append(body) }
    }

    func events() -> AsyncStream<SpeechEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SpeechEvent.self)
        let key = state.withLock { s in
            s.nextSubscriber += 1
            s.subscribers[s.nextSubscriber] = continuation
            return s.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    // MARK: Scheduler actions (state lock held)

    func perform(_ actions: [SpeechScheduler.Action], in s: inout State) {
        for action in actions {
            switch action {
            case .start(let id):
                guard let request = s.requests[id] else { continue }
                let resume = request.hasStarted ? request.resume ?? Resume(input: 0, text: 0, word: 0..<0) : nil
                let pb = Playback(
                    id: id,
                    machine: PlaybackStateMachine(
                        input: request.utterance.inputText, marks: request.utterance.markPositions, resumedFrom: resume,
                        drainGrace: output.targetLatency + .milliseconds(100), maxBufferedAhead: output.maxBufferedAhead))
                s.playing.append(pb)
                s.paused = false
                // Planned already, it starts on the engine's thread: nothing is left but to
                // speak it, and the cooperative pool may be slow to give it a thread.
                let key = pb.key
                Task(executorPreference: request.plan == nil ? nil : engine.preferredTaskExecutor) {
                    await self.run(key, id: id, request.utterance, plan: request.plan, from: resume?.text)
                }
            case .interrupt(let id, let boundary):
                guard let i = s.playing.firstIndex(where: { $0.id == id }) else { continue }
                let played = s.playing[i].stream?.playedSamples()
                carryOut(s.playing[i].machine.stop(at: boundary, played: played), for: s.playing[i].key, in: &s)
            case .drop(let id):
                // A suspended request that is dropped had been heard: it was cut off.
                terminate(id, .cancelled(s.requests[id]?.hasStarted == true ? .interrupted : .dropped), in: &s)
            case .suspend(let id):
                guard let pb = s.playing.first(where: { $0.id == id }) else { continue }
                if var request = s.requests[id] {
                    if pb.machine.started {
                        request.hasStarted = true
                        request.resume = pb.machine.resumePoint(at: request.utterance.resumePoint, source: request.utterance.source)
                    }
                    s.requests[id] = request
                }
                // Silenced like an ending, but not ended: no terminal event, the scheduler keeps it.
                silence(pb.key, in: &s)
            }
        }
    }

    /// Ends playback `key`: silences it at once, delivers its terminal event, starts what is
    /// next. Nothing if it has ended already.
    func end(_ key: Int, _ kind: SpeechEvent.Kind, in s: inout State) {
        guard let i = s.index(key) else { return }
        let id = s.playing[i].id
        let report = s.playing[i].stream?.report
        silence(key, in: &s)
        terminate(id, kind, playback: report, in: &s)
        perform(s.scheduler.ended(id), in: &s)
    }

    /// Stops a playback's synthesis and audio at once and forgets it (ending or suspending it).
    func silence(_ key: Int, in s: inout State) {
        guard let i = s.index(key) else { return }
        let pb = s.playing.remove(at: i)
        pb.pass?.stop.raise()
        pb.stream?.close()
    }

    /// Delivers the terminal event of `id` (once) and wakes whoever awaits it.
    func terminate(_ id: UtteranceID, _ kind: SpeechEvent.Kind, playback: PlaybackReport? = nil, in s: inout State) {
        guard let request = s.requests.removeValue(forKey: id) else { return }
        var success = false
        if case .finished = kind { success = true }
        let event = SpeechEvent(
            utterance: id, kind: kind, time: now(),
            announcement: request.announcement.map { AnnouncementResult(string: $0, wasSuccessful: success) }, playback: playback)
        for c in s.subscribers.values { c.yield(event) }
        for observe in s.observers { observe(event) }
        request.waiter?.resume(returning: event)
    }

    func emit(_ kind: SpeechEvent.Kind, for id: UtteranceID, in s: inout State) {
        guard s.requests[id] != nil else { return }
        let event = SpeechEvent(utterance: id, kind: kind, time: now())
        for c in s.subscribers.values { c.yield(event) }
        for observe in s.observers { observe(event) }
    }

    /// Carries out what playback `key`'s state machine decided.
    func carryOut(_ actions: [PlaybackStateMachine.Action], for key: Int, in s: inout State) {
        guard let i = s.index(key) else { return }
        let id = s.playing[i].id
        let stream = s.playing[i].stream
        for action in actions {
            switch action {
            case .emit(let kind): emit(kind, for: id, in: &s)
            case .cork(let corked): stream?.setCorked(corked)
            case .end(let kind): end(key, kind, in: &s)
            }
        }
    }

    // MARK: The playback clock

    func startClock() {
        guard runsItsOwnClock, clockStarted.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        clockQueue.async { [weak self] in
            while let me = self {
                let wait = me.tick()
                _ = me.wake.wait(timeout: .now() + .nanoseconds(wait))
            }
        }
    }

    /// Delivers everything the listener has reached; returns how long to sleep (nanoseconds).
    /// The clock thread calls it; with a manual clock, the owner does.
    @discardableResult
    func tick() -> Int {
        state.withLock { s -> Int in
            var sleep = 1_000_000_000  // idle: wake on demand
            for key in s.playing.map(\.key) {
                guard let i = s.index(key) else { continue }
                // A parked synthesis carries on once the listener has heard half of what was ahead.
                if let stream = s.playing[i].stream, let restart = s.playing[i].machine.resumeParked(samplesAhead: stream.samplesAhead()) {
                    restartSynthesis(key, restart, in: &s)
                }
                if let next = advance(key, in: &s) { sleep = min(sleep, next) }
            }
            return max(sleep, 500_000)
        }
    }

    /// One playback's step; returns nanoseconds until its next due event, nil if ended.
    func advance(_ key: Int, in s: inout State) -> Int? {
        guard let i = s.index(key) else { return nil }
        let stream = s.playing[i].stream
        let state: PlaybackStateMachine.StreamState
        switch stream?.currentStatus {
        case nil: state = .opening
        case .failed(let error): state = .failed(error)
        case .drained: state = .drained
        case .active, .closed: state = .playing
        }
        let step = s.playing[i].machine.advance(played: stream?.playedSamples(), stream: state, now: now())
        carryOut(step.actions, for: key, in: &s)
        guard let wait = step.wakeAfter else { return nil }
        return Int(wait.wholeNanoseconds)
    }
}
