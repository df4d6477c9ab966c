import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaEngine
import ParlaPulseAudio
import Synchronization

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

/// One started utterance: a value inside ``LiveSpeech``'s state lock, found by its ``key``.
/// A task that works for it (planning, a synthesis pass) holds the key, and finds it gone
/// once it has ended or was suspended: a suspended utterance that starts again is a new
/// playback with a new key.
struct Playback: Sendable {
    /// Unique among every playback of the process.
    let key: Int
    let id: UtteranceID
    /// What is due when: the events, pauses, stops and the end.
    var machine: PlaybackStateMachine
    var stream: (any AudioStream)?
    /// The plan it speaks (from its resume point), once made.
    var plan: SpeechPlan?
    /// The synthesis pass now writing its audio.
    var pass: SynthesisPass?
    static let keys = Atomic<Int>(0)

    init(id: UtteranceID, machine: PlaybackStateMachine) {
        key = Self.keys.add(1, ordering: .relaxed).newValue
        self.id = id
        self.machine = machine
    }
}

/// Where synthesis of a playback starts again after its audio from a word on was dropped.
typealias Restart = PlaybackStateMachine.Restart

/// One run of the engine over a playback's plan: the first from its start, and one more from
/// each word where a change of rate or pitch took effect, or where a parked pass carries on.
/// Its audio lands in the stream from sample ``base`` on. The playback holds the current pass;
/// the task that runs it holds a copy, and is told it was replaced by its ``stop`` flag and
/// by the playback's pass having another ``number``.
struct SynthesisPass: Sendable {
    let number: Int
    let plan: SpeechPlan
    let stop = StopFlag()
    /// Its sentence marks, made right for the whole utterance (``PassSentences``); the copy in
    /// the playback is the one that counts.
    var sentences: PassSentences
    /// Where its audio lands in the stream.
    var base: Int { sentences.base }

    static let numbers = Atomic<Int>(0)

    init(plan: SpeechPlan, sentences: PassSentences) {
        number = Self.numbers.add(1, ordering: .relaxed).newValue
        self.plan = plan
        self.sentences = sentences
    }
}

/// The stream of an utterance's first pass, opening on a thread of its own at the sample rate
/// the engine will most likely have, while the engine loads and starts speaking.
final class OpeningStream: Sendable {
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
            // Woken by the opening thread, or by a stop (the semaphore then counts one more
            // signal than waits, which nothing reads).
            stop.onRaise { [done] in done.signal() }
            done.wait()
            if stop.isRaised {
                discard()
                throw .cancelled
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
