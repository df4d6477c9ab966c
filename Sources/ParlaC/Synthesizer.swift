import CParlaAPI
#if canImport(Glibc)
    import Glibc
#endif
import Dispatch
import FoundationEssentials
import Parla
import ParlaCore
import ParlaIO
import ParlaPulseAudio
import Synchronization

/// The one thread every synthesizer's events are delivered on (parla.h: "one thread of
/// Parla's own").
let callbackExecutor = ThreadExecutor(name: "parla-events")

/// Finds Parla's engine and voices beside libparla, once.
let locatedLibrary: Void = {
    var path = [CChar](repeating: 0, count: 4096)
    guard parla_internal_library_path(&path, path.count) != 0 else { return }
    let file = String(decoding: path.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard let slash = file.lastIndex(of: "/") else { return }
    InstallLocation.libraryDirectory = String(file[..<slash])
}()

/// A parla_synthesizer: a `SpeechSynthesizer`, the C callback, and what is known of each
/// utterance it was given (its text's byte offsets until it ends; then how it ended).
final class SynthesizerBox: Sendable {
    let synthesizer: SpeechSynthesizer

    struct Callback: Sendable {
        // The C function and its user pointer, as addresses (Sendable); set together.
        var function: UInt = 0
        var userData: UInt = 0
    }
    struct Utterances: Sendable {
        var offsets: [Int: ByteOffsets] = [:]
        var ended: [Int: parla_event_kind] = [:]
        var endedOrder: [Int] = []
        var waiters: [Int: [DispatchSemaphore]] = [:]
    }
    let callback = Mutex(Callback())
    let utterances = Mutex(Utterances())
    private let pump = Mutex<Task<Void, Never>?>(nil)
    /// Signalled when the pump's loop has ended: close() waits for it on the calling thread,
    /// without a thread of Swift's cooperative pool (as few as cores: on 2 cores, both may be
    /// busy with live speech, and a close that waited for one hung a Python program's exit).
    private let pumpEnded = DispatchSemaphore(value: 0)

    /// How many ended utterances are remembered for parla_wait.
    static let endedKept = 4096

    init(device: String?) {
        synthesizer = SpeechSynthesizer(audioOutput: AudioOutputOptions(device: device))
        let events = synthesizer.events()
        let ended = pumpEnded
        let task = Task(executorPreference: callbackExecutor) { [weak self] in
            defer { ended.signal() }
            for await event in events {
                guard let self else { return }
                self.deliver(event)
            }
        }
        pump.withLock { $0 = task }
    }

    /// Stops speech and the event pump, and waits for the callback to return (unless called
    /// from it), at most 5 s: a callback that never returns must not hang the caller's exit.
    func close() {
        synthesizer.stop(at: .immediate)
        guard let task = pump.withLock({ $0 }) else { return }
        task.cancel()
        if parla_internal_in_callback() == 0 {
            _ = pumpEnded.wait(timeout: .now() + .seconds(5))
        }
        // Closing cut off what was speaking: a parla_wait on another thread for an utterance
        // whose end the pump never delivered wakes, and is told so.
        for id in utterances.withLock({ Array($0.waiters.keys) }) { ended(id, PARLA_EVENT_INTERRUPTED) }
    }

    /// Submits `settings`, remembering its text's offsets before any event can arrive.
    func submit(_ settings: UtteranceBox.Settings) -> UtteranceID {
        utterances.withLock { u in
            let id: UtteranceID
            if let priority = settings.priority {
                id = synthesizer.beginAnnouncement(settings.utterance, priority: priority, queued: settings.queued)
            } else {
                id = synthesizer.speak(settings.utterance)
            }
            u.offsets[id.rawValue] = ByteOffsets(settings.utterance.inputText)
            return id
        }
    }

    private func deliver(_ event: SpeechEvent) {
        let id = event.utterance.rawValue
        let offsets = utterances.withLock { $0.offsets[id] }
        let kind: parla_event_kind
        var range: SpokenRange?
        var mark: String?
        var error: String?
        switch event.kind {
        case .started: kind = PARLA_EVENT_STARTED
        case .willSpeakWord(let r): kind = PARLA_EVENT_WORD; range = r
        case .willSpeakSentence(let r): kind = PARLA_EVENT_SENTENCE; range = r
        case .mark(let name): kind = PARLA_EVENT_MARK; mark = name
        case .resumed(let r): kind = PARLA_EVENT_RESUMED; range = r
        case .paused: kind = PARLA_EVENT_PAUSED
        case .continued: kind = PARLA_EVENT_CONTINUED
        case .finished: kind = PARLA_EVENT_FINISHED
        case .cancelled(.interrupted): kind = PARLA_EVENT_INTERRUPTED
        case .cancelled(.dropped): kind = PARLA_EVENT_DROPPED
        case .failed(let e): kind = PARLA_EVENT_FAILED; error = e.description
        }
        var c = parla_event()
        c.size = MemoryLayout<parla_event>.size
        c.kind = kind
        c.utterance = UInt64(max(id, 0))
        c.time_ns = Int64(clamping: event.time.nanoseconds)
        c.byte_start = -1
        c.byte_end = -1
        c.scalar_start = -1
        c.scalar_end = -1
        c.audio_ns = -1
        c.announcement_heard = event.kind.isTerminal ? (event.announcement.map { $0.wasSuccessful ? 1 : 0 } ?? -1) : -1
        if let range {
            c.scalar_start = Int64(range.scalarRange.lowerBound)
            c.scalar_end = Int64(range.scalarRange.upperBound)
            if let offsets {
                c.byte_start = offsets.byte(range.scalarRange.lowerBound)
                c.byte_end = offsets.byte(range.scalarRange.upperBound)
            }
            c.audio_ns = range.sampleRate > 0 ? Int64(range.audioSample) * 1_000_000_000 / Int64(range.sampleRate) : -1
        }
        let target = callback.withLock { $0 }
        if target.function != 0, let function = unsafeBitCast(target.function, to: parla_event_callback?.self) {
            parla_internal_set_in_callback(1)
            withOptionalCString(range?.text) { text in
                withOptionalCString(mark) { markPointer in
                    withOptionalCString(error) { errorPointer in
                        c.text = text
                        c.mark = markPointer
                        c.error = errorPointer
                        function(&c, UnsafeMutableRawPointer(bitPattern: target.userData))
                    }
                }
            }
            parla_internal_set_in_callback(0)
        }
        if event.kind.isTerminal { ended(id, kind) }
    }

    private func ended(_ id: Int, _ kind: parla_event_kind) {
        let waiting = utterances.withLock { u -> [DispatchSemaphore] in
            u.offsets[id] = nil
            u.ended[id] = kind
            u.endedOrder.append(id)
            if u.endedOrder.count > Self.endedKept {
                let old = u.endedOrder.prefix(u.endedOrder.count - Self.endedKept)
                for o in old { u.ended[o] = nil }
                u.endedOrder.removeFirst(old.count)
            }
            return u.waiters.removeValue(forKey: id) ?? []
        }
        waiting.forEach { $0.signal() }
    }

    enum WaitOutcome { case ended(parla_event_kind), unknown, timedOut }

    /// Waits until utterance `id` ends, at most `timeoutNanoseconds` (negative, or past a year:
    /// no limit).
    func wait(_ id: Int, timeoutNanoseconds timeout: Int64) -> WaitOutcome {
        let semaphore = DispatchSemaphore(value: 0)
        let early = utterances.withLock { u -> WaitOutcome? in
            if let kind = u.ended[id] { return .ended(kind) }
            guard u.offsets[id] != nil else { return .unknown }
            u.waiters[id, default: []].append(semaphore)
            return nil
        }
        if let early { return early }
        let forever = timeout < 0 || timeout > 365 * 86_400 * 1_000_000_000
        // Without a limit, waited for until the utterance ends (it always does: finished, cut
        // off, dropped or failed; closing the synthesizer cuts it off).
        let result: DispatchTimeoutResult
        if forever {
            semaphore.wait()
            result = .success
        } else {
            result = semaphore.wait(timeout: .now() + .nanoseconds(Int(timeout)))
        }
        return utterances.withLock { u -> WaitOutcome in
            if let kind = u.ended[id] { return .ended(kind) }
            if result == .timedOut { u.waiters[id]?.removeAll { $0 === semaphore } }
            return .timedOut
        }
    }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

func synthesizerBox(_ handle: OpaquePointer?) -> SynthesizerBox? {
    guard let box = HandleTable.shared.get(handle, as: SynthesizerBox.self) else {
        _ = fail(PARLA_ERROR_INVALID_HANDLE, handle == nil ? "the synthesizer is NULL" : "the synthesizer was freed, or is not one")
        return nil
    }
    return box
}

// MARK: The C functions

@_cdecl("parla_version")
public func cParlaVersion() -> UnsafePointer<CChar>? {
    UnsafePointer(bitPattern: versionCString)
}

/// parlaVersion as a C string, made once and never freed (its address: Sendable).
private let versionCString = UInt(bitPattern: strdup(parlaVersion))

@_cdecl("parla_synthesizer_new")
public func parlaSynthesizerNew(_ device: UnsafePointer<CChar>?) -> OpaquePointer? {
    _ = locatedLibrary
    var sink: String?
    if let device {
        guard let name = string(device, "the device") else { return nil }
        sink = name
    }
    if getenv("PARLA_ENGINE") == nil, let dir = InstallLocation.libraryDirectory,
        !InstallLocation.engineCandidates().contains(where: { access($0, X_OK) == 0 })
    {
        _ = fail(
            PARLA_ERROR_ENGINE,
            "Parla's engine (parla-engine) is not beside libparla (\(dir)) nor in its prefix's libexec/parla: install Parla with scripts/install or its .deb, or set PARLA_ENGINE to the parla-engine program"
        )
        return nil
    }
    _ = succeed()
    return HandleTable.shared.add(SynthesizerBox(device: sink))
}

@_cdecl("parla_synthesizer_free")
public func parlaSynthesizerFree(_ handle: OpaquePointer?) {
    HandleTable.shared.remove(handle, as: SynthesizerBox.self)?.close()
}

@_cdecl("parla_set_event_callback")
public func parlaSetEventCallback(_ handle: OpaquePointer?, _ function: parla_event_callback?, _ userData: UnsafeMutableRawPointer?)
    -> parla_status
{
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    let address = function.map { UInt(bitPattern: unsafeBitCast($0, to: Int.self)) } ?? 0
    box.callback.withLock { $0 = .init(function: address, userData: UInt(bitPattern: userData)) }
    return succeed()
}

@_cdecl("parla_prepare")
public func parlaPrepare(_ handle: OpaquePointer?) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    let synthesizer = box.synthesizer
    switch blocking({ try await synthesizer.prepareToSpeak() }) {
    case .success: return succeed()
    case .failure(let error): return fail(error)
    }
}

@_cdecl("parla_speak")
public func parlaSpeak(_ handle: OpaquePointer?, _ utterance: OpaquePointer?, _ id: UnsafeMutablePointer<UInt64>?) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let u = utteranceBox(utterance) else { return PARLA_ERROR_INVALID_HANDLE }
    let given = box.submit(u.settings.withLock { $0 })
    id?.pointee = UInt64(max(given.rawValue, 0))
    return succeed()
}

@_cdecl("parla_speak_text")
public func parlaSpeakText(_ handle: OpaquePointer?, _ text: UnsafePointer<CChar>?, _ id: UnsafeMutablePointer<UInt64>?) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let text = string(text, "the text") else { return text == nil ? PARLA_ERROR_INVALID_ARGUMENT : PARLA_ERROR_INVALID_UTF8 }
    let given = box.submit(.init(utterance: Utterance(string: text)))
    id?.pointee = UInt64(max(given.rawValue, 0))
    return succeed()
}

@_cdecl("parla_announce")
public func parlaAnnounce(
    _ handle: OpaquePointer?, _ text: UnsafePointer<CChar>?, _ value: parla_priority, _ queue: Int32, _ id: UnsafeMutablePointer<UInt64>?
) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let p = priority(value) else {
        return fail(PARLA_ERROR_INVALID_ARGUMENT, "priority \(value.rawValue) is not a parla_priority (0-3)")
    }
    guard let text = string(text, "the text") else { return text == nil ? PARLA_ERROR_INVALID_ARGUMENT : PARLA_ERROR_INVALID_UTF8 }
    let given = box.submit(.init(utterance: Utterance(string: text), priority: p ?? .default, queued: queue != 0))
    id?.pointee = UInt64(max(given.rawValue, 0))
    return succeed()
}

@_cdecl("parla_wait")
public func parlaWait(_ handle: OpaquePointer?, _ id: UInt64, _ timeout: Int64, _ kind: UnsafeMutablePointer<parla_event_kind>?)
    -> parla_status
{
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    if parla_internal_in_callback() != 0 {
        return fail(
            PARLA_ERROR_FAILED, "parla_wait cannot be called from the event callback: the event it waits for is delivered on that thread")
    }
    switch box.wait(Int(clamping: id), timeoutNanoseconds: timeout) {
    case .ended(let k):
        kind?.pointee = k
        return succeed()
    case .unknown:
        return fail(
            PARLA_ERROR_INVALID_ARGUMENT,
            "utterance \(id) was not given by this synthesizer (or ended more than \(SynthesizerBox.endedKept) utterances ago)")
    case .timedOut:
        return fail(PARLA_ERROR_TIMEOUT, "utterance \(id) had not ended after \(Double(timeout) / 1e9) s")
    }
}

func boundary(_ value: parla_boundary) -> SpeechBoundary? {
    switch value {
    case PARLA_BOUNDARY_IMMEDIATE: return .immediate
    case PARLA_BOUNDARY_WORD: return .word
    default: return nil
    }
}

@_cdecl("parla_stop")
public func parlaStop(_ handle: OpaquePointer?, _ value: parla_boundary, _ stopped: UnsafeMutablePointer<Int32>?) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let b = boundary(value) else {
        return fail(PARLA_ERROR_INVALID_ARGUMENT, "boundary \(value.rawValue) is not a parla_boundary (0-1)")
    }
    let did = box.synthesizer.stop(at: b)
    stopped?.pointee = did ? 1 : 0
    return succeed()
}

@_cdecl("parla_pause")
public func parlaPause(_ handle: OpaquePointer?, _ value: parla_boundary) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let b = boundary(value) else {
        return fail(PARLA_ERROR_INVALID_ARGUMENT, "boundary \(value.rawValue) is not a parla_boundary (0-1)")
    }
    _ = box.synthesizer.pause(at: b)
    return succeed()
}

@_cdecl("parla_continue")
public func parlaContinue(_ handle: OpaquePointer?) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    _ = box.synthesizer.continue()
    return succeed()
}

/// A live setting of synthesizer `handle`: `value`, checked against `range`, given to `apply`.
private func setLive(
    _ handle: OpaquePointer?, _ value: Double, _ name: String, _ range: ClosedRange<Double>,
    _ apply: (SpeechSynthesizer, Double) throws(ParlaError) -> Void
) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let value = checked(value, name, range) else { return PARLA_ERROR_OUT_OF_RANGE }
    do throws(ParlaError) {
        try apply(box.synthesizer, value)
        return succeed()
    } catch {
        return fail(error)
    }
}

@_cdecl("parla_set_rate")
public func parlaSetRate(_ handle: OpaquePointer?, _ rate: Double) -> parla_status {
    setLive(handle, rate, "rate", LiveProsody.rateRange) { (s, v) throws(ParlaError) in try s.setRate(v) }
}

@_cdecl("parla_set_pitch")
public func parlaSetPitch(_ handle: OpaquePointer?, _ pitch: Double) -> parla_status {
    setLive(handle, pitch, "pitch", LiveProsody.pitchRange) { (s, v) throws(ParlaError) in try s.setPitch(v) }
}

@_cdecl("parla_set_volume")
public func parlaSetVolume(_ handle: OpaquePointer?, _ volume: Double) -> parla_status {
    setLive(handle, volume, "volume", LiveProsody.volumeRange) { (s, v) throws(ParlaError) in try s.setVolume(v) }
}

@_cdecl("parla_is_speaking")
public func parlaIsSpeaking(_ handle: OpaquePointer?) -> Int32 {
    guard let box = synthesizerBox(handle) else { return -1 }
    return box.synthesizer.isSpeaking || box.synthesizer.isPaused ? 1 : 0
}
