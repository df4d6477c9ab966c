internal import CParlaWorker
import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// How a batch is rendered.
public struct BatchRenderOptions: Sendable {
    /// Where `ID.wav` (and `ID.json`, `ID.vtt`) and `results.jsonl` are written; created if needed.
    public var outputDirectory: URL
    /// Worker processes (default: one per core).
    public var jobs: Int
    /// Also write `ID.json` word timings.
    public var timings = false
    /// Also write `ID.vtt` WebVTT captions, one cue per sentence.
    public var captions = false
    /// A data set: word timings for every item (as ``timings``), and, once the whole input is
    /// rendered, `metadata.jsonl` in the `audiofolder` layout (``RenderMerge``).
    public var dataset = false
    /// Render items again even when done.
    public var force = false
    /// The language of items that give none (nil: detected).
    public var language: LanguageTag?
    /// The voice of items that give none.
    public var voice: SpeechVoice?
    /// Whether text without a language is segmented by detected language.
    public var detectsLanguages = true
    /// The voice catalog directory (nil: the one ``/ParlaIO/ParlaCore/VoiceCatalog/default()`` loads:
    /// `$PARLA_VOICES`, else the catalog installed with Parla).
    public var voicesDirectory: URL?
    /// Where Piper voices are found (nil: `$PARLA_PIPER_VOICES`, then `parla/voices` in the
    /// XDG data directories, as for ``/ParlaIO/ParlaCore/VoiceCatalog/default()``).
    public var piperVoiceDirectories: [URL]?
    /// Voices to prefer by language, as ``/ParlaCore/Utterance/preferredVoices``: a voice listed
    /// for `en` speaks English of any region.
    public var preferredVoices: [LanguageTag: SpeechVoice] = [:]
    /// Render only the items of this shard.
    public var shard: BatchShard?
    /// With no more jobs than CPUs this process may use, run worker `i` (and the processes
    /// it forks) on the `i`-th of those CPUs. A worker and its chunk's process then never
    /// wake each other across CPUs, and the speech never moves to a cold cache: 5–8% less
    /// CPU time for `--jobs 1` on the VM the benchmark runs on. Turn it off when other
    /// programs keep one of those CPUs busy.
    public var pinsWorkers = true
    /// Speak every item from a pristine engine in a process of its own, so its audio depends
    /// on nothing but the item: the same in any input order, shard or company. By default items
    /// are spoken in chunks of consecutive items, whose engine state carries over from item to
    /// item (identical for any number of jobs, but not across orders or shardings), which costs
    /// a fork per chunk instead of one per item.
    public var isolatesItems = false

    /// Options writing to `outputDirectory` with one worker per core.
    public init(outputDirectory: URL, jobs: Int? = nil) {
        self.outputDirectory = outputDirectory
        self.jobs = max(1, jobs ?? BatchRenderOptions.cores)
    }

    /// The cores this process may run on.
    public static var cores: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }
}

/// Shard `index` of `count`: the items whose id hashes there (``BatchInput/shard(of:count:)``).
public struct BatchShard: Sendable, Hashable {
    /// 0-based shard number.
    public var index: Int
    /// Number of shards.
    public var count: Int
    /// Shard `index` of `count`; nil unless `0 <= index < count`.
    public init?(index: Int, count: Int) {
        guard count > 0, (0..<count).contains(index) else { return nil }
        self.index = index
        self.count = count
    }
    /// Whether the item `id` belongs to this shard.
    public func contains(_ id: String) -> Bool { BatchInput.shard(of: id, count: count) == index }
}

/// One entry of a batch's input: an item, or a line that could not be read as one (it is
/// reported as failed, and the batch goes on).
public enum BatchEntry: Sendable {
    /// An item to render.
    case item(BatchItem)
    /// An unreadable input line.
    case invalid(BatchInput.LineError)
}

/// What became of one item.
public struct BatchItemResult: Sendable, Hashable {
    /// How it ended.
    public enum Status: Sendable, Hashable {
        /// Rendered: `duration` of audio in these languages and voices (identifiers).
        case rendered(duration: Duration, languages: [String], voices: [String])
        /// Not rendered; the message says why and what to do.
        case failed(String)
        /// Already rendered by an earlier run (its files verified).
        case skipped
    }
    /// The item's id.
    public var id: String
    /// Its 1-based input line (0 for a file of a directory input).
    public var line: Int
    /// How it ended.
    public var status: Status
}

/// The state of a batch after an item, as ``BatchRenderer/render(_:)-(S)`` reports it.
public struct BatchProgress: Sendable {
    /// The item this update is about (nil on the final update).
    public var latest: BatchItemResult?
    /// Items rendered in this run.
    public var rendered = 0
    /// Items that failed.
    public var failed = 0
    /// Items skipped because an earlier run rendered them.
    public var skipped = 0
    /// The audio rendered in this run.
    public var audio = Duration.zero
    /// The time since the batch started.
    public var elapsed = Duration.zero
    /// Whether the batch was stopped before its input ended.
    public var stopped = false
    /// On the final update: the largest peak resident memory of any worker (the worker and
    /// the processes it forks), in bytes.
    public var workerPeakBytes: Int?
    /// On the final update: the peak resident memory of this process, in bytes.
    public var peakBytes: Int?
    /// Whether this is the final update.
    public var isFinal: Bool { latest == nil }
    /// An empty progress.
    public init() {}
}
