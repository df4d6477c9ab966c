import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaEngine
import ParlaPulseAudio
import Synchronization

/// Synthesis for live speech: one task per started utterance, passes restarted at a word
/// after a rate or pitch change or backpressure, and the stream that opens meanwhile.
extension LiveSpeech {
    // MARK: Synthesis (one task per started utterance)

    func run(_ key: Int, id: UtteranceID, _ utterance: Utterance, plan planned: SpeechPlan?, from resumeOffset: Int?) async {
        do throws(ParlaError) {
            var plan: SpeechPlan
            if let planned {
                plan = planned
            } else {
                plan = try planner(utterance)
                let made = plan
                state.withLock { s in s.requests[id]?.plan = made }  // planned once, even if it resumes
            }
            if let resumeOffset, resumeOffset > 0 { plan = plan.resuming(from: resumeOffset) }
            // The stream opens at the rate the engine will most likely have while the engine
            // loads and speaks the first words: the server's round trips are off the path of the
            // first sound, and so is the engine's.
            let opening = OpeningStream(output, likelySampleRate: engine.likelySampleRate, name: String(plan.text.prefix(60)))
            let made = plan
            let first = state.withLock { s -> SynthesisPass? in
                guard let i = s.index(key) else { return nil }
                s.playing[i].plan = made
                let start = s.playing[i].machine.resumedFrom?.input ?? 0
                return makePass(key, PassSentences(base: 0, input: start, sentenceStart: nil), in: &s)
            }
            guard let first else {
                opening.discard()
                return
            }
            await synthesize(key, first, opening: opening)
        } catch {
            let failure = error
            state.withLock { s in
                // No stream yet: only the engine's own failure ends it.
                if let blamed = PlaybackStateMachine.failure(passEndedWith: failure, streamFailure: nil) {
                    end(key, .failed(blamed), in: &s)
                }
            }
            wake.signal()
        }
    }

    /// A new synthesis pass of playback `key` from stream sample `sentences.base`, speaking
    /// its plan from input offset `sentences.input` with the live rate and pitch; it replaces
    /// the pass before it. State lock held.
    func makePass(_ key: Int, _ sentences: PassSentences, in s: inout State) -> SynthesisPass? {
        guard let i = s.index(key), var plan = s.playing[i].plan else { return nil }
        let input = sentences.input
        if sentences.base > 0 { plan = plan.resuming(from: plan.source.map { $0.textOffset(atMarkup: input) } ?? input) }
        let pass = SynthesisPass(plan: plan.scaled(rate: s.prosody.rate, pitch: s.prosody.pitch), sentences: sentences)
        s.playing[i].pass?.stop.raise()
        s.playing[i].pass = pass
        s.playing[i].parked = nil
        s.playing[i].parkRequested = false
        return pass
    }

    /// Restarts synthesis of playback `key` at word `w` (stream samples) for a change of rate
    /// or pitch, if the server has not been given its audio yet: the audio from it on is
    /// dropped, and a new pass speaks the rest. State lock held.
    /// - Returns: false if it is too late to start there.
    func cut(_ key: Int, at w: WordMark, in s: inout State) -> Bool {
        guard let restart = dropAudio(of: key, from: w, in: &s), let i = s.index(key) else { return false }
        if let (time, heard) = s.playing[i].changeRequest {
            s.changes.append(
                LiveProsodyChange(
                    utterance: s.playing[i].id, requestedAt: time, heardSample: heard, sample: w.startSample, word: w.range,
                    sampleRate: s.playing[i].machine.sampleRate
                ))
            if s.changes.count > 100 { s.changes.removeFirst() }
        }
        s.playing[i].changeRequest = nil
        return restartSynthesis(key, restart, in: &s)
    }

    /// Drops the audio and marks of playback `key` from word `w` on, if the server has not
    /// been given that audio yet, and says where synthesis must start again to make it
    /// (``PlaybackStateMachine/restart(droppingFrom:passSentenceStart:)``). State lock held.
    func dropAudio(of key: Int, from w: WordMark, in s: inout State) -> Restart? {
        guard let i = s.index(key) else { return nil }
        let margin = s.playing[i].machine.restartMargin
        guard let stream = s.playing[i].stream, stream.discard(from: w.startSample, margin: margin) else { return nil }
        let passSentenceStart = s.playing[i].pass?.sentences.sentenceStart
        return s.playing[i].machine.restart(droppingFrom: w, passSentenceStart: passSentenceStart)
    }

    /// Starts a new synthesis pass of playback `key` where ``dropAudio(of:from:in:)`` left
    /// off. State lock held.
    func restartSynthesis(_ key: Int, _ restart: Restart, in s: inout State) -> Bool {
        let w = restart.word
        // With the sentence reported already, its first sentence mark would say part of it again.
        let sentences = PassSentences(
            base: w.startSample, input: w.range.lowerBound, sentenceStart: restart.sentenceStart, skipsFirst: restart.sentenceReported)
        guard let i = s.index(key), s.playing[i].stream != nil, let pass = makePass(key, sentences, in: &s) else { return false }
        Task { await self.synthesize(key, pass, opening: nil) }
        return true
    }

    /// How many samples synthesis may run ahead of the listener in a stream at `rate`.
    func aheadLimit(rate: Int) -> Int {
        max(rate, output.maxBufferedAhead.samples(atRate: rate))
    }

    /// Runs one synthesis pass of playback `key` into its stream, until its plan ends or it is
    /// stopped (the playback ended, or a change of rate replaced it with a new pass). The first
    /// pass takes the stream from `opening` once the engine has its sample rate; later ones
    /// write to the stream it set.
    func synthesize(_ key: Int, _ pass: SynthesisPass, opening: OpeningStream?) async {
        do {
            let total = try await engine.synthesize(
                pass.plan, stop: pass.stop, skipsLeadingSilence: true,
                started: { rate throws(ParlaError) in
                    guard let opening else { return }
                    let stream = try opening.stream(at: rate, stop: pass.stop)
                    let taken = self.state.withLock { s -> Bool in
                        guard let i = s.index(key) else { return false }
                        s.playing[i].machine.sampleRate = rate
                        s.playing[i].stream = stream
                        stream.setVolume(s.prosody.volume)
                        if s.playing[i].machine.isCorked { stream.setCorked(true) }
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
                    let written = self.state.withLock { s -> (any AudioStream)? in
                        guard !pass.stop.isRaised, let i = s.index(key), let stream = s.playing[i].stream else { return nil }
                        do { try stream.write(buffer.samples) } catch {
                            pass.stop.raise()
                            return nil
                        }
                        return stream
                    }
                    // Far enough ahead: the pass stops at the next sentence (see `.word`).
                    if let stream = written, stream.samplesAhead() > self.aheadLimit(rate: stream.sampleRate) {
                        self.state.withLock { s in
                            if let i = s.index(key, pass: pass.number) { s.playing[i].parkRequested = true }
                        }
                    }
                case .word(var w):
                    w.startSample += pass.base
                    w.endSample += pass.base
                    self.state.withLock { s in
                        guard !pass.stop.isRaised, let i = s.index(key), let stream = s.playing[i].stream else { return }
                        // A change of rate waits for a word whose audio the server has not had.
                        if s.playing[i].changeRequest != nil, self.cut(key, at: w, in: &s) { return }
                        // Far enough ahead, at the start of a sentence (or anywhere, twice as
                        // far): the pass stops here and frees the engine, and the clock starts a
                        // new one from this word when the listener has caught up.
                        if let j = s.index(key, pass: pass.number), s.playing[j].parkRequested,
                            s.playing[j].machine.parks(
                                at: w, passBase: pass.base, samplesAhead: stream.samplesAhead(),
                                aheadLimit: self.aheadLimit(rate: stream.sampleRate)),
                            let restart = self.dropAudio(of: key, from: w, in: &s)
                        {
                            s.playing[j].parked = restart
                            pass.stop.raise()
                            return
                        }
                        s.playing[i].machine.words.append(w)
                    }
                case .sentence(var m):
                    m.startSample += pass.base
                    m.endSample += pass.base
                    self.state.withLock { s in
                        guard !pass.stop.isRaised, let i = s.index(key, pass: pass.number),
                            let fixed = s.playing[i].pass?.sentences.accept(m)
                        else { return }
                        s.playing[i].machine.sentences.append(fixed)
                    }
                case .segment:
                    break
                }
            }
            state.withLock { s in
                guard let i = s.index(key, pass: pass.number), !pass.stop.isRaised else { return }
                s.playing[i].machine.synthesisFinished(totalSamples: pass.base + total)
                s.playing[i].changeRequest = nil
                s.playing[i].stream?.finishInput()
            }
            wake.signal()
        } catch {
            opening?.discard()  // if the engine failed before it was taken
            let failure = error
            state.withLock { s in
                guard let i = s.index(key, pass: pass.number) else { return }  // replaced by a new pass, or ended
                var streamFailure: ParlaError?
                if case .failed(let e)? = s.playing[i].stream?.currentStatus { streamFailure = e }
                if let blamed = PlaybackStateMachine.failure(passEndedWith: failure, streamFailure: streamFailure) {
                    end(key, .failed(blamed), in: &s)
                }
            }
            wake.signal()
        }
    }
}
