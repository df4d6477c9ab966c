import Foundation
@testable import ParlaCore
import ParlaTestSupport
import Testing

/// Files appear under their names complete or not at all, unnamed (`O_TMPFILE`) or under a
/// hidden temporary name where the file system cannot do that.
@Suite("AtomicFile", .serialized)
struct AtomicFileTests {
    func names(_ dir: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
    }

    @Test(arguments: [true, false])
    func filesAppearWholeOrNotAtAll(unnamed: Bool) throws {
        let saved = AtomicFile.usesUnnamedFiles
        AtomicFile.usesUnnamedFiles = unnamed
        defer { AtomicFile.usesUnnamedFiles = saved }
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.path + "/a.bin"

        // A new file: nothing under the final name until commit; unnamed, nothing at all.
        let f = try AtomicFile(path: path)
        #expect((f.temporaryPath == nil) == unnamed)
        try f.write(Array(repeating: 7, count: 100_000))
        try f.overwrite([1, 2], at: 0)
        #expect(try names(dir) == (unnamed ? [] : [URL(fileURLWithPath: f.temporaryPath!).lastPathComponent]))
        try f.commit()
        #expect(try names(dir) == ["a.bin"])
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(data.count == 100_000 && data.prefix(3) == Data([1, 2, 7]))

        // Replacing it: the old file stays whole until the new one takes its place.
        let g = try AtomicFile(path: path)
        try g.write([9, 9, 9])
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == 100_000)
        try g.commit()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data([9, 9, 9]))
        #expect(try names(dir) == ["a.bin"])

        // Discarded: nothing changes and nothing is left behind.
        let h = try AtomicFile(path: path)
        try h.write([1])
        h.discard()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data([9, 9, 9]))
        #expect(try names(dir) == ["a.bin"])

        // Clear errors before anything is written.
        #expect(throws: ParlaError.unwritableOutput(path: dir.path + "/no/such/x.wav", reason: "the directory '\(dir.path)/no/such' does not exist")) {
            try AtomicFile(path: dir.path + "/no/such/x.wav")
        }
        #expect(throws: ParlaError.unwritableOutput(path: dir.path, reason: "it is a directory")) {
            try AtomicFile(path: dir.path)
        }
    }
}
