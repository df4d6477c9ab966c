import Foundation
import ParlaIO
import Testing

/// The engine host's messages, read through a buffer: whole messages however the bytes
/// arrive, and garbage refused.
@Suite("MessageReader")
struct MessageReaderTests {
    func message(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [type, UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)] + payload
    }

    /// Writes `pieces` into a pipe one at a time (in writes of at most 16 KiB, which a pipe
    /// always takes), reading what is whole after each.
    func read(_ pieces: [[UInt8]], limit: Int = 64 << 20) -> (messages: [(UInt8, [UInt8])], atEnd: Bool) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return ([], false) }
        defer { close(fds[0]) }
        var reader = MessageReader(fd: fds[0], limit: limit)
        var out: [(UInt8, [UInt8])] = []
        var open = true
        let small = pieces.flatMap { piece in stride(from: 0, to: piece.count, by: 16384).map { Array(piece[$0..<min($0 + 16384, piece.count)]) } }
        for piece in small {
            _ = piece.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
            guard open, reader.fill() else {
                open = false
                continue
            }
            while let m = reader.next() { out.append((m.type, Array(m.payload))) }
        }
        close(fds[1])
        let more = open && reader.fill()
        return (out, !more)
    }

    @Test func wholeMessagesHoweverTheBytesArrive() {
        let audio = message(0x41, (0..<300).map { UInt8($0 & 0xFF) })
        let event = message(0x45, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
        let done = message(0x44, [])
        let all = audio + event + done
        let expected: [(UInt8, [UInt8])] = [(0x41, Array(audio.dropFirst(5))), (0x45, Array(event.dropFirst(5))), (0x44, [])]
        // At once, byte by byte, and cut in the middle of a header and of a payload.
        for pieces in [[all], all.map { [$0] }, [Array(all[0..<3]), Array(all[3..<200]), Array(all[200...])]] {
            let r = read(pieces)
            #expect(r.messages.map(\.0) == expected.map(\.0))
            #expect(r.messages.map(\.1) == expected.map(\.1))
            #expect(r.atEnd)
        }
    }

    @Test func aMessageLongerThanTheBufferAndGarbageRefused() {
        let long = message(0x41, [UInt8](repeating: 7, count: 200_000))
        #expect(read([long]).messages.first?.1.count == 200_000)
        // A header announcing more than the limit: nothing more is read.
        let r = read([message(0x41, [UInt8](repeating: 0, count: 100)) + message(0x44, [])], limit: 50)
        #expect(r.messages.isEmpty)
    }
}
