import CParlaAPI
#if canImport(Glibc)
    import Glibc
#endif
import Dispatch
import ParlaCore
import Synchronization

/// The objects behind libparla's opaque handles. A handle is a number given out once (shifted
/// to look like an aligned pointer), never an address: a freed or made-up handle is not in the
/// table, and is refused instead of being followed.
final class HandleTable: Sendable {
    static let shared = HandleTable()

    private struct Table {
        var next: UInt = 1
        var objects: [UInt: any Sendable & AnyObject] = [:]
    }
    private let table = Mutex(Table())

    /// Registers `object` and returns its new handle.
    func add(_ object: any Sendable & AnyObject) -> OpaquePointer? {
        let key = table.withLock { t in
            let key = t.next
            t.next += 1
            t.objects[key] = object
            return key
        }
        return OpaquePointer(bitPattern: key << 4)
    }

    /// The object of `handle`, if it is live and a `T`.
    func get<T>(_ handle: OpaquePointer?, as type: T.Type) -> T? {
        guard let key = Self.key(handle) else { return nil }
        return table.withLock { $0.objects[key] } as? T
    }

    /// Removes `handle`'s object (if it is a `T`) and returns it.
    func remove<T>(_ handle: OpaquePointer?, as type: T.Type) -> T? {
        guard let key = Self.key(handle) else { return nil }
        return table.withLock { t -> T? in
            guard let object = t.objects[key] as? T else { return nil }
            t.objects[key] = nil
            return object
        }
    }

    private static func key(_ handle: OpaquePointer?) -> UInt? {
        guard let handle else { return nil }
        let bits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        guard bits & 0xF == 0 else { return nil }
        return bits >> 4
    }
}

// MARK: Errors

/// Sets the calling thread's message for parla_last_error() and returns `status`.
func fail(_ status: parla_status, _ message: String) -> parla_status {
    message.withCString { parla_internal_set_error($0, Int32(status.rawValue)) }
    return status
}

/// `error` as a status and message.
func fail(_ error: any Error) -> parla_status {
    guard let error = error as? ParlaError else { return fail(PARLA_ERROR_FAILED, "\(error)") }
    return fail(status(of: error), error.description)
}

func status(of error: ParlaError) -> parla_status {
    switch error.code {
    case .unknownVoice: return PARLA_ERROR_UNKNOWN_VOICE
    case .invalidLanguageTag, .noVoiceForLanguage: return PARLA_ERROR_UNKNOWN_LANGUAGE
    case .invalidSSML: return PARLA_ERROR_SSML
    case .invalidUTF8: return PARLA_ERROR_INVALID_UTF8
    case .unreadableInput, .unwritableOutput: return PARLA_ERROR_IO
    case .parameterOutOfRange: return PARLA_ERROR_OUT_OF_RANGE
    case .engineFailure, .engineUnavailable, .engineCrashed, .voiceUnavailable: return PARLA_ERROR_ENGINE
    case .audioServerUnavailable, .audioServerLost, .audioDeviceNotFound, .audioServerStalled, .audioFailure:
        return PARLA_ERROR_AUDIO
    case .emptyText, .invalidInput: return PARLA_ERROR_INVALID_ARGUMENT
    default: return PARLA_ERROR_FAILED
    }
}

/// Fills the caller's out-struct `out` with `value`, as far as the `size` it begins with says
/// (parla.h: structs that can grow): its fields up to that size, never past the struct this
/// library knows, and never the size itself. A size too small to hold any field (0: not set)
/// is refused.
func fill<T>(_ out: UnsafeMutablePointer<T>, with value: T, _ name: String) -> parla_status {
    let asked = UnsafeRawPointer(out).load(as: Int.self)
    let header = MemoryLayout<Int>.size
    guard asked > header else {
        return fail(PARLA_ERROR_INVALID_ARGUMENT, "out->size is \(asked): set it to sizeof(\(name)) before the call")
    }
    withUnsafeBytes(of: value) { bytes in
        let fields = UnsafeRawBufferPointer(rebasing: bytes[header..<min(asked, bytes.count)])
        UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(out) + header, count: fields.count).copyMemory(from: fields)
    }
    return succeed()
}

func succeed() -> parla_status {
    parla_internal_set_error("", 0)
    return PARLA_OK
}

/// The Swift string of a C argument: nil, with the thread's message set, if it is NULL or not
/// UTF-8.
func string(_ pointer: UnsafePointer<CChar>?, _ what: String) -> String? {
    guard let pointer else {
        _ = fail(PARLA_ERROR_INVALID_ARGUMENT, "\(what) is NULL")
        return nil
    }
    let length = strlen(pointer)
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: length)
    guard let text = String(validating: bytes, as: UTF8.self) else {
        var offset = 0
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        loop: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let s): offset += UTF8.width(s)
            case .emptyInput, .error: break loop
            }
        }
        _ = fail(PARLA_ERROR_INVALID_UTF8, "\(what) is not valid UTF-8 (at byte \(offset)): pass UTF-8 text")
        return nil
    }
    return text
}

/// A value in `range`, else nil with the thread's message set.
func checked(_ value: Double, _ name: String, _ range: ClosedRange<Double>) -> Double? {
    guard value.isFinite, range.contains(value) else {
        _ = fail(PARLA_ERROR_OUT_OF_RANGE, "\(name) \(value) is outside \(range.lowerBound)–\(range.upperBound)")
        return nil
    }
    return value
}

/// Runs `operation` on Swift's pool and waits for it on the calling (C) thread.
func blocking<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<Result<T, any Error>?>(nil)
    Task.detached {
        let r: Result<T, any Error>
        do { r = .success(try await operation()) } catch { r = .failure(error) }
        result.withLock { $0 = r }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 } ?? .failure(ParlaError.cancelled)
}

/// Where each Unicode scalar of a string starts, in UTF-8 bytes: offsets reported in scalars
/// become byte offsets into the caller's own string.
struct ByteOffsets: Sendable {
    private let starts: [Int]

    init(_ text: String) {
        var starts: [Int] = []
        starts.reserveCapacity(text.utf8.count / 2 + 1)
        var at = 0
        for scalar in text.unicodeScalars {
            starts.append(at)
            at += UTF8.width(scalar)
        }
        starts.append(at)
        self.starts = starts
    }

    /// The byte offset of scalar offset `scalar` (clamped to the text).
    func byte(_ scalar: Int) -> Int64 {
        Int64(starts[min(max(scalar, 0), starts.count - 1)])
    }
}

/// C strings owned by a handle's object, made when it is built and freed with it (kept as
/// addresses, so that the object is plainly Sendable: nothing writes through them).
final class CStrings: Sendable {
    private let addresses: [UInt]

    /// Copies every string of `strings` (nil stays nil).
    init(_ strings: [String?]) {
        addresses = strings.map { s in s.flatMap { strdup($0) }.map { UInt(bitPattern: $0) } ?? 0 }
    }

    /// The copy of string `index`, nil for nil.
    subscript(index: Int) -> UnsafePointer<CChar>? {
        guard addresses.indices.contains(index) else { return nil }
        return UnsafePointer(bitPattern: addresses[index])
    }

    deinit { addresses.forEach { free(UnsafeMutableRawPointer(bitPattern: $0)) } }
}
