import Foundation
@testable import ParlaCore
import ParlaTestSupport
import Synchronization
import Testing
@testable import ParlaIO

/// Files appear under their names complete or not at all: unnamed (`O_TMPFILE`) and linked
/// into place, under a hidden temporary name where the file system cannot do that, or
/// copied to one where an unnamed file cannot be given a name.
@Suite("AtomicFile")
struct AtomicFileTests {
    enum Mode: CaseIterable, Sendable { case unnamed, named, unnamedButUnlinkable }

    func names(_ dir: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
    }

    func contents(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    @Test(arguments: Mode.allCases)
    func filesAppearWholeOrNotAtAll(mode: Mode) throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let unnamed = mode != .named && supportsUnnamedFiles(dir)
        let naming = AtomicFile.Naming(unnamed: mode != .named, fdPaths: mode == .unnamedButUnlinkable ? "/nonexistent/fd/" : "/proc/self/fd/")
        let path = dir.path + "/a.bin"
        let big = [UInt8](repeating: 7, count: 100_000)

        // A new file: nothing under the final name until commit; unnamed, nothing at all.
        let f = try AtomicFile(path: path, durable: true, naming: naming)
        #expect((f.temporaryPath == nil) == unnamed)
        try f.write(big)
        try f.overwrite([1, 2], at: 0)
        #expect(try names(dir) == (unnamed ? [] : [URL(fileURLWithPath: f.temporaryPath!).lastPathComponent]))
        try f.commit()
        #expect(try names(dir) == ["a.bin"])
        #expect(try contents(path) == Data([1, 2] + big.dropFirst(2)))
        // An unnamed file that could not be linked was copied, and later files use hidden names.
        #expect(naming.works.load(ordering: .relaxed) == (unnamed && mode == .unnamed))

        // Replacing it: the old file stays whole, whatever was written, until the new one
        // takes its place.
        let g = try AtomicFile(path: path, durable: false, naming: naming)
        try g.write([UInt8](repeating: 9, count: 70_000))
        try g.overwrite([8], at: 0)
        #expect(try contents(path).count == 100_000)
        try g.commit()
        #expect(try contents(path) == Data([8] + [UInt8](repeating: 9, count: 69_999)))
        #expect(try names(dir) == ["a.bin"])

        // Discarded: nothing changes and nothing is left behind.
        let h = try AtomicFile(path: path, durable: true, naming: naming)
        try h.write(big)
        try h.overwrite([1], at: 0)
        h.discard()
        #expect(try contents(path).count == 70_000)
        #expect(try names(dir) == ["a.bin"])

        // Clear errors before anything is written.
        #expect(throws: ParlaError.unwritableOutput(path: dir.path + "/no/such/x.wav", reason: "the directory '\(dir.path)/no/such' does not exist")) {
            try AtomicFile(path: dir.path + "/no/such/x.wav", durable: true, naming: naming)
        }
        #expect(throws: ParlaError.unwritableOutput(path: dir.path, reason: "it is a directory")) {
            try AtomicFile(path: dir.path, durable: true, naming: naming)
        }
    }
}
