internal import CParlaProcess
internal import CParlaWorker
import FoundationEssentials
import ParlaCore
import ParlaIO
import ParlaEngine
#if canImport(Glibc)
    import Glibc
#endif

/// The peak resident memory of this process's address space (`VmHWM`), in bytes. (Unlike
/// `getrusage`, it does not include the memory of the process that started this one.)
func peakResidentBytes() -> Int {
    guard let status = try? TextInput.read(path: "/proc/self/status") else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
    return 0
}

/// The render worker: a process started by ``BatchRenderer`` that reads settings, then one
/// ``RenderChunk`` per line, and answers one ``WorkerResult`` line per item to render.
///
/// espeak-ng keeps hidden state from one synthesis to the next (wavegen's pitch-flutter phase,
/// gain and filter memories), so the same text spoken after different texts comes out
/// different. The worker loads everything once, never synthesizes itself, and forks a child
/// per chunk: each chunk starts from the same pristine engine and speaks the same items in
/// the same order, whichever worker renders it, so output is byte-identical for any `--jobs`.
/// On resume, items of a chunk that are already done are replayed (spoken, audio discarded)
/// before the missing ones, which therefore come out as in an uninterrupted run. A crash
/// inside espeak-ng costs one item, not the worker.
enum RenderWorker {
    static func main() -> Int32 {
        signal(SIGINT, SIG_IGN)  // Ctrl-C reaches the whole process group: the parent decides.
        signal(SIGPIPE, SIG_IGN)
        var input = LineReader(fd: 0, name: "the render worker's input")
        guard let first = try? input.next(),
            let settings = try? JSONDecoder().decode(RenderSettings.self, from: Data(first))
        else {
            send(WorkerResult(id: "", ok: false, fatal: "the render worker got no settings"))
            return 2
        }
        let renderer: ItemRenderer
        do {
            renderer = try ItemRenderer(settings)
        } catch {
            send(WorkerResult(id: "", ok: false, fatal: "\(error)"))
            return 1
        }
        // The ready line also warms the JSON encoder's type lookups, which children inherit.
        send(WorkerResult(id: "", ok: true))
        while let line = try? input.next() {
            guard let chunk = try? JSONDecoder().decode(RenderChunk.self, from: Data(line)) else {
                // The parent cannot know how many answers to wait for: end, and be replaced.
                _ = writeFully(2, Array("parla render worker: a malformed request\n".utf8))
                return 2
            }
            guard render(chunk, renderer) else { break }  // the parent is gone
        }
        var children = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &children)
        send(WorkerResult(id: "", ok: true, peakBytes: max(peakResidentBytes(), Int(children.ru_maxrss) * 1024)))
        return 0
    }

    /// Plans the chunk's items here (a bad item fails without touching the engine), then
    /// speaks them in a child forked from this pristine process, sending each result on as it
    /// arrives. The engine's state before every item is "pristine, then each earlier item of
    /// the chunk spoken" (whole, or up to the point where the engine or the item's own input
    /// failed, which is the same in every run; see ``ItemRenderer/render(_:_:)``). If the
    /// child dies, a new child replays the items before the one it died on, leaves that one
    /// out, and goes on. Returns false if the parent is gone.
    static func render(_ chunk: RenderChunk, _ renderer: ItemRenderer) -> Bool {
        let plans: [Result<PreparedItem, any Error>] = chunk.entries.map { entry in Result { try renderer.prepare(entry.item) } }
        let replay = chunk.entries.map(\.replay)
        renderer.preload(plans.compactMap { try? $0.get() })
        var excluded = Set<Int>()
        var next = 0  // the first entry whose result has not been sent
        while next < chunk.entries.count {
            let order = chunk.entries.indices.filter { !excluded.contains($0) }
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else {
                let reason = "cannot create a pipe: \(systemErrorMessage())"
                return (next..<chunk.entries.count).allSatisfy { i in
                    replay[i] || send(WorkerResult(id: chunk.entries[i].item.id, ok: false, error: reason))
                }
            }
            let pid = parla_fork()
            if pid == 0 {
                parla_item_child_setup()
                close(fds[0])
                for i in order {
                    let entry = chunk.entries[i]
                    let result: WorkerResult
                    switch plans[i] {
                    case .failure(let error):
                        result = WorkerResult(id: entry.item.id, ok: false, error: "\(error)")
                    case .success(let prepared):
                        if replay[i] || i < next {
                            renderer.replay(entry.item, prepared)
                            result = WorkerResult(id: entry.item.id, ok: true)
                        } else {
                            result = renderer.render(entry.item, prepared)
                        }
                    }
                    guard writeLine(result, to: fds[1]) else { _exit(1) }
                }
                _exit(0)
            }
            close(fds[1])
            guard pid > 0 else {
                close(fds[0])
                let reason = "cannot start a process for the item: \(systemErrorMessage())"
                return (next..<chunk.entries.count).allSatisfy { i in
                    replay[i] || send(WorkerResult(id: chunk.entries[i].item.id, ok: false, error: reason))
                }
            }
            var reader = LineReader(fd: fds[0], name: "the item's process")
            var died: Int?  // the entry the child died on
            for i in order {
                // Passed on as it is (the parent decodes it): a line cut short by the child's
                // death lacks its closing brace.
                guard let line = try? reader.next(), line.last == UInt8(ascii: "}") else {
                    died = i
                    break
                }
                guard i >= next else { continue }  // replayed
                next = i + 1
                if !replay[i] {
                    guard writeFully(1, line + [0x0A]) else {
                        // The batch is gone: so is the rest of this chunk, and what it wrote.
                        kill(pid, SIGKILL)
                        close(fds[0])
                        waitForExit(pid)
                        renderer.removeTemporaryFiles(writtenBy: pid)
                        return false
                    }
                }
            }
            close(fds[0])
            let status = waitForExit(pid)
            if let i = died {
                renderer.removeTemporaryFiles(writtenBy: pid)
                excluded.insert(i)
                if i >= next {
                    next = i + 1
                    if !replay[i] {
                        let signal = status & 0x7F
                        let how =
                            signal != 0
                            ? "signal \(signal)\(signal == SIGKILL ? ", killed" : signal == SIGSEGV ? ", a crash in the speech engine" : "")"
                            : "exit status \((status >> 8) & 0xFF)"
                        guard
                            send(
                                WorkerResult(
                                    id: chunk.entries[i].item.id, ok: false,
                                    error:
                                        "the process rendering this item died (\(how)) before it was complete; run the same command again to render it again"
                                ))
                        else { return false }
                    }
                }
            }
        }
        return true
    }

    @discardableResult
    static func send(_ result: WorkerResult) -> Bool { writeLine(result, to: 1) }

    static func writeLine(_ result: WorkerResult, to fd: Int32) -> Bool {
        writeFully(fd, result.jsonLine)
    }
}

@_cdecl("parla_render_worker_main")
func parlaRenderWorkerMain() -> Int32 { RenderWorker.main() }
