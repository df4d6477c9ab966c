internal import CParlaWorker
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
#if canImport(Glibc)
    import Glibc
#endif

/// A run of consecutive input items that one forked process renders in order (see
/// ``RenderWorker``). Chunks are cut from the input by ``RenderChunk/Builder``, the same way
/// whatever the number of jobs, so every item is spoken after the same predecessors.
struct RenderChunk: Codable, Sendable {
    struct Entry: Codable, Sendable {
        var item: BatchItem
        /// Spoken with its audio discarded, only to bring the engine to the state in which the
        /// items after it were (or will be) spoken: an item done by an earlier run, or one
        /// answered before its worker died.
        var replay: Bool
    }
    let entries: [Entry]
    /// The items whose results are expected, in order.
    let rendered: [BatchItem]
    /// For the orchestrator only (never sent; empty in a worker): the place of each of
    /// `rendered` among the batch's result lines, which `results.jsonl` gets in this order.
    let sequence: [Int]

    init(entries: [Entry], sequence: [Int]) {
        self.entries = entries
        rendered = entries.filter { !$0.replay }.map(\.item)
        self.sequence = sequence
    }

    private enum CodingKeys: String, CodingKey { case entries }

    init(from decoder: any Decoder) throws {
        self.init(entries: try decoder.container(keyedBy: CodingKeys.self).decode([Entry].self, forKey: .entries), sequence: [])
    }

    /// A chunk closes after the item that brings its texts to this many bytes (about 2
    /// minutes of speech, 0.15 s of synthesis): the fork per chunk is then a small part of
    /// the chunk's work, and a chunk is short enough to balance the workers and to stop soon.
    static let maxWeight = 2000
    /// The same when Piper voices may speak: about 15 s of speech, some 1.5 s of synthesis on
    /// one core, so that a few items' chunks still spread over every worker.
    static let maxNeuralWeight = 200
    /// … or once it holds this many items.
    static let maxItems = 64

    /// What to send again after the worker rendering this chunk died with `answered` of its
    /// items answered: the next item is failed by the caller, and everything up to it,
    /// itself included, is replayed (a worker never speaks itself, so it was most likely
    /// killed from outside; if that item's speech really kills its process, the worker
    /// leaves it out); the items after it are rendered. Nil if none is left to render.
    func remainder(afterAnswering answered: Int) -> RenderChunk? {
        var seen = 0
        for (index, entry) in entries.enumerated() where !entry.replay {
            if seen == answered {
                let rest = entries[(index + 1)...]
                guard rest.contains(where: { !$0.replay }) else { return nil }
                return RenderChunk(
                    entries: entries[...index].map { Entry(item: $0.item, replay: true) } + rest,
                    sequence: Array(sequence.dropFirst(answered + 1)))
            }
            seen += 1
        }
        return nil
    }

    /// The weight of `item` towards ``maxWeight``: its text's bytes, or its file's size.
    static func weight(of item: BatchItem) -> Int {
        guard let file = item.textFile else { return item.text.utf8.count }
        var st = stat()
        return stat(file.path(percentEncoded: false), &st) == 0 ? Int(st.st_size) : maxWeight
    }
}
