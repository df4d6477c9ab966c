import ParlaIO

#if canImport(Glibc)
    import Glibc
#endif

/// The messages between Parla and its engine host (see ``EngineHost``; the host's side is
/// `engine_host.c`, which must agree): a type byte, a little-endian 32-bit payload length,
/// and the payload.
enum EngineMessage: UInt8 {
    // Parla → host
    /// Speak one run: seq u32, flags u32, rate, pitch, volume, punctuation (i32 each), the
    /// voice name (u16 length + UTF-8), then the text (UTF-8, the rest of the payload).
    case speak = 0x53
    /// Stop speaking run seq (u32) or any earlier one.
    case stop = 0x58
    /// List the installed voices.
    case listVoices = 0x56
    /// Begin utterance id (u32): the host forks a child from its loaded engine to speak it.
    case begin = 0x42
    /// The utterance is over: its child exits.
    case finish = 0x46
    /// Load the Piper voice whose model is at this path (UTF-8, the whole payload) in the host
    /// itself, so that the children it forks for utterances have it loaded.
    case preload = 0x50
    // host → Parla
    /// The engine is loaded: sample rate (i32; 0 and a message if it failed to load).
    case ready = 0x52
    /// Audio: native 16-bit samples.
    case audio = 0x41
    /// A voice asked for with `preload`: loaded (u32 1) or not (0, then why, UTF-8).
    case preloaded = 0x70
    /// An engine event: type u8, position i32, length i32, sample i32.
    case event = 0x45
    /// A run ended: seq u32, status i32 (``EngineRunStatus``), and for a failure, why (UTF-8,
    /// the rest of the payload, possibly empty).
    case done = 0x44
    /// The installed voices: names separated by newlines.
    case voiceList = 0x4C
    /// The child speaking utterance id (u32) died: the signal (u32, 0 if it exited in error).
    case crashed = 0x43
}

/// How one run ended in the engine.
enum EngineRunStatus: Int32 {
    case ok = 0
    case stopped = 1
    case unknownVoice = 2
    case synthesisFailed = 3
}

/// An engine event as espeak-ng reported it (untrusted: ``TimelineBuilder`` repairs it).
struct RawEngineEvent {
    enum Kind: UInt8 {
        case word = 1
        case sentence = 2
    }
    var kind: Kind
    /// The engine's time is a guess (sent as the kind's top bit).
    var estimated = false
    var position: Int32
    var length: Int32
    var sample: Int32
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
    let bytes: [UInt8]
    var offset = 0
    var isValid = true

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func u8() -> UInt8 {
        guard offset < bytes.count else { isValid = false; return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u32() -> UInt32 {
        guard offset + 4 <= bytes.count else { isValid = false; offset = bytes.count; return 0 }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * UInt32(i)) }
        offset += 4
        return v
    }

    mutating func i32() -> Int32 { Int32(bitPattern: u32()) }

    mutating func rest() -> ArraySlice<UInt8> {
        defer { offset = bytes.count }
        return bytes[min(offset, bytes.count)...]
    }
}

/// Writes all of `bytes` to `fd`, retrying after signals and partial writes; false on error
/// (a socket whose reader is gone fails with EPIPE, without SIGPIPE).
///
/// Not ParlaIO's `writeAll`: a socket is written with `send(MSG_NOSIGNAL)`, so that an engine
/// host that died cannot kill the program Parla runs in, and the library need not ignore
/// SIGPIPE for the whole process behind its host's back.
package func writeFully(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { buf in
        guard var p = buf.baseAddress else { return true }
        var left = buf.count
        while left > 0 {
            var n = Glibc.send(fd, p, left, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == ENOTSOCK { n = Glibc.write(fd, p, left) }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            p += n
            left -= n
        }
        return true
    }
}

/// Fills `buffer` from `fd`; false at end of file or on error.
func readFully(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard let base = buffer.baseAddress else { return true }
    var got = 0
    while got < buffer.count {
        let n = readSome(fd, into: UnsafeMutableRawBufferPointer(start: base + got, count: buffer.count - got))
        if n <= 0 { return false }
        got += n
    }
    return true
}

/// Reads one message from `fd` (blocking); nil at end of file, on error or for a message
/// longer than `limit` bytes.
func readMessage(_ fd: Int32, limit: Int = 64 << 20) -> (type: UInt8, payload: [UInt8])? {
    var header = [UInt8](repeating: 0, count: 5)
    guard header.withUnsafeMutableBytes({ readFully(fd, $0) }) else { return nil }
    let length = Int(UInt32(header[1]) | UInt32(header[2]) << 8 | UInt32(header[3]) << 16 | UInt32(header[4]) << 24)
    guard length <= limit else { return nil }
    var payload = [UInt8](repeating: 0, count: length)
    guard payload.withUnsafeMutableBytes({ readFully(fd, $0) }) else { return nil }
    return (header[0], payload)
}
