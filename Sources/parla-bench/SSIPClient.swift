import Dispatch
import ParlaIO
import ParlaCore
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// A minimal client of speech-dispatcher's SSIP protocol, for the benchmark: every line the
/// server sends is stamped with CLOCK_MONOTONIC as it arrives (a reader thread of its own), so an
/// event's time is when a client could first have seen it.
final class SSIPClient: Sendable {
    struct Message: Sendable {
        var code: Int
        var data: [String]
        var text: String
        var time: UInt64
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let fd: Int32
    private let replies = Mutex<[Message]>([])
    private let received = DispatchSemaphore(value: 0)
    private let eventLog = Mutex<[Message]>([])

    /// Connects to `address` (`unix_socket:PATH`, as in SPEECHD_ADDRESS) and names the client.
    init(address: String) throws {
        let path = address.hasPrefix("unix_socket:") ? String(address.dropFirst("unix_socket:".count)) : address
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw Failure(description: "socket path too long: \(path)") }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw Failure(description: "cannot connect to speech-dispatcher at \(path): errno \(errno)")
        }
        startThread(name: "ssip-reader") { [self] in readLoop() }
        try command("SET SELF CLIENT_NAME parla:bench:main")
        try command("SET SELF NOTIFICATION ALL on")
    }

    deinit { close(fd) }

    /// Events (7xx) received so far.
    var events: [Message] { eventLog.withLock { $0 } }

    /// Sends one command line and waits for its reply; a reply other than 2xx throws.
    @discardableResult
    func command(_ line: String) throws -> Message {
        try write(Array((line + "\r\n").utf8))
        return try reply(to: line)
    }

    /// Sends `text` as a SPEAK message. Returns the message id and the time just before the
    /// text's last byte was written (when the server could start on it).
    func speak(_ text: String) throws -> (id: Int, sent: UInt64) {
        try command("SPEAK")
        // Lines end in CR LF; a line starting with a dot gets a second one (the end is a lone dot).
        var body: [UInt8] = []
        var lineStart = true
        for b in text.utf8 where b != 13 {
            if b == 10 {
                body += [13, 10]
                lineStart = true
                continue
            }
            if lineStart && b == 46 { body.append(46) }
            lineStart = false
            body.append(b)
        }
        body += [13, 10, 46, 13, 10]
        let sent = monotonicNanoseconds()
        try write(body)
        let r = try reply(to: "SPEAK data")
        return (Int(r.data.first ?? "") ?? -1, sent)
    }

    /// Waits until an event with `code` for message `id` has arrived, or `timeout` passes.
    func wait(for code: Int, id: Int, timeout: Double = 30) async -> Message? {
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        while monotonicNanoseconds() < deadline {
            if let m = events.first(where: { $0.code == code && $0.messageID == id }) { return m }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    private func reply(to what: String) throws -> Message {
        guard received.wait(timeout: .now() + 10) == .success else { throw Failure(description: "no reply to \(what) within 10 s") }
        let m = replies.withLock { $0.removeFirst() }
        guard (200..<300).contains(m.code) else { throw Failure(description: "\(what): \(m.code) \(m.text)") }
        return m
    }

    private func write(_ bytes: [UInt8]) throws {
        guard writeAll(fd, bytes) == nil else { throw Failure(description: "speech-dispatcher closed the connection") }
    }

    private func readLoop() {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var data: [String] = []
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            let time = monotonicNanoseconds()
            buffer += chunk[..<n]
            while let cr = buffer.firstIndex(of: 13), cr + 1 < buffer.count, buffer[cr + 1] == 10 {
                let line = String(decoding: buffer[..<cr], as: UTF8.self)
                buffer.removeFirst(cr + 2)
                guard line.utf8.count >= 4, let code = Int(line.prefix(3)) else { continue }
                let rest = String(line.dropFirst(4))
                if line.dropFirst(3).first == "-" {
                    data.append(rest)
                    continue
                }
                let message = Message(code: code, data: data, text: rest, time: time)
                data = []
                if code / 100 == 7 {
                    eventLog.withLock { $0.append(message) }
                } else {
                    replies.withLock { $0.append(message) }
                    received.signal()
                }
            }
        }
    }
}

extension SSIPClient.Message {
    /// The message an event belongs to (its first data line).
    var messageID: Int { Int(data.first ?? "") ?? -1 }
    /// An index mark's name (its third data line).
    var mark: String? { code == 700 && data.count > 2 ? data[2] : nil }
}
