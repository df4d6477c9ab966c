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
final class LiveSpeech: @unchecked Sendable {
    private static let ids = Atomic<Int>(0)

    let output: PulseAudioOutput
    private let engine: ESpeakEngine
    private let planner: @Sendable (Utterance) throws(ParlaError) -> SpeechPlan
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

    /// Where a suspended utterance carries on: offsets in its input (the caller's text or
    /// markup) and in its spoken text, and the word it resumes with (input offsets).
    struct Resume {
        var input: Int
        var text: Int
        var word: Range<Int>
    }

    private struct State {
        var scheduler = SpeechScheduler()
        var requests: [UtteranceID: Request] = [:]
        var playing: [Playback] = []
        var paused = false
        var subscribers: [Int: AsyncStream<SpeechEvent>.Continuation] = [:]
        var nextSubscriber = 0
        /// Live rate, pitch and volume, applied to what is speaking and to what comes next.
        var prosody = LiveProsody()
        /// The latest changes of rate or pitch that took effect (for benchmarks and tests).
        var changes: [LiveProsodyChange] = []
    }

    /// How much audio must stay ahead of what the server holds when synthesis restarts at a
    /// new rate, so the server does not run dry while the engine starts again.
    private static let restartMarginSeconds = 0.06

    init(output: PulseAudioOutput, engine: ESpeakEngine, planner: @escaping @Sendable (Utterance) throws(ParlaError) -> SpeechPlan) {
        self.output = output
        self.engine = engine
        self.planner = planner
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
            if boundary == .immediate || pb.stream == nil {
                cork(pb, in: &s)
            } else {
                pb.pauseAt = pb.wordBoundary(after: pb.stream?.playedSamples() ?? 0)
            }
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
                pb.pauseAt = nil
                if pb.isCorked {
                    pb.isCorked = false
                    pb.stream?.setCorked(false)
                    emit(.continued, for: pb.id, in: &s)
                }
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
                guard let stream = pb.stream else { continue }
                pb.changeRequest = (monotonicNanoseconds(), stream.playedSamples() ?? 0)
                // The earliest known word not yet handed to the server; else the next one made.
                if !pb.words[pb.nextWord...].contains(where: { cut(pb, at: $0, in: &s) }) && pb.synthesisDone {
                    pb.changeRequest = nil  // the rest is already at the server: nothing to change
                }
            }
        }
        wake.signal()
    }

    var isSpeaking: Bool { state.withLock { $0.scheduler.isBusy } }
    var isPaused: Bool { state.withLock { $0.paused } }

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
                let pb = Playback(id: id, input: request.utterance.inputText, marks: request.utterance.markPositions)
                if request.hasStarted {
                    let resume = request.resume ?? Resume(input: 0, text: 0, word: 0..<0)
                    pb.resumedFrom = resume
                    pb.nextMark = pb.marks.firstIndex { $0.inputOffset >= resume.input } ?? pb.marks.count
                }
                s.playing.append(pb)
                s.paused = false
                Task { await self.run(pb, request.utterance, plan: request.plan, from: pb.resumedFrom?.text) }
            case .interrupt(let id, let boundary):
                guard let pb = s.playing.first(where: { $0.id == id }) else { continue }
                if boundary == .immediate {
                    end(pb, .cancelled(.interrupted), in: &s)
                } else {
                    pb.pauseAt = nil
                    if pb.isCorked {  // a paused utterance has no word to finish
                        end(pb, .cancelled(.interrupted), in: &s)
                    } else {
                        pb.stopAt = pb.wordBoundary(after: pb.stream?.playedSamples() ?? 0)
                    }
                }
            case .drop(let id):
                // A suspended request that is dropped had been heard: it was cut off.
                terminate(id, .cancelled(s.requests[id]?.hasStarted == true ? .interrupted : .dropped), in: &s)
            case .suspend(let id):
                guard let pb = s.playing.first(where: { $0.id == id }), !pb.ended else { continue }
                if var request = s.requests[id] {
                    if pb.started {
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
        guard pb.nextWord > 0 else { return pb.resumedFrom }
        let heard = pb.words[pb.nextWord - 1]
        var start = heard
        if point == .sentence {
            let lo = heard.range.lowerBound
            let sentenceStart: Int
            if let m = pb.sentences.last(where: { $0.range.lowerBound <= lo }), lo < m.range.upperBound {
                sentenceStart = m.range.lowerBound
            } else {
                // Its sentence mark is not synthesized yet: it began where the last known sentence ended.
                sentenceStart = pb.sentences.last(where: { $0.range.upperBound <= lo })?.range.upperBound ?? pb.resumedFrom?.input ?? 0
            }
            start = pb.words.first { $0.range.lowerBound >= sentenceStart } ?? heard
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
            utterance: id, kind: kind, time: .now,
            announcement: request.announcement.map { AnnouncementResult(string: $0, wasSuccessful: success) })
        for c in s.subscribers.values { c.yield(event) }
        request.waiter?.resume(returning: event)
    }

    private func emit(_ kind: SpeechEvent.Kind, for id: UtteranceID, in s: inout State) {
        guard s.requests[id] != nil else { return }
        let event = SpeechEvent(utterance: id, kind: kind, time: .now)
        for c in s.subscribers.values { c.yield(event) }
    }

    /// Delivers the marks of `pb` that lie before input offset `limit` and have not been delivered.
    private func emitMarks(of pb: Playback, before limit: Int, in s: inout State) {
        while pb.nextMark < pb.marks.count, pb.marks[pb.nextMark].inputOffset < limit {
            emit(.mark(pb.marks[pb.nextMark].name), for: pb.id, in: &s)
            pb.nextMark += 1
        }
    }

    private func cork(_ pb: Playback, in s: inout State) {
        pb.pauseAt = nil
        guard !pb.isCorked else { return }
        pb.isCorked = true
        pb.stream?.setCorked(true)
        emit(.paused, for: pb.id, in: &s)
    }

    // MARK: Synthesis (one task per started utterance)

    private func run(_ pb: Playback, _ utterance: Utterance, plan planned: SpeechPlan?, from resumeOffset: Int?) async {
        do {
            var plan: SpeechPlan
            if let planned {
                plan = planned
            } else {
                plan = try planner(utterance)
                let made = plan
                state.withLock { s in s.requests[pb.id]?.plan = made }  // planned once, even if it resumes
            }
            if let resumeOffset, resumeOffset > 0 { plan = plan.resuming(from: resumeOffset) }
            let rate = try await engine.start()
            let output = self.output, name = String(plan.text.prefix(60))
            let stream = try await onThreadOfItsOwn("parla.open-stream") { () throws(ParlaError) in
                try output.openStream(sampleRate: rate, name: name)
            }
            let made = plan
            let first = state.withLock { s -> SynthesisPass? in
                pb.sampleRate = rate
                guard !pb.ended else { return nil }
                pb.stream = stream
                pb.plan = made
                stream.setVolume(s.prosody.volume)
                if pb.isCorked { stream.setCorked(true) }
                return makePass(pb, base: 0, input: pb.resumedFrom?.input ?? 0, sentenceStart: nil, in: &s)
            }
            guard let first else {
                stream.close()
                return
            }
            wake.signal()
            await synthesize(pb, first, stream: stream)
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
        pb.synthesisDone = false
        return pass
    }

    /// Restarts synthesis of `pb` at word `w` (stream samples) for a change of rate or pitch,
    /// if the server has not been given its audio yet: the audio from it on is dropped, and a
    /// new pass speaks the rest. State lock held.
    /// - Returns: false if it is too late to start there.
    private func cut(_ pb: Playback, at w: WordMark, in s: inout State) -> Bool {
        let margin = Int(Double(pb.sampleRate) * Self.restartMarginSeconds)
        guard let stream = pb.stream, stream.discard(from: w.startSample, margin: margin) else { return false }
        // A cut inside a sentence: the new pass's first sentence is that whole sentence.
        let cutInput = w.range.lowerBound
        let lastSentence = pb.sentences.last { $0.startSample < w.startSample }
        // Reported already, whole, when the engine had reached the next sentence.
        let sentenceReported = (lastSentence?.range.upperBound ?? 0) > cutInput
        let sentenceInput = lastSentence?.range.upperBound ?? pb.pass?.sentenceStart?.input ?? pb.resumedFrom?.input ?? 0
        var sentenceStart: (input: Int, sample: Int)?
        if !sentenceReported && sentenceInput < cutInput {
            sentenceStart = (sentenceInput, pb.words.first { $0.range.lowerBound >= sentenceInput }?.startSample ?? w.startSample)
        }
        pb.words.removeAll { $0.startSample >= w.startSample }
        pb.sentences.removeAll { $0.startSample >= w.startSample }
        pb.nextWord = min(pb.nextWord, pb.words.count)
        pb.nextSentence = min(pb.nextSentence, pb.sentences.count)
        if let (time, heard) = pb.changeRequest {
            s.changes.append(
                LiveProsodyChange(
                    utterance: pb.id, requestedAt: time, heardSample: heard, sample: w.startSample, word: w.range, sampleRate: pb.sampleRate
                ))
            if s.changes.count > 100 { s.changes.removeFirst() }
        }
        pb.changeRequest = nil
        guard let pass = makePass(pb, base: w.startSample, input: cutInput, sentenceStart: sentenceStart, in: &s) else { return false }
        pass.skipsFirstSentence = sentenceReported  // its first sentence mark would say part of it again
        Task { await self.synthesize(pb, pass, stream: stream) }
        return true
    }

    /// Runs one synthesis pass of `pb` into its stream, until its plan ends or it is stopped
    /// (the playback ended, or a change of rate replaced it with a new pass).
    private func synthesize(_ pb: Playback, _ pass: SynthesisPass, stream: PlaybackStream) async {
        let rate = stream.sampleRate
        let ahead = output.options.maxBufferedAhead.components
        let aheadLimit = max(rate, Int(ahead.seconds) * rate + Int(Double(ahead.attoseconds) / 1e18 * Double(rate)))
        do {
            let total = try await engine.synthesize(pass.plan, stop: pass.stop) { event in
                switch event {
                case .audio(let buffer):
                    // Written under the state lock, so nothing of a replaced pass follows a cut.
                    let written = self.state.withLock { _ -> Bool in
                        guard !pass.stop.isRaised else { return false }
                        do { try stream.write(buffer.samples) } catch {
                            pass.stop.raise()
                            return false
                        }
                        return true
                    }
                    if written { stream.waitWhileAhead(by: aheadLimit) { pass.stop.isRaised } }
                case .word(var w):
                    w.startSample += pass.base
                    w.endSample += pass.base
                    self.state.withLock { s in
                        guard !pass.stop.isRaised else { return }
                        // A change of rate waits for a word whose audio the server has not had.
                        if pb.changeRequest != nil, self.cut(pb, at: w, in: &s) { return }
                        pb.words.append(w)
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
                        pb.sentences.append(m)
                    }
                case .segment:
                    break
                }
            }
            state.withLock { _ in
                guard pb.pass === pass, !pass.stop.isRaised, !pb.ended else { return }
                pb.totalSamples = pass.base + total
                pb.synthesisDone = true
                pb.changeRequest = nil
                stream.finishInput()
            }
            wake.signal()
        } catch {
            let failure = error
            state.withLock { s in
                guard pb.pass === pass, !pb.ended else { return }  // replaced by a new pass, or ended
                // A stream failure that stopped synthesis is reported with the stream's own error.
                if failure == .cancelled, case .failed(let e) = stream.currentStatus {
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
        guard clockStarted.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        clockQueue.async { [weak self] in
            while let me = self {
                let wait = me.tick()
                _ = me.wake.wait(timeout: .now() + .nanoseconds(wait))
            }
        }
    }

    /// Delivers everything the listener has reached; returns how long to sleep (nanoseconds).
    private func tick() -> Int {
        state.withLock { s -> Int in
            var sleep = 1_000_000_000  // idle: wake on demand
            for pb in s.playing where !pb.ended {
                if let next = advance(pb, in: &s) { sleep = min(sleep, next) }
            }
            return max(sleep, 500_000)
        }
    }

    /// One playback's step; returns nanoseconds until its next due event, nil if ended.
    private func advance(_ pb: Playback, in s: inout State) -> Int? {
        guard let stream = pb.stream else { return 5_000_000 }
        let status = stream.currentStatus
        if case .failed(let error) = status {
            end(pb, .failed(error), in: &s)
            return nil
        }
        guard let played = stream.playedSamples() else { return 2_000_000 }
        if !pb.started && (played > 0 || status == .drained) {
            pb.started = true
            if let r = pb.resumedFrom {
                emit(.resumed(from: pb.spoken(r.word, text: nil, sample: 0)), for: pb.id, in: &s)
            } else {
                emit(.started, for: pb.id, in: &s)
            }
        }
        if pb.started {
            while pb.nextSentence < pb.sentences.count, pb.sentences[pb.nextSentence].startSample <= played {
                let m = pb.sentences[pb.nextSentence]
                pb.nextSentence += 1
                emit(.willSpeakSentence(pb.spoken(m.range, text: nil, sample: m.startSample)), for: pb.id, in: &s)
            }
            while pb.nextWord < pb.words.count, pb.words[pb.nextWord].startSample <= played {
                let w = pb.words[pb.nextWord]
                pb.nextWord += 1
                // Marks before this word (or inside it) are reached as it starts.
                emitMarks(of: pb, before: w.range.upperBound, in: &s)
                emit(.willSpeakWord(pb.spoken(w.range, text: w.word, sample: w.startSample)), for: pb.id, in: &s)
            }
        }
        if let at = pb.stopAt, played >= at {
            end(pb, .cancelled(.interrupted), in: &s)
            return nil
        }
        if let at = pb.pauseAt, played >= at {
            cork(pb, in: &s)
        }
        let now = monotonicNanoseconds()
        if status == .drained, pb.drainedAt == nil { pb.drainedAt = now }
        if pb.synthesisDone {
            // Finished once the played position reaches the last sample, or (should the server's
            // clock stop short of it) a latency's worth after the server drained the stream.
            let latency = output.options.targetLatency.components
            let grace = UInt64(latency.seconds) * 1_000_000_000 + UInt64(latency.attoseconds / 1_000_000_000) + 100_000_000
            if played >= pb.totalSamples - pb.sampleRate / 1000 || (pb.drainedAt.map { now - $0 > grace } ?? false) {
                // Marks after the last word are reached when the audio ends.
                emitMarks(of: pb, before: .max, in: &s)
                end(pb, .finished, in: &s)
                return nil
            }
        }
        if pb.isCorked { return 50_000_000 }
        var due = pb.synthesisDone ? pb.totalSamples : Int.max
        if pb.nextWord < pb.words.count { due = min(due, pb.words[pb.nextWord].startSample) }
        if pb.nextSentence < pb.sentences.count { due = min(due, pb.sentences[pb.nextSentence].startSample) }
        if let at = pb.stopAt { due = min(due, at) }
        if let at = pb.pauseAt { due = min(due, at) }
        guard due != Int.max else { return 5_000_000 }
        let ns = (due - played) * 1_000_000_000 / max(pb.sampleRate, 1)
        return min(max(ns, 0), 20_000_000)
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

/// One started utterance (every field is guarded by ``LiveSpeech``'s state lock, except
/// ``stop``, which is atomic).
private final class Playback: @unchecked Sendable {
    let id: UtteranceID
    let input: String
    var stream: PlaybackStream?
    var sampleRate = 22050
    var words: [WordMark] = []
    var sentences: [SentenceMark] = []
    /// Named points of the text, in text order, with their offsets in ``input``.
    let marks: [(name: String, inputOffset: Int)]
    var nextWord = 0
    var nextSentence = 0
    var nextMark = 0
    /// Set when this playback carries on a suspended utterance.
    var resumedFrom: LiveSpeech.Resume?
    /// The plan it speaks (from its resume point), once made.
    var plan: SpeechPlan?
    /// The synthesis pass now writing its audio.
    var pass: SynthesisPass?
    /// A change of rate or pitch waiting for a word to start at: when it was asked for, and the
    /// sample heard then.
    var changeRequest: (time: UInt64, heard: Int)?
    var synthesisDone = false
    var totalSamples = 0
    var started = false
    var ended = false
    var isCorked = false
    var pauseAt: Int?
    var stopAt: Int?
    var drainedAt: UInt64?
    private var cursor = OffsetCursor()

    init(id: UtteranceID, input: String, marks: [(name: String, inputOffset: Int)]) {
        self.id = id
        self.input = input
        self.marks = marks
    }

    /// Where the word being heard at `played` ends (or `played` itself between words).
    func wordBoundary(after played: Int) -> Int {
        for w in words.reversed() where w.startSample <= played {
            return max(w.endSample, played)
        }
        return words.first.map { max($0.endSample, played) } ?? played
    }

    func spoken(_ range: Range<Int>, text: String?, sample: Int) -> SpokenRange {
        let lo = cursor.locate(range.lowerBound, in: input)
        let hi = cursor.locate(range.upperBound, in: input)
        return SpokenRange(
            range: lo.index..<hi.index, utf16Range: lo.utf16..<hi.utf16, scalarRange: range,
            text: text ?? String(input[lo.index..<hi.index]), audioSample: sample, sampleRate: sampleRate)
    }
}

/// One run of the engine over a playback's plan: the first from its start, and one more from
/// each word where a change of rate or pitch took effect. Its audio lands in the stream from
/// sample ``base`` on. Fields other than the constants are guarded by the state lock.
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

/// Converts increasing scalar offsets into indices and UTF-16 offsets without rescanning the text.
private struct OffsetCursor {
    var scalar = 0
    var index: String.Index?
    var utf16 = 0

    mutating func locate(_ offset: Int, in text: String) -> (index: String.Index, utf16: Int) {
        let scalars = text.unicodeScalars
        if index == nil || offset < scalar {
            scalar = 0
            index = scalars.startIndex
            utf16 = 0
        }
        var i = index ?? scalars.startIndex
        while scalar < offset, i < scalars.endIndex {
            utf16 += scalars[i].utf16.count
            i = scalars.index(after: i)
            scalar += 1
        }
        index = i
        return (i, utf16)
    }
}
