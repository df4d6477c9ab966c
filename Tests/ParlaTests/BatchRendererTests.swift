import Foundation
import Parla
import ParlaAudioTestSupport
import Synchronization
import Testing

/// The batch engine as a library: workers are this test program started again.
@Suite("BatchRenderer")
struct BatchRendererTests {
    @Test func rendersASequenceWithProgressAndSkipsWhatIsDone() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        var options = BatchRenderOptions(outputDirectory: dir, jobs: 2)
        options.timings = true
        let items = (1...6).map { BatchItem(id: "item\($0)", text: "Item \($0). Καλημέρα.") }
        var updates: [BatchProgress] = []
        for try await p in BatchRenderer(options: options).render(items) { updates.append(p) }
        let final = try #require(updates.last)
        #expect(final.isFinal)
        #expect(final.rendered == 6 && final.failed == 0 && final.skipped == 0)
        #expect(final.audio > .seconds(3))
        #expect((final.workerPeakBytes ?? 0) > 1_000_000)
        #expect(Set(updates.compactMap { $0.latest?.id }) == Set(items.map(\.id)))
        for item in items {
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent(item.id + ".wav").path))
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent(item.id + ".json").path))
        }
        // Rendered items are skipped the second time; a bad one fails alone.
        let more = items + [BatchItem(id: "bad", text: "x", pitch: 5)]
        var last = BatchProgress()
        for try await p in BatchRenderer(options: options).render(more) { last = p }
        #expect(last.skipped == 6 && last.failed == 1 && last.rendered == 0)
    }

    /// Leaving the loop over the progress stream stops the batch: no worker goes on taking
    /// items for a stream nobody reads.
    @Test func leavingTheLoopStopsTheBatch() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let renderer = BatchRenderer(options: BatchRenderOptions(outputDirectory: dir, jobs: 1))
        let counter = Mutex(0)
        for try await p in renderer.render({
            let n = counter.withLock { $0 += 1; return $0 }
            return n <= 5000 ? .item(BatchItem(id: "n\(n)", text: "Sentence \(n) of a long batch.")) : nil
        }) where p.latest != nil {
            break
        }
        // The run ends (without the stop, only after rendering all 5,000 items), and no item
        // is taken after it. (Items are read ahead of the workers: up to about 1,300 here
        // under a busy suite.)
        await renderer.waitForRunsToEnd()
        let taken = counter.withLock { $0 }
        #expect(taken < 5000, "the batch went on after the loop was left")
        await renderer.waitForRunsToEnd()  // at once: nothing runs
        #expect(counter.withLock { $0 } == taken)
    }

    @Test func stopFinishesTheItemsInFlight() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let renderer = BatchRenderer(options: BatchRenderOptions(outputDirectory: dir, jobs: 1))
        // The input asks to stop as it hands out its third item, as Ctrl-C at that moment would.
        let counter = Mutex(0)
        var last = BatchProgress()
        for try await p in renderer.render({
            let n = counter.withLock { $0 += 1; return $0 }
            if n == 3 { renderer.stop() }
            return n <= 200 ? .item(BatchItem(id: "n\(n)", text: "Sentence \(n) of a long batch.")) : nil
        }) {
            last = p
        }
        #expect(last.isFinal && last.stopped)
        #expect(last.rendered == 3)  // the item in flight was finished, no new one taken
        let wavs = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".wav") }
        #expect(wavs.sorted() == ["n1.wav", "n2.wav", "n3.wav"])
        let results = try String(contentsOf: dir.appendingPathComponent("results.jsonl"), encoding: .utf8)
        #expect(results.split(separator: "\n").count == 3)
    }
}
