import CParlaAPI
#if canImport(Glibc)
    import Glibc
#endif
import FoundationEssentials
import Parla
import ParlaCore
import ParlaIO
import Dispatch
import Synchronization

// MARK: Timelines

/// A parla_timeline: the words and sentences of a rendered file, in the caller's offsets.
final class TimelineBox: Sendable {
    struct Item: Sendable {
        var bytes: Range<Int64>
        var scalars: Range<Int>
        var start: Int64
        var end: Int64
        var estimated: Bool
    }
    let words: [Item]
    let sentences: [Item]
    let duration: Int64
    let sampleRate: Int
    /// Per word, then per sentence: its text, language and voice.
    let strings: CStrings

    init(_ timeline: SpeechTimeline, input: String) {
        let offsets = ByteOffsets(input)
        let scalars = Array(input.unicodeScalars)
        let rate = Int64(max(timeline.sampleRate, 1))
        func nanoseconds(_ sample: Int) -> Int64 { Int64(sample) * 1_000_000_000 / rate }
        func text(_ r: Range<Int>) -> String {
            let lower = min(max(r.lowerBound, 0), scalars.count), upper = min(max(r.upperBound, lower), scalars.count)
            var s = String.UnicodeScalarView()
            s.append(contentsOf: scalars[lower..<upper])
            return String(s)
        }
        func segment(_ sample: Int, _ index: Int?) -> SegmentMark? {
            if let index, timeline.segments.indices.contains(index) { return timeline.segments[index] }
            return timeline.segments.first { $0.startSample <= sample && sample < $0.endSample }
        }
        func item(_ r: Range<Int>, _ start: Int, _ end: Int, _ estimated: Bool) -> Item {
            Item(
                bytes: offsets.byte(r.lowerBound)..<offsets.byte(r.upperBound), scalars: r, start: nanoseconds(start),
                end: nanoseconds(end), estimated: estimated)
        }
        words = timeline.words.map { item($0.range, $0.startSample, $0.endSample, $0.isEstimated) }
        sentences = timeline.sentences.map { item($0.range, $0.startSample, $0.endSample, $0.isEstimated) }
        var texts: [String?] = []
        for w in timeline.words {
            let part = segment(w.startSample, w.segment)
            texts += [w.word, part?.language.identifier, part?.voice, w.phonemes]
        }
        for s in timeline.sentences {
            let part = segment(s.startSample, nil)
            texts += [text(s.range), part?.language.identifier, part?.voice, nil]
        }
        strings = CStrings(texts)
        duration = nanoseconds(timeline.sampleCount)
        sampleRate = timeline.sampleRate
    }

    func range(_ index: Int, sentence: Bool) -> parla_timed_range? {
        let items = sentence ? sentences : words
        guard items.indices.contains(index) else { return nil }
        let i = items[index]
        let base = 4 * (sentence ? words.count + index : index)
        return parla_timed_range(
            size: MemoryLayout<parla_timed_range>.size, byte_start: i.bytes.lowerBound, byte_end: i.bytes.upperBound,
            scalar_start: Int64(i.scalars.lowerBound), scalar_end: Int64(i.scalars.upperBound), start_ns: i.start, end_ns: i.end,
            text: strings[base], language: strings[base + 1], voice: strings[base + 2], estimated: i.estimated ? 1 : 0,
            phonemes: strings[base + 3])
    }
}

@_cdecl("parla_write_wav")
public func parlaWriteWAV(
    _ handle: OpaquePointer?, _ utterance: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ timeline: UnsafeMutablePointer<OpaquePointer?>?
) -> parla_status {
    timeline?.pointee = nil
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let u = utteranceBox(utterance) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let file = string(path, "the path") else { return path == nil ? PARLA_ERROR_INVALID_ARGUMENT : PARLA_ERROR_INVALID_UTF8 }
    if parla_internal_in_callback() != 0 {
        return fail(PARLA_ERROR_FAILED, "parla_write_wav cannot be called from the event callback")
    }
    let settings = u.settings.withLock { $0 }
    let synthesizer = box.synthesizer
    switch blocking({ try await synthesizer.write(settings.utterance, to: URL(filePath: file)) }) {
    case .success(let made):
        if let timeline { timeline.pointee = HandleTable.shared.add(TimelineBox(made, input: settings.utterance.inputText)) }
        return succeed()
    case .failure(let error):
        return fail(error)
    }
}

private func timelineBox(_ handle: OpaquePointer?) -> TimelineBox? {
    guard let box = HandleTable.shared.get(handle, as: TimelineBox.self) else {
        _ = fail(PARLA_ERROR_INVALID_HANDLE, handle == nil ? "the timeline is NULL" : "the timeline was freed, or is not one")
        return nil
    }
    return box
}

@_cdecl("parla_timeline_word_count")
public func parlaTimelineWordCount(_ handle: OpaquePointer?) -> Int { timelineBox(handle)?.words.count ?? 0 }

@_cdecl("parla_timeline_sentence_count")
public func parlaTimelineSentenceCount(_ handle: OpaquePointer?) -> Int { timelineBox(handle)?.sentences.count ?? 0 }

private func timedRange(_ handle: OpaquePointer?, _ index: Int, sentence: Bool, _ out: UnsafeMutablePointer<parla_timed_range>?)
    -> parla_status
{
    guard let box = timelineBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let out else { return fail(PARLA_ERROR_INVALID_ARGUMENT, "out is NULL") }
    guard let range = box.range(index, sentence: sentence) else {
        let count = sentence ? box.sentences.count : box.words.count
        return fail(PARLA_ERROR_OUT_OF_RANGE, "index \(index) is past the \(count) \(sentence ? "sentences" : "words")")
    }
    return fill(out, with: range, "parla_timed_range")
}

@_cdecl("parla_timeline_word")
public func parlaTimelineWord(_ handle: OpaquePointer?, _ index: Int, _ out: UnsafeMutablePointer<parla_timed_range>?) -> parla_status {
    timedRange(handle, index, sentence: false, out)
}

@_cdecl("parla_timeline_sentence")
public func parlaTimelineSentence(_ handle: OpaquePointer?, _ index: Int, _ out: UnsafeMutablePointer<parla_timed_range>?) -> parla_status {
    timedRange(handle, index, sentence: true, out)
}

@_cdecl("parla_timeline_duration_ns")
public func parlaTimelineDurationNS(_ handle: OpaquePointer?) -> Int64 { timelineBox(handle)?.duration ?? 0 }

@_cdecl("parla_timeline_sample_rate")
public func parlaTimelineSampleRate(_ handle: OpaquePointer?) -> Int32 { Int32(clamping: timelineBox(handle)?.sampleRate ?? 0) }

@_cdecl("parla_timeline_free")
public func parlaTimelineFree(_ handle: OpaquePointer?) { _ = HandleTable.shared.remove(handle, as: TimelineBox.self) }

// MARK: Voices

/// A parla_voice_list: six strings per voice, and its sample rate.
final class VoiceListBox: Sendable {
    let count: Int
    let strings: CStrings
    let rates: [Int]

    init(_ voices: [SpeechVoice]) {
        count = voices.count
        strings = CStrings(
            voices.flatMap { v -> [String?] in
                [v.identifier, v.name, v.engine, v.languages.map(\.identifier).joined(separator: ","), v.quality]
            })
        // espeak-ng's voices do not say: they all speak at the engine's 22,050 Hz.
        rates = voices.map { $0.sampleRate ?? ($0.engine == SpeechVoice.piperEngine ? 0 : 22050) }
    }
}

@_cdecl("parla_voices")
public func parlaVoices(_ list: UnsafeMutablePointer<OpaquePointer?>?) -> parla_status {
    guard let list else { return fail(PARLA_ERROR_INVALID_ARGUMENT, "list is NULL") }
    list.pointee = nil
    _ = locatedLibrary
    do throws(ParlaError) {
        let catalog = try VoiceCatalog.default()
        list.pointee = HandleTable.shared.add(VoiceListBox(catalog.voices))
        return succeed()
    } catch {
        return fail(error)
    }
}

@_cdecl("parla_voice_list_count")
public func parlaVoiceListCount(_ handle: OpaquePointer?) -> Int { HandleTable.shared.get(handle, as: VoiceListBox.self)?.count ?? 0 }

@_cdecl("parla_voice_list_get")
public func parlaVoiceListGet(_ handle: OpaquePointer?, _ index: Int, _ out: UnsafeMutablePointer<parla_voice>?) -> parla_status {
    guard let box = HandleTable.shared.get(handle, as: VoiceListBox.self) else {
        return fail(PARLA_ERROR_INVALID_HANDLE, "the voice list is NULL, freed, or not one")
    }
    guard let out else { return fail(PARLA_ERROR_INVALID_ARGUMENT, "out is NULL") }
    guard index >= 0, index < box.count else { return fail(PARLA_ERROR_OUT_OF_RANGE, "index \(index) is past the \(box.count) voices") }
    let s = 5 * index
    let voice = parla_voice(
        size: MemoryLayout<parla_voice>.size, identifier: box.strings[s], name: box.strings[s + 1], engine: box.strings[s + 2],
        languages: box.strings[s + 3], quality: box.strings[s + 4], sample_rate: Int32(clamping: box.rates[index]))
    return fill(out, with: voice, "parla_voice")
}

@_cdecl("parla_voice_list_free")
public func parlaVoiceListFree(_ handle: OpaquePointer?) { _ = HandleTable.shared.remove(handle, as: VoiceListBox.self) }

// MARK: Detection

/// A parla_segment_list: the detector's segments in the caller's offsets.
final class SegmentListBox: Sendable {
    let segments: [DetectedSegment]
    let bytes: [Range<Int64>]
    let languages: CStrings

    init(_ segments: [DetectedSegment], text: String) {
        let offsets = ByteOffsets(text)
        self.segments = segments
        bytes = segments.map { offsets.byte($0.range.lowerBound)..<offsets.byte($0.range.upperBound) }
        languages = CStrings(segments.map { $0.language?.identifier })
    }
}

private let detector = Result { () throws(ParlaError) in
    try LanguageDetector.load(catalog: VoiceCatalog.default())
}

@_cdecl("parla_detect")
public func parlaDetect(_ text: UnsafePointer<CChar>?, _ list: UnsafeMutablePointer<OpaquePointer?>?) -> parla_status {
    guard let list else { return fail(PARLA_ERROR_INVALID_ARGUMENT, "list is NULL") }
    list.pointee = nil
    guard let text = string(text, "the text") else { return text == nil ? PARLA_ERROR_INVALID_ARGUMENT : PARLA_ERROR_INVALID_UTF8 }
    _ = locatedLibrary
    do throws(ParlaError) {
        let segments = try detector.get().detect(text)
        list.pointee = HandleTable.shared.add(SegmentListBox(segments, text: text))
        return succeed()
    } catch {
        return fail(error)
    }
}

@_cdecl("parla_segment_list_count")
public func parlaSegmentListCount(_ handle: OpaquePointer?) -> Int {
    HandleTable.shared.get(handle, as: SegmentListBox.self)?.segments.count ?? 0
}

@_cdecl("parla_segment_list_get")
public func parlaSegmentListGet(_ handle: OpaquePointer?, _ index: Int, _ out: UnsafeMutablePointer<parla_segment>?) -> parla_status {
    guard let box = HandleTable.shared.get(handle, as: SegmentListBox.self) else {
        return fail(PARLA_ERROR_INVALID_HANDLE, "the segment list is NULL, freed, or not one")
    }
    guard let out else { return fail(PARLA_ERROR_INVALID_ARGUMENT, "out is NULL") }
    guard box.segments.indices.contains(index) else {
        return fail(PARLA_ERROR_OUT_OF_RANGE, "index \(index) is past the \(box.segments.count) segments")
    }
    let s = box.segments[index]
    let segment = parla_segment(
        size: MemoryLayout<parla_segment>.size, byte_start: box.bytes[index].lowerBound, byte_end: box.bytes[index].upperBound,
        scalar_start: Int64(s.range.lowerBound), scalar_end: Int64(s.range.upperBound), language: box.languages[index],
        confidence: s.confidence)
    return fill(out, with: segment, "parla_segment")
}

@_cdecl("parla_segment_list_free")
public func parlaSegmentListFree(_ handle: OpaquePointer?) { _ = HandleTable.shared.remove(handle, as: SegmentListBox.self) }

// MARK: Streaming

@_cdecl("parla_synthesize")
public func parlaSynthesize(
    _ handle: OpaquePointer?, _ utterance: OpaquePointer?, _ callback: parla_chunk_callback?, _ userData: UnsafeMutableRawPointer?
) -> parla_status {
    synthesize(handle, utterance, callback, userData, forPlayback: false)
}

@_cdecl("parla_synthesize_for_playback")
public func parlaSynthesizeForPlayback(
    _ handle: OpaquePointer?, _ utterance: OpaquePointer?, _ callback: parla_chunk_callback?, _ userData: UnsafeMutableRawPointer?
) -> parla_status {
    synthesize(handle, utterance, callback, userData, forPlayback: true)
}

private func synthesize(
    _ handle: OpaquePointer?, _ utterance: OpaquePointer?, _ callback: parla_chunk_callback?, _ userData: UnsafeMutableRawPointer?,
    forPlayback: Bool
) -> parla_status {
    guard let box = synthesizerBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let u = utteranceBox(utterance) else { return PARLA_ERROR_INVALID_HANDLE }
    guard let callback else { return fail(PARLA_ERROR_INVALID_ARGUMENT, "the callback is NULL") }
    let settings = u.settings.withLock { $0 }
    let offsets = ByteOffsets(settings.utterance.inputText)
    // Synthesis runs on Parla's side; its events are handed to this (the caller's) thread.
    let queue = Mutex<(events: [SynthesisEvent], done: Result<Void, any Error>?)>(([], nil))
    let ready = DispatchSemaphore(value: 0)
    let stream = box.synthesizer.stream(settings.utterance, forPlayback: forPlayback)
    let task = Task.detached {
        do {
            for try await event in stream {
                queue.withLock { $0.events.append(event) }
                ready.signal()
            }
            queue.withLock { $0.done = .success(()) }
        } catch {
            queue.withLock { $0.done = .failure(error) }
        }
        ready.signal()
    }
    var rate: Int32 = 0  // the audio's, for the words and sentences too
    // SSML marks, each reached where the first word that does not end before it starts (as
    // live speech reaches them); those after the last word, where the audio ends.
    let marks = settings.utterance.markPositions
    var nextMark = 0
    var audioEnd = 0
    func deliverMarks(before limit: Int, at sample: Int) -> Bool {
        while nextMark < marks.count, marks[nextMark].inputOffset < limit {
            let mark = marks[nextMark]
            nextMark += 1
            if deliverMark(mark.name, mark.inputOffset, sample, rate, offsets, callback, userData) != 0 { return false }
        }
        return true
    }
    while true {
        ready.wait()
        let (events, done) = queue.withLock { q in
            let taken = q.events
            q.events.removeAll()
            return (taken, q.done)
        }
        for event in events {
            if case .audio(let buffer) = event { audioEnd = max(audioEnd, buffer.startSample + buffer.samples.count) }
            if case .word(let w) = event, !deliverMarks(before: w.range.upperBound, at: w.startSample) {
                task.cancel()
                return succeed()
            }
            if deliver(event, offsets, &rate, callback, userData) != 0 {
                task.cancel()
                return succeed()
            }
        }
        switch done {
        case .success?:
            _ = deliverMarks(before: .max, at: audioEnd)
            return succeed()
        case .failure(let error)?: return fail(error)
        case nil: continue
        }
    }
}

/// Calls `callback` with an SSML mark at input offset `offset`, reached at `sample`.
private func deliverMark(
    _ name: String, _ offset: Int, _ sample: Int, _ rate: Int32, _ offsets: ByteOffsets, _ callback: parla_chunk_callback,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    var chunk = spanChunk(PARLA_CHUNK_MARK, offset..<offset, from: sample, to: sample, rate: rate, offsets)
    return call(callback, &chunk, text: name, userData)
}

/// Calls `callback` with `event` as a parla_chunk; its answer (non-zero: stop).
private func deliver(
    _ event: SynthesisEvent, _ offsets: ByteOffsets, _ rate: inout Int32, _ callback: parla_chunk_callback,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    switch event {
    case .audio(let buffer):
        rate = Int32(clamping: buffer.sampleRate)
        var chunk = parla_chunk()
        chunk.size = MemoryLayout<parla_chunk>.size
        chunk.kind = PARLA_CHUNK_AUDIO
        chunk.sample_rate = rate
        chunk.byte_start = -1
        chunk.byte_end = -1
        chunk.scalar_start = -1
        chunk.scalar_end = -1
        chunk.sample = Int64(buffer.startSample)
        chunk.end_sample = Int64(buffer.startSample + buffer.samples.count)
        chunk.sample_count = buffer.samples.count
        return buffer.samples.withUnsafeBufferPointer { samples in
            chunk.samples = samples.baseAddress
            return callback(&chunk, userData)
        }
    case .word(let w):
        var chunk = spanChunk(PARLA_CHUNK_WORD, w.range, from: w.startSample, to: w.endSample, rate: rate, offsets)
        return call(callback, &chunk, text: w.word, userData)
    case .sentence(let s):
        var chunk = spanChunk(PARLA_CHUNK_SENTENCE, s.range, from: s.startSample, to: s.endSample, rate: rate, offsets)
        return callback(&chunk, userData)
    case .segment:
        return 0
    }
}

/// A chunk for `range` of the input (scalar offsets, with their bytes), heard from sample
/// `start` to `end`.
private func spanChunk(
    _ kind: parla_chunk_kind, _ range: Range<Int>, from start: Int, to end: Int, rate: Int32, _ offsets: ByteOffsets
) -> parla_chunk {
    var chunk = parla_chunk()
    chunk.size = MemoryLayout<parla_chunk>.size
    chunk.kind = kind
    chunk.sample_rate = rate
    chunk.sample = Int64(start)
    chunk.end_sample = Int64(end)
    chunk.scalar_start = Int64(range.lowerBound)
    chunk.scalar_end = Int64(range.upperBound)
    chunk.byte_start = offsets.byte(range.lowerBound)
    chunk.byte_end = offsets.byte(range.upperBound)
    return chunk
}

/// Calls `callback` with `chunk` carrying `text` (valid during the call).
private func call(
    _ callback: parla_chunk_callback, _ chunk: inout parla_chunk, text: String, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    text.withCString { pointer in
        chunk.text = pointer
        return callback(&chunk, userData)
    }
}
