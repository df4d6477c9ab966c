import ParlaCore
import ParlaTestSupport
import Testing

/// The scheduling rules, checked on every sequence of requests up to a length, with no audio.
@Suite("Speech scheduler")
struct SchedulerTests {
    enum Op: Hashable, CustomStringConvertible {
        case submit(SpeechRequestKind)
        /// Speech that resumes after an interruption.
        case submitResumable
        case stop(SpeechBoundary)
        case endCurrent

        var description: String {
            switch self {
            case .submitResumable: return "speak(resumable)"
            case .submit(.speech): return "speak"
            case .submit(.announcement(let p, let q)): return "announce(\(p)\(q ? ",queued" : ""))"
            case .stop(let b): return "stop(\(b))"
            case .endCurrent: return "end"
            }
        }
    }

    static let kinds: [SpeechRequestKind] = [.speech] + AnnouncementPriority.allCases.flatMap { p in
        [SpeechRequestKind.announcement(priority: p, queued: false), .announcement(priority: p, queued: true)]
    }
    static let ops: [Op] = kinds.map { .submit($0) } + [.submitResumable, .stop(.immediate), .stop(.word), .endCurrent]

    /// Whether waiting request `a` must start before waiting request `b`, written from the
    /// rules as SpeechScheduler's documentation states them, not from its `rank`: high
    /// announcements go first; low announcements wait for everything; a default announcement
    /// that wanted to interrupt goes before speech and queued announcements. Requests neither
    /// of which must precede the other start in submission order.
    static func mustPrecede(_ a: SpeechRequestKind, _ b: SpeechRequestKind) -> Bool {
        func isHigh(_ k: SpeechRequestKind) -> Bool { if case .announcement(.high, _) = k { true } else { false } }
        func isLow(_ k: SpeechRequestKind) -> Bool { if case .announcement(.low, _) = k { true } else { false } }
        func wantedToInterrupt(_ k: SpeechRequestKind) -> Bool { k == .announcement(priority: .default, queued: false) }
        if isHigh(a) != isHigh(b) { return isHigh(a) }
        if isLow(a) != isLow(b) { return isLow(b) }
        return wantedToInterrupt(a) && !wantedToInterrupt(b)
    }

    enum Status: Equatable { case waiting, playing, stopping, ended }

    /// Replays `ops` against the scheduler and a model of what a player does with its actions,
    /// checking every rule; returns a failure description or nil.
    static func check(_ ops: [Op]) -> String? {
        var s = SpeechScheduler()
        var status: [UtteranceID: Status] = [:]
        var kind: [UtteranceID: SpeechRequestKind] = [:]
        var resumable: Set<UtteranceID> = []
        var suspensions: [UtteranceID: Int] = [:]
        var order: [UtteranceID] = []  // submission order
        var next = 0
        func playing() -> [UtteranceID] { status.filter { $0.value == .playing || $0.value == .stopping }.map(\.key) }

        func apply(_ actions: [SpeechScheduler.Action], cause: Op) -> String? {
            for a in actions {
                switch a {
                case .start(let id):
                    guard status[id] == .waiting else { return "start of \(id) which is \(String(describing: status[id]))" }
                    // The one started is one no other waiting request must precede, and the
                    // earliest submitted of those.
                    let waiting = order.filter { status[$0] == .waiting && $0 != id }
                    let k = kind[id]!
                    let ahead = waiting.first { other in
                        mustPrecede(kind[other]!, k) || (other < id && !mustPrecede(k, kind[other]!))
                    }
                    if case .submit = cause, id == order.last {
                        // a new request starting at once: fine if it interrupts or nothing else was there
                    } else if let ahead {
                        return "started \(id) before \(ahead)"
                    }
                    if case .announcement(.low, _) = k, waiting.contains(where: { mustPrecede(kind[$0]!, k) }) {
                        return "low \(id) started while others wait"
                    }
                    status[id] = .playing
                case .interrupt(let id, let boundary):
                    guard status[id] == .playing || status[id] == .stopping else { return "interrupt of \(id) which is not playing" }
                    if case .submit = cause, case .announcement(.high, _) = kind[id]!, status[id] == .playing {
                        return "high announcement \(id) was interrupted by a request"
                    }
                    if case .submit = cause, resumable.contains(id), status[id] == .playing {
                        return "resumable \(id) was cut off by an announcement instead of suspended"
                    }
                    status[id] = boundary == .immediate ? .ended : .stopping
                case .drop(let id):
                    guard status[id] == .waiting else { return "drop of \(id) which is not waiting" }
                    status[id] = .ended
                case .suspend(let id):
                    guard status[id] == .playing else { return "suspend of \(id) which is not playing" }
                    guard resumable.contains(id) else { return "suspend of \(id), which does not resume" }
                    guard case .submit(.announcement(let p, false)) = cause, p != .low else { return "suspend of \(id) by \(cause)" }
                    status[id] = .waiting
                    suspensions[id, default: 0] += 1
                    // It resumes right after the announcement: behind only what must precede it.
                    for other in s.waiting.prefix(while: { $0.id != id }) where !mustPrecede(kind[other.id]!, kind[id]!) {
                        return "suspended \(id) waits behind \(other.id)"
                    }
                }
                if playing().count > 1 { return "two utterances playing: \(playing())" }
            }
            return nil
        }

        for op in ops + [.stop(.immediate)] {
            let actions: [SpeechScheduler.Action]
            var op = op
            var resumes = false
            if op == .submitResumable {
                op = .submit(.speech)
                resumes = true
            }
            switch op {
            case .submitResumable:
                return "unreachable"
            case .submit(let k):
                next += 1
                let id = UtteranceID(next)
                if resumes { resumable.insert(id) }
                let wasIdle = playing().isEmpty
                let current = playing().first
                status[id] = .waiting
                kind[id] = k
                order.append(id)
                actions = s.submit(.init(id: id, kind: k, resumesAfterInterruption: resumes))
                if wasIdle && actions != [.start(id)] { return "\(ops): idle scheduler did not start \(id) at once: \(actions)" }
                if let current, case .announcement(let p, false) = k, p != .low {
                    let protected: Bool
                    if case .announcement(.high, _) = kind[current]! { protected = status[current] == .playing } else { protected = false }
                    if !protected && !actions.contains(.start(id)) { return "\(ops): interrupting announcement \(id) did not start" }
                    if protected && !actions.isEmpty { return "\(ops): high announcement \(current) was disturbed: \(actions)" }
                }
                if case .speech = k, !wasIdle, !actions.isEmpty { return "\(ops): speech \(id) disturbed others: \(actions)" }
            case .stop(let b):
                actions = s.stop(at: b)
            case .endCurrent:
                guard let current = s.current?.id else { continue }
                status[current] = .ended
                actions = s.ended(current)
            }
            if let failure = apply(actions, cause: op) { return "\(ops): \(failure)" }
            // A request waits in the queue at most once, however often it was suspended.
            if s.waiting.count != Set(s.waiting.map(\.id)).count { return "\(ops): a request waits twice" }
            if s.current.map({ status[$0.id] == .playing || status[$0.id] == .stopping }) == false {
                return "\(ops): the scheduler's current request is not playing"
            }
        }
        // After the final stop(.immediate) every request has ended exactly once.
        if let open = status.first(where: { $0.value != .ended }) { return "\(ops): \(open.key) never ended" }
        if s.isBusy { return "\(ops): busy after stop" }
        return nil
    }

    @Test func everySequenceUpToFiveRequestsFollowsTheRules() {
        var failures: [String] = []
        var count = 0
        func walk(_ prefix: [Op]) {
            if let f = Self.check(prefix) { failures.append(f); return }
            count += 1
            guard prefix.count < 5, failures.count < 5 else { return }
            for op in Self.ops { walk(prefix + [op]) }
        }
        walk([])
        #expect(failures == [])
        var expected = 0, layer = 1
        for _ in 0...5 { expected += layer; layer *= Self.ops.count }
        #expect(count == expected)
    }

    @Test func longRandomSequencesFollowTheRules() {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<3000 {
            let ops = (0..<40).map { _ in Self.ops[Int(rng.next() % UInt64(Self.ops.count))] }
            let failure = Self.check(ops)
            #expect(failure == nil)
            if failure != nil { break }
        }
    }

    @Test func namedScenarios() {
        var s = SpeechScheduler()
        let a = UtteranceID(1), b = UtteranceID(2), c = UtteranceID(3), d = UtteranceID(4), e = UtteranceID(5)
        #expect(s.submit(.init(id: a, kind: .speech)) == [.start(a)])
        #expect(s.submit(.init(id: b, kind: .speech)) == [])
        // A default announcement interrupts a; b still waits.
        #expect(s.submit(.init(id: c, kind: .announcement(priority: .default, queued: false))) == [.interrupt(a, at: .immediate), .start(c)])
        // Low waits for everything; a queued announcement waits behind b.
        #expect(s.submit(.init(id: d, kind: .announcement(priority: .low, queued: false))) == [])
        #expect(s.submit(.init(id: e, kind: .announcement(priority: .default, queued: true))) == [])
        #expect(s.waiting.map(\.id) == [b, e, d])
        #expect(s.ended(c) == [.start(b)])
        #expect(s.ended(b) == [.start(e)])
        #expect(s.ended(e) == [.start(d)])
        #expect(s.ended(d) == [])
        #expect(!s.isBusy)

        // High is not interrupted once started; a default announcement waits first in line.
        let h = UtteranceID(6), x = UtteranceID(7), y = UtteranceID(8)
        #expect(s.submit(.init(id: h, kind: .announcement(priority: .high, queued: false))) == [.start(h)])
        #expect(s.submit(.init(id: x, kind: .speech)) == [])
        #expect(s.submit(.init(id: y, kind: .announcement(priority: .default, queued: false))) == [])
        #expect(s.waiting.map(\.id) == [y, x])
        // stop cuts off even a high announcement, and drops the queue.
        #expect(s.stop(at: .immediate) == [.interrupt(h, at: .immediate), .drop(y), .drop(x)])

        // stop(at: .word) keeps the request until it reports its end; nothing starts over it.
        let p = UtteranceID(9), q = UtteranceID(10)
        #expect(s.submit(.init(id: p, kind: .speech)) == [.start(p)])
        #expect(s.stop(at: .word) == [.interrupt(p, at: .word)])
        #expect(s.submit(.init(id: q, kind: .speech)) == [])
        #expect(s.ended(p) == [.start(q)])
        _ = s.stop(at: .immediate)

        // A resumable reading cut off by an announcement waits right after it, before speech
        // queued earlier; cut off again, it is still in line once. A queued announcement and
        // stop do not suspend it.
        let r = UtteranceID(11), n1 = UtteranceID(12), n2 = UtteranceID(13), later = UtteranceID(14), polite = UtteranceID(15)
        #expect(s.submit(.init(id: r, kind: .speech, resumesAfterInterruption: true)) == [.start(r)])
        #expect(s.submit(.init(id: later, kind: .speech)) == [])
        #expect(s.submit(.init(id: polite, kind: .announcement(priority: .default, queued: true))) == [])
        #expect(s.submit(.init(id: n1, kind: .announcement(priority: .high, queued: false))) == [.suspend(r), .start(n1)])
        #expect(s.waiting.map(\.id) == [r, later, polite])
        #expect(s.ended(n1) == [.start(r)])
        #expect(s.submit(.init(id: n2, kind: .announcement(priority: .default, queued: false))) == [.suspend(r), .start(n2)])
        #expect(s.waiting.map(\.id) == [r, later, polite])
        #expect(s.ended(n2) == [.start(r)])
        #expect(s.stop(at: .immediate) == [.interrupt(r, at: .immediate), .drop(later), .drop(polite)])
    }
}
