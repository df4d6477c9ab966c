import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaESpeak
import ParlaPulseAudio
import Synchronization

/// Synthesis for live speech: one task per started utterance, passes restarted at a word
/// after a rate or pitch change or backpressure, and the stream that opens meanwhile.
extension LiveSpeech {
    // MARK: Synthesis (one task per started utterance)

    func run(_ pb: Playback, _ utterance: Utterance, plan planned: SpeechPlan?, from resumeOffset: Int?) async {
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
                return makePass(pb, PassSentences(base: 0, input: pb.machine.resumedFrom?.input ?? 0, sentenceStart: nil), in: &s)
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

    /// A new synthesis pass of `pb` from stream sample `sentences.base`, speaking its plan
    /// from input offset `sentences.input` with the live rate and pitch; it replaces the pass
    /// before it. State lock held.
    func makePass(_ pb: Playback, _ sentences: PassSentences, in s: inout State) -> SynthesisPass? {
        guard var plan = pb.plan else { return nil }
        let input = sentences.input
        if sentences.base > 0 { plan = plan.resuming(from: plan.source.map { $0.textOffset(atMarkup: input) } ?? input) }
        let pass = SynthesisPass(plan: plan.scaled(rate: s.prosody.rate, pitch: s.prosody.pitch), sentences: sentences)
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
    func cut(_ pb: Playback, at w: WordMark, in s: inout State) -> Bool {
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
    /// that audio yet, and says where synthesis must start again to make it
    /// (``PlaybackStateMachine/restart(droppingFrom:passSentenceStart:)``). State lock held.
    func dropAudio(of pb: Playback, from w: WordMark) -> Restart? {
        let margin = Int(Double(pb.machine.sampleRate) * Self.restartMarginSeconds)
        guard let stream = pb.stream, stream.discard(from: w.startSample, margin: margin) else { return nil }
        return pb.machine.restart(droppingFrom: w, passSentenceStart: pb.pass?.sentences.sentenceStart)
    }

    /// Starts a new synthesis pass of `pb` where ``dropAudio(of:from:)`` left off. State lock held.
    func restartSynthesis(_ pb: Playback, _ restart: Restart, in s: inout State) -> Bool {
        let w = restart.word
        // With the sentence reported already, its first sentence mark would say part of it again.
        let sentences = PassSentences(
            base: w.startSample, input: w.range.lowerBound, sentenceStart: restart.sentenceStart, skipsFirst: restart.sentenceReported)
        guard pb.stream != nil, let pass = makePass(pb, sentences, in: &s) else { return false }
        Task { await self.synthesize(pb, pass, opening: nil) }
        return true
    }

    /// How many samples synthesis may run ahead of the listener in a stream at `rate`.
    func aheadLimit(rate: Int) -> Int {
        max(rate, output.maxBufferedAhead.samples(atRate: rate))
    }

    /// Runs one synthesis pass of `pb` into its stream, until its plan ends or it is stopped
    /// (the playback ended, or a change of rate replaced it with a new pass). The first pass
    /// takes the stream from `opening` once the engine has its sample rate; later ones
    /// write to the stream it set.
    func synthesize(_ pb: Playback, _ pass: SynthesisPass, opening: OpeningStream?) async {
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
                        if pb.parkRequested, pb.pass === pass,
                            pb.machine.parks(
                                at: w, passBase: pass.base, samplesAhead: stream.samplesAhead(),
                                aheadLimit: self.aheadLimit(rate: stream.sampleRate)),
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
                        guard !pass.stop.isRaised, let fixed = pass.sentences.accept(m) else { return }
                        pb.machine.sentences.append(fixed)
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
}
