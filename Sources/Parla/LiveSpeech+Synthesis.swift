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
        s.playing[i].machine.passStarted()
        return pass
    }

    /// Carries out what playback `key`'s machine decided about its synthesis pass `pass`
    /// (nil: whichever is current): a restart starts a new pass at once, and a park stops it.
    /// State lock held.
    func carryOut(_ step: PlaybackStateMachine.SynthesisStep, for key: Int, pass: SynthesisPass?, in s: inout State) {
        switch step {
        case .goOn:
            break
        case .restart(let restart, let change):
            if let change, let i = s.index(key) {
                let w = restart.word
                s.changes.append(
                    LiveProsodyChange(
                        utterance: s.playing[i].id, requestedAt: change.requestedAt, heardSample: change.heardSample,
                        sample: w.startSample, word: w.range, sampleRate: s.playing[i].machine.sampleRate))
                if s.changes.count > 100 { s.changes.removeFirst() }
            }
            restartSynthesis(key, restart, in: &s)
        case .park:
            pass?.stop.raise()  // only a word of `pass` parks it
        }
    }

    /// Starts a new synthesis pass of playback `key` where the machine's restart says (the
    /// audio from its word on was dropped already). State lock held.
    func restartSynthesis(_ key: Int, _ restart: Restart, in s: inout State) {
        let w = restart.word
        // With the sentence reported already, its first sentence mark would say part of it again.
        let sentences = PassSentences(
            base: w.startSample, input: w.range.lowerBound, sentenceStart: restart.sentenceStart, skipsFirst: restart.sentenceReported)
        guard let i = s.index(key), s.playing[i].stream != nil, let pass = makePass(key, sentences, in: &s) else { return }
        Task { await self.synthesize(key, pass, opening: nil) }
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
                        s.playing[i].stream = stream
                        stream.setVolume(s.prosody.volume)
                        self.carryOut(s.playing[i].machine.streamOpened(sampleRate: rate), for: key, in: &s)
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
                    self.state.withLock { s in
                        guard !pass.stop.isRaised, let i = s.index(key), let stream = s.playing[i].stream else { return }
                        do { try stream.write(buffer.samples) } catch {
                            pass.stop.raise()
                            return
                        }
                        // Far enough ahead, the machine asks the pass to stop at its next sentence.
                        s.playing[i].machine.audioWritten(samplesAhead: stream.samplesAhead())
                    }
                case .word(var w):
                    w.startSample += pass.base
                    w.endSample += pass.base
                    self.state.withLock { s in
                        guard !pass.stop.isRaised, let i = s.index(key, pass: pass.number), let stream = s.playing[i].stream else { return }
                        // A change of rate waiting for a word, or a pass far enough ahead, may stop
                        // here (the clock starts a parked pass again when the listener catches up).
                        let step = s.playing[i].machine.synthesized(
                            w, passBase: pass.base, passSentenceStart: pass.sentences.sentenceStart,
                            samplesAhead: stream.samplesAhead(), drop: { stream.discard(from: $0, margin: $1) })
                        self.carryOut(step, for: key, pass: pass, in: &s)
                    }
                case .sentence(var m):
                    m.startSample += pass.base
                    m.endSample += pass.base
                    self.state.withLock { s in
                        guard !pass.stop.isRaised, let i = s.index(key, pass: pass.number),
                            let fixed = s.playing[i].pass?.sentences.accept(m)
                        else { return }
                        s.playing[i].machine.record(fixed)
                    }
                case .segment:
                    break
                }
            }
            state.withLock { s in
                guard let i = s.index(key, pass: pass.number), !pass.stop.isRaised else { return }
                s.playing[i].machine.synthesisFinished(totalSamples: pass.base + total)
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
