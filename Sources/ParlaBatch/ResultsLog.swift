internal import CParlaProcess
import Dispatch
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// A run's results file (`results.jsonl`, or a shard's `results-K-of-N.jsonl`): streamed once
/// to learn which ids are done, then appended one whole line per write.
final class ResultsLog: Sendable {
    let path: String
    private let fd: Int32
    /// The ids whose last line says "ok".
    let done: Set<String>
    private let directory: String

    init(directory: String, name: String) throws {
        self.directory = directory
        path = directory + "/" + name
        var endsInsideALine = false
        var done: Set<String> = []
        let existing = open(path, O_RDONLY | O_CLOEXEC)
        if existing >= 0 {
            defer { close(existing) }
            // Streamed line by line: only the ids are kept. The last line for an id wins; a line
            // that is not a result (torn by a crash, edited by hand) is skipped.
            var reader = LineReader(fd: existing, name: path, limit: 1 << 20)
            let decoder = JSONDecoder()
            while let line = try reader.next() {
                guard !reader.lastLineWasCut, !line.isEmpty,
                    let object = Self.entry(line) ?? (try? decoder.decode(Entry.self, from: Data(line)))
                else { continue }
                if object.status == "ok" { done.insert(object.id) } else { done.remove(object.id) }
            }
            var st = stat()
            var last: UInt8 = 0x0A
            if fstat(existing, &st) == 0, st.st_size > 0 { _ = pread(existing, &last, 1, st.st_size - 1) }
            endsInsideALine = last != 0x0A
        } else if errno != ENOENT {
            throw ParlaError.unreadableInput(path: path, reason: systemErrorMessage())
        }
        self.done = done
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ParlaError.unwritableOutput(path: path, reason: systemErrorMessage()) }
        // A line cut short by a crash or a full disk must not swallow the next one.
        if endsInsideALine { try append("") }
    }

    private struct Entry: Decodable {
        var id: String
        var status: String
    }

    /// The id and status of a line exactly as ``line(id:line:seconds:languages:voices:timings:captions:)``
    /// writes it, when its id needs no escapes; nil for anything else, which JSONDecoder then
    /// reads (a million lines take about 1 s this way, and 4–5 s through JSONDecoder).
    private static func entry(_ line: [UInt8]) -> Entry? {
        var c = ByteCursor(bytes: line)
        guard c.take(#"{"id": "#), let id = c.string(), c.take(#", "status": "#), let status = c.string(),
            status == "ok" || status == "failed",
            line.last(where: { $0 != 0x20 && $0 != 0x0D }) == 0x7D
        else { return nil }  // ends with }
        return Entry(id: id, status: status)
    }

    deinit { close(fd) }

    /// Whether `id` was rendered before and its files are complete: the WAV header's sizes
    /// match the file's size, and the timings and captions asked for exist.
    func isDone(_ id: String, timings: Bool, captions: Bool) -> Bool {
        guard done.contains(id) else { return false }
        let base = directory + "/" + id
        if timings && access(base + ".json", F_OK) != 0 { return false }
        if captions && access(base + ".vtt", F_OK) != 0 { return false }
        return RenderDirectory.isCompleteWAV(directory, id)
    }

    /// Appends `line` (one or more whole lines) in one write.
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)`` (a full disk, for example).
    func append(_ line: String) throws(ParlaError) {
        guard writeFully(fd, Array((line + "\n").utf8)) else {
            throw .unwritableOutput(path: path, reason: systemErrorMessage())
        }
    }

    // MARK: Group commit

    /// Result lines on their way to the file.
    private struct Pending {
        /// Lines waiting for the next sync of the output's file system, in order.
        var lines: [String] = []
        /// The files of the items in `lines` that were rendered.
        var files: [String] = []
        /// Lines (and their files) that arrived before a line that comes earlier in the input,
        /// by their place among the batch's lines: they join `lines` in input order.
        var held: [Int: (line: String, files: [String])] = [:]
        /// The place of the next line to join `lines`.
        var released = 0

        /// The lines still held, in order: the lines before them will not come.
        mutating func releaseHeld() {
            for (_, entry) in held.sorted(by: { $0.key < $1.key }) {
                lines.append(entry.line)
                files += entry.files
            }
            held = [:]
        }
    }
    private let pending = Mutex(Pending())

    /// Queues `line` (naming `files` of the output directory) for the next commit, at `place`
    /// among the batch's lines: it waits for the lines before it, so the log is in input
    /// order whatever the number of jobs. Without a place (not expected: every rendered or
    /// failed item has one) the line is kept out of order rather than lost.
    func queue(_ line: String, files: [String], at place: Int?) {
        pending.withLock { p in
            guard let place else {
                p.lines.append(line)
                p.files += files
                return
            }
            p.held[place] = (line, files)
            while let next = p.held.removeValue(forKey: p.released) {
                p.lines.append(next.line)
                p.files += next.files
                p.released += 1
            }
        }
    }

    /// Syncs the output's file system, then appends the lines queued before the sync: a line
    /// marked ok always names files that are on disk, even after a machine crash. With
    /// `droppingPages`, the files' pages are then dropped from the page cache: a long batch
    /// keeps a few seconds of output in memory instead of pushing everything else out, and
    /// writes its next files into pages it has just used.
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``.
    func commit(droppingPages: Bool = true) throws(ParlaError) {
        let (lines, files) = pending.withLock { p in
            defer {
                p.lines = []
                p.files = []
            }
            return (p.lines, p.files)
        }
        guard !lines.isEmpty else { return }
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var problem: Int32 = dir >= 0 ? 0 : errno
        if dir >= 0 {
            if parla_syncfs(dir) != 0 { problem = errno }
            close(dir)
        }
        guard problem == 0 else {
            throw .unwritableOutput(path: directory, reason: "the files could not be flushed to disk: \(systemErrorMessage(problem))")
        }
        try append(lines.joined(separator: "\n"))
        for name in files where droppingPages {
            let fd = open(directory + "/" + name, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
            close(fd)
        }
    }

    /// Commits on a thread of its own (a sync takes tens of milliseconds, which no thread
    /// feeding a worker should wait for), a second after the last commit, until
    /// ``GroupCommit/finish()``, which commits what is left at once (the last commit is on the
    /// batch's critical path). A failed commit is passed to `onFailure`.
    func startGroupCommit(onFailure: @escaping @Sendable (ParlaError) -> Void) -> GroupCommit {
        let commit = GroupCommit(log: self, onFailure: onFailure)
        startThread(name: "parla.render.commit") { commit.run() }
        return commit
    }

    /// The committing thread of ``startGroupCommit(onFailure:)``.
    final class GroupCommit: Sendable {
        private let log: ResultsLog
        private let onFailure: @Sendable (ParlaError) -> Void
        private let ending = StopFlag()
        private let wake = DispatchSemaphore(value: 0)
        private let ended = DispatchSemaphore(value: 0)
        private let lastCommit = Atomic<UInt64>(0)

        fileprivate init(log: ResultsLog, onFailure: @escaping @Sendable (ParlaError) -> Void) {
            self.log = log
            self.onFailure = onFailure
        }

        fileprivate func run() {
            while !ending.isRaised {
                let due = lastCommit.load(ordering: .relaxed) + 1_000_000_000, now = monotonicNanoseconds()
                if now >= due {
                    commit()
                } else {
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(due - now)))
                }
            }
            ended.signal()
        }

        private func commit(droppingPages: Bool = true) {
            lastCommit.store(monotonicNanoseconds(), ordering: .relaxed)
            do throws(ParlaError) { try log.commit(droppingPages: droppingPages) } catch { onFailure(error) }
        }

        /// Ends the thread, then commits every line left, the lines still held for items that
        /// will not come (the batch failed) included.
        func finish() {
            ending.raise()
            wake.signal()
            ended.wait()
            log.pending.withLock { $0.releaseHeld() }
            commit(droppingPages: false)  // on the way out: not worth the time
        }
    }

    static func line(id: String, line n: Int, seconds: Double, languages: [String], voices: [String], timings: Bool, captions: Bool)
        -> String
    {
        "{\"id\": \(JSONText.quoted(id)), \"status\": \"ok\", \"line\": \(n), \"wav\": \(JSONText.quoted(id + ".wav"))"
            + (timings ? ", \"json\": \(JSONText.quoted(id + ".json"))" : "")
            + (captions ? ", \"vtt\": \(JSONText.quoted(id + ".vtt"))" : "")
            + ", \"duration_s\": \(JSONText.threeDecimals(seconds)), \"languages\": [\(languages.map(JSONText.quoted).joined(separator: ", "))]"
            + ", \"voices\": [\(voices.map(JSONText.quoted).joined(separator: ", "))]}"
    }

    static func line(id: String, line n: Int, error: String) -> String {
        "{\"id\": \(JSONText.quoted(id)), \"status\": \"failed\", \"line\": \(n), \"error\": \(JSONText.quoted(error))}"
    }

}
