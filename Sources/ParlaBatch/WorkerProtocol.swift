internal import CParlaWorker
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
#if canImport(Glibc)
    import Glibc
#endif

/// What every render worker of a batch is told once, as the first line of its input.
struct RenderSettings: Codable, Sendable {
    var output: String
    var voicesDirectory: String
    var userVoicesDirectory: String?
    var piperVoiceDirectories: [String]
    var preferredVoices: [String: String]
    var timings: Bool
    var captions: Bool
    var language: String?
    var voice: SpeechVoice?
    var detectsLanguages: Bool
}

/// A worker's answer for one item, one JSON line.
struct WorkerResult: Decodable, Sendable, Equatable {  // written by `jsonLine`
    var id: String
    var ok: Bool
    var seconds: Double = 0
    var languages: [String] = []
    var voices: [String] = []
    var error: String?
    /// Set on the worker's first line instead of a result when it cannot start.
    var fatal: String?
    /// On the worker's last line, at the end of its input: its peak resident memory or its
    /// per-chunk processes', whichever is larger, in bytes.
    var peakBytes: Int?
}

extension WorkerResult {
    /// This result as one JSON line (what `JSONEncoder` would write, and `JSONDecoder` reads),
    /// written by hand: the encoder cost about half a percent of a batch.
    var jsonLine: [UInt8] {
        var s = "{\"id\":" + JSONText.quoted(id) + ",\"ok\":" + (ok ? "true" : "false")
        s += ",\"seconds\":" + (seconds.isFinite ? String(seconds) : "0")
        s += ",\"languages\":[" + languages.map(JSONText.quoted).joined(separator: ",") + "]"
        s += ",\"voices\":[" + voices.map(JSONText.quoted).joined(separator: ",") + "]"
        if let error { s += ",\"error\":" + JSONText.quoted(error) }
        if let fatal { s += ",\"fatal\":" + JSONText.quoted(fatal) }
        if let peakBytes { s += ",\"peakBytes\":\(peakBytes)" }
        return Array((s + "}\n").utf8)
    }
}

extension WorkerResult {
    /// A result line (without its line feed): read directly when it is exactly as ``jsonLine``
    /// writes it with no escaped character, else by JSONDecoder, which cost the orchestrator
    /// about 1% of a batch's CPU time. Nil if it is not a result.
    static func decode(_ line: [UInt8]) -> WorkerResult? {
        direct(line) ?? (try? JSONDecoder().decode(WorkerResult.self, from: Data(line)))
    }

    static func direct(_ line: [UInt8]) -> WorkerResult? {
        var c = ByteCursor(bytes: line)
        guard c.take(#"{"id":"#), let id = c.string(), c.take(#","ok":"#) else { return nil }
        let ok: Bool
        if c.take("true") { ok = true } else if c.take("false") { ok = false } else { return nil }
        guard c.take(#","seconds":"#), let seconds = c.number().flatMap(Double.init), seconds.isFinite,
            c.take(#","languages":"#), let languages = c.strings(),
            c.take(#","voices":"#), let voices = c.strings()
        else { return nil }
        var result = WorkerResult(id: id, ok: ok, seconds: seconds, languages: languages, voices: voices)
        if c.take(#","error":"#) {
            guard let error = c.string() else { return nil }
            result.error = error
        }
        if c.take(#","fatal":"#) {
            guard let fatal = c.string() else { return nil }
            result.fatal = fatal
        }
        if c.take(#","peakBytes":"#) {
            guard let peak = c.number().flatMap({ Int($0) }) else { return nil }
            result.peakBytes = peak
        }
        guard c.take("}"), c.atEnd else { return nil }
        return result
    }
}

/// Reads the few JSON shapes of the lines Parla writes itself (``WorkerResult/direct(_:)``,
/// the results log) from a line of bytes.
struct ByteCursor {
    let bytes: [UInt8]
    var index = 0
    var atEnd: Bool { index == bytes.count }

    /// Skips `literal` if the bytes continue with it.
    mutating func take(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard bytes.count - index >= n else { return false }
        for k in 0..<n where bytes[index + k] != literal.utf8Start[k] { return false }
        index += n
        return true
    }

    /// A string with no escapes and no control characters; nil (and a useless position) otherwise.
    mutating func string() -> String? {
        guard index < bytes.count, bytes[index] == 0x22 else { return nil }
        let start = index + 1
        var i = start
        while i < bytes.count, bytes[i] != 0x22 {
            if bytes[i] == 0x5C || bytes[i] < 0x20 { return nil }
            i += 1
        }
        guard i < bytes.count else { return nil }
        index = i + 1
        return String(validating: bytes[start..<i], as: UTF8.self)
    }

    /// `[]` or `["a","b",…]`.
    mutating func strings() -> [String]? {
        guard take("[") else { return nil }
        var list: [String] = []
        if take("]") { return list }
        repeat {
            guard let s = string() else { return nil }
            list.append(s)
        } while take(",")
        return take("]") ? list : nil
    }

    /// The text of a JSON number: `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`.
    mutating func number() -> String? {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
            return index - from
        }
        _ = take("-")
        let leadingZero = index < bytes.count && bytes[index] == 0x30
        let whole = digits()
        guard whole > 0, !(leadingZero && whole > 1) else { return nil }
        if take("."), digits() == 0 { return nil }
        if take("e") || take("E") {
            if !take("+") { _ = take("-") }
            guard digits() > 0 else { return nil }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }
}
