import Foundation
import ParlaIO
import ParlaCore
import ParlaTestSupport
import Testing

@Suite("LineReader")
struct LineReaderTests {
    /// Every line `LineReader` returns for `bytes` with `limit`, and whether each was cut.
    func lines(_ bytes: [UInt8], limit: Int = .max) throws -> [(String, Bool)] {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let url = dir.appendingPathComponent("in.txt")
        try Data(bytes).write(to: url)
        let fd = open(url.path, O_RDONLY)
        defer { close(fd) }
        var reader = LineReader(fd: fd, name: "in.txt", limit: limit)
        var out: [(String, Bool)] = []
        while let line = try reader.next() { out.append((String(decoding: line, as: UTF8.self), reader.lastLineWasCut)) }
        return out
    }

    @Test func linesEmptyLinesAndALastLineWithoutNewline() throws {
        let r = try lines(Array("one\n\ntwo\r\nthree".utf8))
        #expect(r.map(\.0) == ["one", "", "two\r", "three"])
        #expect(r.allSatisfy { !$0.1 })
        #expect(try lines([]).isEmpty)
        #expect(try lines(Array("\n".utf8)).map(\.0) == [""])
    }

    @Test func linesOverTheLimitAreCutAndTheRestDropped() throws {
        // Lines longer than the 64 KiB read block, cut at 100 000 bytes.
        let long = String(repeating: "a", count: 300_000)
        let r = try lines(Array("short\n\(long)\nafter\n\(long)".utf8), limit: 100_000)
        #expect(r.map { $0.0.count } == [5, 100_000, 5, 100_000])
        #expect(r.map(\.1) == [false, true, false, true])
        let exact = String(repeating: "b", count: 100_000)
        #expect(try lines(Array("\(exact)\nx".utf8), limit: 100_000).map(\.1) == [false, false])
    }

    @Test func manyLinesAcrossBlockBoundaries() throws {
        let text = (0..<50_000).map { "line \($0)" }.joined(separator: "\n") + "\n"
        let r = try lines(Array(text.utf8), limit: 20)
        #expect(r.count == 50_000)
        #expect(r.last?.0 == "line 49999")
        #expect(r.allSatisfy { !$0.1 })
    }

    /// Read and write failures are reported in the system's words (one helper for all of them).
    @Test func systemErrorsAreReportedInTheSystemsWords() {
        #expect(systemErrorMessage(ENOENT) == "No such file or directory")
        #expect(systemErrorMessage(EPIPE) == "Broken pipe")
        var reader = LineReader(fd: -1, name: "nothing")
        #expect(throws: ParlaError.unreadableInput(path: "nothing", reason: "Bad file descriptor")) { try reader.next() }
    }
}
