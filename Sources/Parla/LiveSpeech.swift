import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaESpeak
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
    private static let ids = Atomic<Int>(0)

    let output: any AudioSink
    private let engine: any SpeechEngine
    private let planner: @Sendable (Utterance) throws(ParlaError) -> SpeechPlan
    /// The clock events are stamped with.
    private let now: @Sendable () -> SpeechInstant
    /// Whether a thread of its own delivers events (false: the owner calls ``tick()``).
    private let runsItsOwnClock: Bool
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let clockQueue = DispatchQueue(label: "parla.playback-clock")
    private let clockStarted = Atomic<Bool>(false)

    private struct Request {
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

    private struct State {
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
    }

    /// How much audio must stay ahead of what the server holds when synthesis restarts at a
    /// new rate, so the server does not run dry while the engine starts again.
    private static let restartMarginSeconds = 0.06

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
                end(pb, .cancelled(.interrupted), in: &s)
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
            guard !s.paused, let pb = s.playing.last, !pb.ended else { return false }
            s.paused = true
            carryOut(pb.machine.pause(at: boundary, played: pb.stream?.playedSamples()), for: pb, in: &s)
            return true
        }
        wake.signal()
        return done
    }

    func resume() -> Bool {
        let done = state.withLock { s -> Bool in
            guard s.paused else { return false }
            s.paused = false
            for pb in s.playing where !pb.ended {
                carryOut(pb.machine.carryOn(), for: pb, in: &s)
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
            for pb in s.playing where !pb.ended && pb.plan != nil {
                guard let stream = pb.stream else {
                    // Its first pass, made with the old settings, has no stream yet: it is cut
                    // at its first word, whose audio is not written before the stream is there.
                    pb.changeRequest = (monotonicNanoseconds(), 0)
                    continue
                }
                pb.changeRequest = (monotonicNanoseconds(), stream.playedSamples() ?? 0)
                // The earliest known word not yet handed to the server; else the next one made.
                let unheard = pb.machine.words[pb.machine.nextWord...]
                if !unheard.contains(where: { cut(pb, at: $0, in: &s) }) && pb.machine.synthesisDone {
                    pb.changeRequest = nil  // the rest is already at the server: nothing to change
                }
            }
        }
        wake.signal()
    }

    var isSpeaking: Bool { state.withLock { $0.scheduler.isBusy } }
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

    private func perform(_ actions: [SpeechScheduler.Action], in s: inout State) {
        for action in actions {
            switch action {
            case .start(let id):
                guard let request = s.requests[id] else { continue }
                let resume = request.hasStarted ? request.resume ?? Resume(input: 0, text: 0, word: 0..<0) : nil
                let pb = Playback(
                    id: id,
                    machine: PlaybackStateMachine(
                        input: request.utterance.inputText, marks: request.utterance.markPositions, resumedFrom: resume,
                        drainGrace: output.targetLatency + .milliseconds(100)))
                s.playing.append(pb)
                s.paused = false
                // Planned already, it starts on the engine's thread: nothing is left but to
                // speak it, and the cooperative pool may be slow to give it a thread.
                Task(executorPreference: request.plan == nil ? nil : engine.preferredTaskExecutor) {
                    await self.run(pb, request.utterance, plan: request.plan, from: resume?.text)
                }
            case .interrupt(let id, let boundary):
                guard let pb = s.playing.first(where: { $0.id == id }) else { continue }
                let played = pb.stream?.playedSamples()
                carryOut(pb.machine.stop(at: boundary, played: played), for: pb, in: &s)
            case .drop(let id):
                // A suspended request that is dropped had been heard: it was cut off.
                terminate(id, .cancelled(s.requests[id]?.hasStarted == true ? .interrupted : .dropped), in: &s)
            case .suspend(let id):
                guard let pb = s.playing.first(where: { $0.id == id }), !pb.ended else { continue }
                if var request = s.requests[id] {
                    if pb.machine.started {
                        request.hasStarted = true
                        request.resume = resumePoint(of: pb, at: request.utterance.resumePoint, source: request.utterance.source)
                    }
                    s.requests[id] = request
                }
                // Silenced like an ending, but not ended: no terminal event, the scheduler keeps it.
                silence(pb, in: &s)
            }
        }
    }

    /// Where a suspended playback carries on: the start of the sentence, or of the word, the
    /// listener was hearing (the previous resume point if no word of it was heard yet).
    private func resumePoint(of pb: Playback, at point: Utterance.ResumePoint, source: SourceMap?) -> Resume? {
        let m = pb.machine
        guard m.nextWord > 0 else { return m.resumedFrom }
        let heard = m.words[m.nextWord - 1]
        var start = heard
        if point == .sentence {
            let lo = heard.range.lowerBound
            let sentenceStart: Int
            if let sentence = m.sentences.last(where: { $0.range.lowerBound <= lo }), lo < sentence.range.upperBound {
                sentenceStart = sentence.range.lowerBound
            } else {
                // Its sentence mark is not synthesized yet: it began where the last known sentence ended.
                sentenceStart = m.sentences.last(where: { $0.range.upperBound <= lo })?.range.upperBound ?? m.resumedFrom?.input ?? 0
            }
            start = m.words.first { $0.range.lowerBound >= sentenceStart } ?? heard
        }
        let input = start.range.lowerBound
        return Resume(input: input, text: source.map { $0.textOffset(atMarkup: input) } ?? input, word: start.range)
    }

    /// Ends a playback: silences it at once, delivers its terminal event, starts what is next.
    private func end(_ pb: Playback, _ kind: SpeechEvent.Kind, in s: inout State) {
        guard !pb.ended else { return }
        silence(pb, in: &s)
        terminate(pb.id, kind, in: &s)
        perform(s.scheduler.ended(pb.id), in: &s)
    }

    /// Stops a playback's synthesis and audio at once and forgets it (ending or suspending it).
    private func silence(_ pb: Playback, in s: inout State) {
        pb.ended = true
        pb.pass?.stop.raise()
        pb.stream?.close()
        s.playing.removeAll { $0 === pb }
    }

    /// Delivers the terminal event of `id` (once) and wakes whoever awaits it.
    private func terminate(_ id: UtteranceID, _ kind: SpeechEvent.Kind, in s: inout State) {
        guard let request = s.requests.removeValue(forKey: id) else { return }
        var success = false
        if case .finished = kind { success = true }
        let event = SpeechEvent(
            utterance: id, kind: kind, time: now(),
            announcement: request.announcement.map { AnnouncementResult(string: $0, wasSuccessful: success) })
        for c in s.subscribers.values { c.yield(event) }
        for observe in s.observers { observe(event) }
        request.waiter?.resume(returning: event)
    }

    private func emit(_ kind: SpeechEvent.Kind, for id: UtteranceID, in s: inout State) {
        guard s.requests[id] != nil else { return }
        let event = SpeechEvent(utterance: id, kind: kind, time: now())
        for c in s.subscribers.values { c.yield(event) }
        for observe in s.observers { observe(event) }
    }

    /// Carries out what a playback's state machine decided.
    private func carryOut(_ actions: [PlaybackStateMachine.Action], for pb: Playback, in s: inout State) {
        for action in actions {
            switch action {
            case .emit(let kind): emit(kind, for: pb.id, in: &s)
            case .cork(let corked): pb.stream?.setCorked(corked)
            case .end(let kind): end(pb, kind, in: &s)
            }
        }
    }

    // MARK: Synthesis (one task per started utterance)

    private func run(_ pb: Playback, _ utterance: Utterance, plan planned: SpeechPlan?, from resumeOffset: Int?) async {
        do throws(ParlaError) {
            var plan: SpeechPlan
            if let planned {
                plan = planned
            } else {
                plan = try planner(utterance)
                let made = plan
                state.withLock { s in s.requests[pb.id]?.plan = made }  // planned once, even if it resumes
            }
            if let resumeOffset, resumeOffset > 0 { plan = plan.resuming(from: resumeOffset) }
            // The stream opens at the rate the engine will most likely have while the engine
            // loads and speaks the first words: the server's round trips are off the path of the
            // first sound, and so is the engine's.
            let opening = OpeningStream(output, likelySampleRate: engine.likelySampleRate, name: String(plan.text.prefix(60)))
            let made = plan
            let first = state.withLock { s -> SynthesisPass? in
                guard !pb.ended else { return nil }
                pb.plan = made
                return makePass(pb, base: 0, input: pb.machine.resumedFrom?.input ?? 0, sentenceStart: nil, in: &s)
            }
            guard let first else {
                opening.discard()
                return
            }
            await synthesize(pb, first, opening: opening)
        } catch {
            let failure = error
            state.withLock { s in
                if failure != .cancelled { end(pb, .failed(failure), in: &s) }
            }
            wake.signal()
        }
    }

    /// A new synthesis pass of `pb` from stream sample `base`, speaking its plan from input
    /// offset `input` with the live rate and pitch; it replaces the pass before it. State lock held.
    private func makePass(_ pb: Playback, base: Int, input: Int, sentenceStart: (input: Int, sample: Int)?, in s: inout State)
        -> SynthesisPass?
    {
        guard var plan = pb.plan else { return nil }
        if base > 0 { plan = plan.resuming(from: plan.source.map { $0.textOffset(atMarkup: input) } ?? input) }
        let pass = SynthesisPass(
            plan: plan.scaled(rate: s.prosody.rate, pitch: s.prosody.pitch), base: base, input: input, sentenceStart: sentenceStart)
        pb.pass?.stop.raise()
        pb.pass = pass
        pb.parked = nil
        pb.parkRequested = false
        return pass
    }

    /// Restarts synthesis of `pb` at word `w` (stream samples) for a change of rate or pitch,
    /// if the server has not been given its audio yet: the audio from it on is dropped, and a
    /// new pass speaks the rest. State lock held.
    /// - Returns: false if it is too late to start there.
    private func cut(_ pb: Playback, at w: WordMark, in s: inout State) -> Bool {
        guard let restart = dropAudio(of: pb, from: w) else { return false }
        if let (time, heard) = pb.changeRequest {
            s.changes.append(
                LiveProsodyChange(
                    utterance: pb.id, requestedAt: time, heardSample: heard, sample: w.startSample, word: w.range,
                    sampleRate: pb.machine.sampleRate
                ))
            if s.changes.count > 100 { s.changes.removeFirst() }
        }
        pb.changeRequest = nil
        return restartSynthesis(pb, restart, in: &s)
    }

    /// Drops the audio and marks of `pb` from word `w` on, if the server has not been given
    /// that audio yet, and says where synthesis must start again to make it. State lock held.
    private func dropAudio(of pb: Playback, from w: WordMark) -> Restart? {
        let margin = Int(Double(pb.machine.sampleRate) * Self.restartMarginSeconds)
        guard let stream = pb.stream, stream.discard(from: w.startSample, margin: margin) else { return nil }
        // A cut inside a sentence: the new pass's first sentence is that whole sentence.
        let cutInput = w.range.lowerBound
        let lastSentence = pb.machine.sentences.last { $0.startSample < w.startSample }
        // Reported already, whole, when the engine had reached the next sentence.
        let sentenceReported = (lastSentence?.range.upperBound ?? 0) > cutInput
        let sentenceInput = lastSentence?.range.upperBound ?? pb.pass?.sentenceStart?.input ?? pb.machine.resumedFrom?.input ?? 0
        var sentenceStart: (input: Int, sample: Int)?
        // Only when words of that sentence come before the cut (else the cut starts a sentence).
        if !sentenceReported, let first = pb.machine.words.first(where: { $0.range.lowerBound >= sentenceInput }),
            first.range.lowerBound < cutInput
        {
            // At its first word, as in a whole rendering (the first sentence holds all before it).
            sentenceStart = (lastSentence == nil ? sentenceInput : first.range.lowerBound, first.startSample)
        }
        pb.machine.discardMarks(from: w.startSample)
        return Restart(word: w, sentenceStart: sentenceStart, sentenceReported: sentenceReported)
    }

    /// Starts a new synthesis pass of `pb` where ``dropAudio(of:from:)`` left off. State lock held.
    private func restartSynthesis(_ pb: Playback, _ restart: Restart, in s: inout State) -> Bool {
        let w = restart.word
        guard pb.stream != nil,
            let pass = makePass(pb, base: w.startSample, input: w.range.lowerBound, sentenceStart: restart.sentenceStart, in: &s)
        else { return false }
        pass.skipsFirstSentence = restart.sentenceReported  // its first sentence mark would say part of it again
        Task { await self.synthesize(pb, pass, opening: nil) }
        return true
    }

    /// How many samples synthesis may run ahead of the listener in a stream at `rate`.
    private func aheadLimit(rate: Int) -> Int {
        max(rate, output.maxBufferedAhead.samples(atRate: rate))
    }

    /// Runs one synthesis pass of `pb` into its stream, until its plan ends or it is stopped
    /// (the playback ended, or a change of rate replaced it with a new pass). The first pass
    /// takes the stream from `opening` once the engine has its sample rate; later ones
    /// write to the stream it set.
    private func synthesize(_ pb: Playback, _ pass: SynthesisPass, opening: OpeningStream?) async {
        do {
            let total = try await engine.synthesize(
                pass.plan, stop: pass.stop, skipsLeadingSilence: true,
                started: { rate throws(ParlaError) in
                    guard let opening else { return }
                    let stream = try opening.stream(at: rate, stop: pass.stop)
                    let taken = self.state.withLock { s -> Bool in
                        pb.machine.sampleRate = rate
                        guard !pb.ended else { return false }
                        pb.stream = stream
                        stream.setVolume(s.prosody.volume)
                        if pb.machine.isCorked { stream.setCorked(true) }
                        return true
                    }
                    guard taken else {
                        stream.close()
                        throw .cancelled
                    }
                    self.wake.signal()
                }
            ) { event in
                switch event {
                case .audio(let buffer):
                    // Written under the state lock, so nothing of a replaced pass follows a cut.
                    let written = self.state.withLock { _ -> (any AudioStream)? in
                        guard !pass.stop.isRaised, let stream = pb.stream else { return nil }
                        do { try stream.write(buffer.samples) } catch {
                            pass.stop.raise()
                            return nil
                        }
                        return stream
                    }
                    // Far enough ahead: the pass stops at the next sentence (see `.word`).
                    if let stream = written, stream.samplesAhead() > self.aheadLimit(rate: stream.sampleRate) {
                        self.state.withLock { _ in if pb.pass === pass { pb.parkRequested = true } }
                    }
                case .word(var w):
                    w.startSample += pass.base
                    w.endSample += pass.base
                    self.state.withLock { s in
                        guard !pass.stop.isRaised, let stream = pb.stream else { return }
                        // A change of rate waits for a word whose audio the server has not had.
                        if pb.changeRequest != nil, self.cut(pb, at: w, in: &s) { return }
                        // Far enough ahead, at the start of a sentence (or anywhere, twice as
                        // far): the pass stops here and frees the engine, and the clock starts a
                        // new one from this word when the listener has caught up.
                        if pb.parkRequested, pb.pass === pass, w.startSample > pass.base,
                            pb.machine.startsSentence(w) || stream.samplesAhead() > 2 * self.aheadLimit(rate: stream.sampleRate),
                            let restart = self.dropAudio(of: pb, from: w)
                        {
                            pb.parked = restart
                            pass.stop.raise()
                            return
                        }
                        pb.machine.words.append(w)
                    }
                case .sentence(var m):
                    m.startSample += pass.base
                    m.endSample += pass.base
                    self.state.withLock { _ in
                        guard !pass.stop.isRaised else { return }
                        if pass.skipsFirstSentence {
                            pass.skipsFirstSentence = false
                            pass.sawSentence = true
                            return
                        }
                        if !pass.sawSentence, pass.base > 0 || pass.input > 0 {
                            // The pass starts inside the text: its first sentence starts where it does.
                            let start = pass.sentenceStart ?? (pass.input, m.startSample)
                            m.range = min(start.input, m.range.upperBound)..<m.range.upperBound
                            m.startSample = min(start.sample, m.startSample)
                        }
                        pass.sawSentence = true
                        pb.machine.sentences.append(m)
                    }
                case .segment:
                    break
                }
            }
            state.withLock { _ in
                guard pb.pass === pass, !pass.stop.isRaised, !pb.ended else { return }
                pb.machine.synthesisFinished(totalSamples: pass.base + total)
                pb.changeRequest = nil
                pb.stream?.finishInput()
            }
            wake.signal()
        } catch {
            opening?.discard()  // if the engine failed before it was taken
            let failure = error
            state.withLock { s in
                guard pb.pass === pass, !pb.ended else { return }  // replaced by a new pass, or ended
                // A stream failure that stopped synthesis is reported with the stream's own error.
                if failure == .cancelled, case .failed(let e)? = pb.stream?.currentStatus {
                    end(pb, .failed(e), in: &s)
                } else if failure != .cancelled {
                    end(pb, .failed(failure), in: &s)
                }
            }
            wake.signal()
        }
    }

    // MARK: The playback clock

    private func startClock() {
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
            for pb in s.playing where !pb.ended {
                // A parked synthesis carries on once the listener has heard half of what was ahead.
                if let restart = pb.parked, let stream = pb.stream, stream.samplesAhead() <= aheadLimit(rate: stream.sampleRate) / 2 {
                    pb.parked = nil
                    _ = restartSynthesis(pb, restart, in: &s)
                }
                if let next = advance(pb, in: &s) { sleep = min(sleep, next) }
            }
            return max(sleep, 500_000)
        }
    }

    /// One playback's step; returns nanoseconds until its next due event, nil if ended.
    private func advance(_ pb: Playback, in s: inout State) -> Int? {
        let state: PlaybackStateMachine.StreamState
        switch pb.stream?.currentStatus {
        case nil: state = .opening
        case .failed(let error): state = .failed(error)
        case .drained: state = .drained
        case .active, .closed: state = .playing
        }
        let step = pb.machine.advance(played: pb.stream?.playedSamples(), stream: state, now: now())
        carryOut(step.actions, for: pb, in: &s)
        guard let wait = step.wakeAfter else { return nil }
        return Int(wait.wholeNanoseconds)
    }
}

/// A change of rate or pitch as it took effect in one utterance's audio.
package struct LiveProsodyChange: Sendable {
    package var utterance: UtteranceID
    /// When it was asked for, and the listener's position in the utterance's audio then.
    package var requestedAt: UInt64
    package var heardSample: Int
    /// Where the audio made with the new settings starts, and the word it starts with.
    package var sample: Int
    package var word: Range<Int>
    package var sampleRate: Int
    /// Audio already buffered when it was asked for, which played on with the old settings.
    package var latencyMilliseconds: Double { Double(sample - heardSample) * 1000 / Double(max(sampleRate, 1)) }
}

/// One started utterance (every field is guarded by ``LiveSpeech``'s state lock).
///
/// Unchecked: its mutable fields are read and written only inside `LiveSpeech.state`'s
/// `withLock`, which reaches a playback only through the state it guards.
private final class Playback: @unchecked Sendable {
    let id: UtteranceID
    /// What is due when: the events, pauses, stops and the end.
    var machine: PlaybackStateMachine
    var stream: (any AudioStream)?
    /// The plan it speaks (from its resume point), once made.
    var plan: SpeechPlan?
    /// The synthesis pass now writing its audio.
    var pass: SynthesisPass?
    /// A change of rate or pitch waiting for a word to start at: when it was asked for, and the
    /// sample heard then.
    var changeRequest: (time: UInt64, heard: Int)?
    /// Synthesis ran far enough ahead of the listener: it stops at the next sentence
    /// (``parkRequested``), and where it starts again once the listener catches up (``parked``).
    var parkRequested = false
    var parked: Restart?
    var ended = false

    init(id: UtteranceID, machine: PlaybackStateMachine) {
        self.id = id
        self.machine = machine
    }
}

/// Where synthesis of a playback starts again after its audio from ``word`` on was dropped:
/// the sentence that word is in, and whether that sentence was reported already.
private struct Restart {
    let word: WordMark
    let sentenceStart: (input: Int, sample: Int)?
    let sentenceReported: Bool
}

/// One run of the engine over a playback's plan: the first from its start, and one more from
/// each word where a change of rate or pitch took effect. Its audio lands in the stream from
/// sample ``base`` on. Fields other than the constants are guarded by the state lock.
///
/// Unchecked: `sawSentence` and `skipsFirstSentence` are read and written only inside
/// `LiveSpeech.state`'s `withLock`; the rest are constants of Sendable types.
private final class SynthesisPass: @unchecked Sendable {
    let plan: SpeechPlan
    let stop = StopFlag()
    let base: Int
    /// Where it starts in the input, and where the sentence it starts in began (nil: it starts
    /// a sentence).
    let input: Int
    let sentenceStart: (input: Int, sample: Int)?
    var sawSentence = false
    /// Its first sentence mark is dropped: that sentence was reported before the cut.
    var skipsFirstSentence = false

    init(plan: SpeechPlan, base: Int, input: Int, sentenceStart: (input: Int, sample: Int)?) {
        self.plan = plan
        self.base = base
        self.input = input
        self.sentenceStart = sentenceStart
    }
}

/// The stream of an utterance's first pass, opening on a thread of its own at the sample rate
/// the engine will most likely have, while the engine loads and starts speaking.
private final class OpeningStream: Sendable {
    private let output: any AudioSink
    private let name: String
    private let likelyRate: Int?
    /// What the thread opened, and whether the stream was taken or given up (then the thread
    /// closes what it opens).
    private let state = Mutex<(opened: Result<any AudioStream, ParlaError>?, claimed: Bool)>((nil, false))
    private let done = DispatchSemaphore(value: 0)

    init(_ output: any AudioSink, likelySampleRate: Int?, name: String) {
        self.output = output
        self.name = name
        likelyRate = likelySampleRate
        guard let rate = likelySampleRate else { return }
        startThread(name: "parla.open-stream") { [self] in
            let opened: Result<any AudioStream, ParlaError>
            do throws(ParlaError) {
                opened = .success(try output.makeStream(sampleRate: rate, name: name))
            } catch {
                opened = .failure(error)
            }
            let unwanted = state.withLock { s -> (any AudioStream)? in
                s.opened = opened
                return s.claimed ? try? opened.get() : nil
            }
            unwanted?.close()
            done.signal()
        }
    }

    /// The stream at `rate` (blocking): the one opening, else (no guess, or a wrong one) one
    /// opened now. Gives up with ``ParlaError/cancelled`` once `stop` is raised.
    func stream(at rate: Int, stop: StopFlag) throws(ParlaError) -> any AudioStream {
        if likelyRate != nil {
            while done.wait(timeout: .now() + .milliseconds(5)) == .timedOut {
                if stop.isRaised {
                    discard()
                    throw .cancelled
                }
            }
            let opened = state.withLock { s in
                s.claimed = true
                return s.opened
            }
            if rate == likelyRate, let opened { return try opened.get() }
            if case .success(let wrong)? = opened { wrong.close() }
        }
        return try output.makeStream(sampleRate: rate, name: name)
    }

    /// Closes the stream unless it was taken (once it has opened, if it has not yet).
    func discard() {
        let opened = state.withLock { s -> (any AudioStream)? in
            guard !s.claimed else { return nil }
            s.claimed = true
            return try? s.opened?.get()
        }
        opened?.close()
    }
}
