internal import CParlaEngineDriver
internal import CParlaEngineHost
import ParlaIO

#if canImport(Glibc)
    import Glibc
#endif

/// The type of a message between Parla and its engine host (see ``EngineHost``): a type byte,
/// a little-endian 32-bit payload length, and the payload. The numbers, and what each
/// payload holds, are in `parla_engine_wire.h`, which the host's side reads too.
struct EngineMessage: RawRepresentable, Equatable {
    var rawValue: UInt8
    init(rawValue: UInt8) { self.rawValue = rawValue }
    private init(_ value: Int) { rawValue = UInt8(truncatingIfNeeded: value) }

    // Parla → host
    static let speak = EngineMessage(PARLA_MSG_SPEAK)
    static let stop = EngineMessage(PARLA_MSG_STOP)
    static let listVoices = EngineMessage(PARLA_MSG_LIST_VOICES)
    static let begin = EngineMessage(PARLA_MSG_BEGIN)
    static let finish = EngineMessage(PARLA_MSG_FINISH)
    static let preload = EngineMessage(PARLA_MSG_PRELOAD)
    // host → Parla
    static let ready = EngineMessage(PARLA_MSG_READY)
    static let preloaded = EngineMessage(PARLA_MSG_PRELOADED)
    static let audio = EngineMessage(PARLA_MSG_AUDIO)
    static let event = EngineMessage(PARLA_MSG_EVENT)
    static let phonemes = EngineMessage(PARLA_MSG_PHONEMES)
    static let done = EngineMessage(PARLA_MSG_DONE)
    static let voiceList = EngineMessage(PARLA_MSG_VOICE_LIST)
    static let crashed = EngineMessage(PARLA_MSG_CRASHED)
}

/// An engine event as espeak-ng or a Piper voice reported it (untrusted: ``TimelineBuilder``
/// repairs it).
struct RawEngineEvent {
    enum Kind {
        case word
        case sentence
        /// The phonemes of the word at `position` (``phonemes``).
        case phonemes
    }
    var kind: Kind
    /// The engine's time is a guess (the kind's PARLA_ENGINE_EVENT_ESTIMATED bit).
    var estimated = false
    var position: Int32
    var length: Int32
    var sample: Int32
    /// For ``Kind/phonemes``: IPA.
    var phonemes = ""

    /// The phonemes (IPA, UTF-8 `bytes`) the word at `position` was spoken with.
    init(position: Int32, phonemes bytes: some Collection<UInt8>) {
        kind = .phonemes
        self.position = position
        length = 0
        sample = 0
        phonemes = String(decoding: bytes, as: UTF8.self)
    }

    /// The event of the engine driver's numbers (`parla_engine_driver.h`); nil for a kind
    /// Parla does not know.
    init?(kind: Int32, position: Int32, length: Int32, sample: Int32) {
        switch kind & ~Int32(PARLA_ENGINE_EVENT_ESTIMATED) {
        case Int32(PARLA_ENGINE_EVENT_WORD): self.kind = .word
        case Int32(PARLA_ENGINE_EVENT_SENTENCE): self.kind = .sentence
        default: return nil
        }
        estimated = kind & Int32(PARLA_ENGINE_EVENT_ESTIMATED) != 0
        self.position = position
        self.length = length
        self.sample = sample
    }
}

/// Builds messages.
struct MessageWriter {
    private(set) var bytes: [UInt8] = []

    mutating func begin(_ type: EngineMessage) -> Int {
        bytes.append(type.rawValue)
        let at = bytes.count
        bytes += [0, 0, 0, 0]
        return at
    }

    mutating func end(_ lengthAt: Int) {
        let n = UInt32(truncatingIfNeeded: bytes.count - lengthAt - 4)
        for i in 0..<4 { bytes[lengthAt + i] = UInt8(truncatingIfNeeded: n >> (8 * UInt32(i))) }
    }

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u32(_ v: UInt32) { for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) } }
    mutating func i32(_ v: Int32) { u32(UInt32(bitPattern: v)) }
    mutating func raw(_ p: UnsafeRawBufferPointer) { bytes.append(contentsOf: p) }

    mutating func message(_ type: EngineMessage, _ body: (inout MessageWriter) -> Void) {
        let at = begin(type)
        body(&self)
        end(at)
    }

    /// Writes everything to `fd`; false if the other end is gone.
    func write(to fd: Int32) -> Bool { writeFully(fd, bytes) }
}

/// Reads fields from a payload; every read is bounds-checked (a short payload reads zeros and
/// marks the reader invalid).
struct PayloadReader {
    /// The payload: a slice of the reader's buffer (``MessageReader``), read in place.
    let bytes: ArraySlice<UInt8>
    /// The next byte's index in `bytes`.
    var offset: Int
    var isValid = true

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        offset = bytes.startIndex
    }

    mutating func u8() -> UInt8 {
        guard offset < bytes.endIndex else { isValid = false; return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u32() -> UInt32 {
        guard offset + 4 <= bytes.endIndex else { isValid = false; offset = bytes.endIndex; return 0 }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * UInt32(i)) }
        offset += 4
        return v
    }

    mutating func i32() -> Int32 { Int32(bitPattern: u32()) }

    mutating func rest() -> ArraySlice<UInt8> {
        defer { offset = bytes.endIndex }
        return bytes[min(offset, bytes.endIndex)...]
    }
}
