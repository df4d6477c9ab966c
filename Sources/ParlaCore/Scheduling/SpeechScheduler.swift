/// Identifies one utterance or announcement given to a synthesizer, unique within the process.
public struct UtteranceID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The number (increasing in the order utterances were submitted).
    public let rawValue: Int
    /// Wraps a number.
    public init(_ rawValue: Int) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { String(rawValue) }
}

/// Where speech stops or pauses.
public enum SpeechBoundary: String, Sendable, Hashable, CaseIterable {
    /// At once, mid-word if need be.
    case immediate
    /// At the end of the word being heard.
    case word
}

/// Why an utterance was cancelled.
public enum CancellationReason: String, Sendable, Hashable {
    /// It was speaking and was cut off (by `stop`, or by an announcement that interrupts).
    case interrupted
    /// It never started: it was removed from the queue.
    case dropped
}

/// How a request competes for the speaker.
package enum SpeechRequestKind: Sendable, Hashable {
    /// `speak(_:)`: waits its turn (first in, first out).
    case speech
    /// `announce(_:)`: interrupts unless `queued`; see ``SpeechScheduler`` for the priority rules.
    case announcement(priority: AnnouncementPriority, queued: Bool)
}

/// The scheduling rules, as a state machine with no audio, clock or threads, so every
/// sequence of requests can be checked exhaustively.
///
/// - `speech` is appended to the queue (FIFO) and never interrupts.
/// - An announcement interrupts what is speaking unless it is queued (the queue-announcement
///   attribute) or low priority, or what is speaking is a high-priority announcement (which is
///   never interrupted once started). An announcement that cannot interrupt waits.
/// - Waiting requests are ordered by rank, first in first out within a rank: high
///   announcements, then default announcements that wanted to interrupt, then speech and
///   queued default announcements, then low announcements (which wait for everything).
/// - `stop` interrupts what is speaking and drops everything waiting. Stopping at a word
///   boundary keeps the current request until the player reports it ended, so nothing new
///   starts over its last word.
/// - Interrupting does not touch the queue: speech waiting behind the interrupted request
///   still plays after the announcement.
/// - A request that resumes after interruption is suspended instead: it goes back into the
///   queue right after the announcement that cut it off (behind only what outranks it, such
///   as a queued high announcement), and starts again from
///   where it was heard. Only an interrupting announcement does this; `stop` and queued
///   announcements do not. It is in the queue at most once, however often it is cut off.
package struct SpeechScheduler: Sendable, Hashable {
    /// A request and how it competes.
    package struct Item: Sendable, Hashable {
        /// The request.
        package var id: UtteranceID
        /// How it competes.
        package var kind: SpeechRequestKind
        /// Whether an interrupting announcement suspends it (to resume after the announcement)
        /// rather than cancelling it.
        package var resumesAfterInterruption: Bool
        /// Creates an item.
        package init(id: UtteranceID, kind: SpeechRequestKind, resumesAfterInterruption: Bool = false) {
            self.id = id
            self.kind = kind
            self.resumesAfterInterruption = resumesAfterInterruption
        }

        /// Position in the waiting queue (smaller goes first).
        var rank: Int {
            switch kind {
            case .speech: return 2
            case .announcement(.high, _): return 0
            case .announcement(.default, let queued): return queued ? 2 : 1
            case .announcement(.low, _): return 3
            }
        }

        /// Whether it cuts off what is speaking.
        var interrupts: Bool {
            if case .announcement(let p, let queued) = kind { return !queued && p != .low }
            return false
        }

        /// Whether an announcement may cut it off once it has started.
        var isInterruptible: Bool {
            if case .announcement(.high, _) = kind { return false }
            return true
        }
    }

    /// What the player must do.
    package enum Action: Sendable, Hashable {
        /// Start speaking this request.
        case start(UtteranceID)
        /// Stop the speaking request at `boundary`; it ends cancelled (interrupted).
        case interrupt(UtteranceID, at: SpeechBoundary)
        /// Remove a waiting request; it ends cancelled (dropped if it never started).
        case drop(UtteranceID)
        /// Stop the speaking request at once without ending it: it waits to be started again,
        /// from where the listener was.
        case suspend(UtteranceID)
    }

    /// The request speaking now (or finishing its last word after `stop(at: .word)`).
    package private(set) var current: Item?
    /// Whether ``current`` is winding down after `stop(at: .word)`.
    package private(set) var currentIsStopping = false
    /// Requests waiting to start, in the order they will start.
    package private(set) var waiting: [Item] = []

    /// An idle scheduler.
    package init() {}

    /// Whether anything is speaking or waiting.
    package var isBusy: Bool { current != nil || !waiting.isEmpty }

    /// A new request arrives.
    package mutating func submit(_ item: Item) -> [Action] {
        guard let playing = current else {
            current = item
            return [.start(item.id)]
        }
        if item.interrupts && (playing.isInterruptible || currentIsStopping) {
            current = item
            defer { currentIsStopping = false }
            if playing.resumesAfterInterruption && !currentIsStopping {
                // Right after the announcement: ahead of everything but what outranks it (a
                // queued high announcement may be waiting).
                waiting.insert(playing, at: waiting.firstIndex { $0.rank >= playing.rank } ?? waiting.endIndex)
                return [.suspend(playing.id), .start(item.id)]
            }
            return [.interrupt(playing.id, at: .immediate), .start(item.id)]
        }
        let at = waiting.firstIndex { $0.rank > item.rank } ?? waiting.endIndex
        waiting.insert(item, at: at)
        return []
    }

    /// The app stops all speech: the speaking request is cut off at `boundary` and every
    /// waiting request is dropped.
    package mutating func stop(at boundary: SpeechBoundary) -> [Action] {
        var actions: [Action] = []
        if let playing = current {
            if boundary == .immediate {
                current = nil
                currentIsStopping = false
                actions.append(.interrupt(playing.id, at: .immediate))
            } else if !currentIsStopping {
                currentIsStopping = true
                actions.append(.interrupt(playing.id, at: .word))
            }
        }
        actions += waiting.map { .drop($0.id) }
        waiting = []
        return actions
    }

    /// Removes one waiting request (for example when its owner gave up waiting for it).
    package mutating func withdraw(_ id: UtteranceID) -> [Action] {
        guard let i = waiting.firstIndex(where: { $0.id == id }) else { return [] }
        waiting.remove(at: i)
        return [.drop(id)]
    }

    /// The player reports that request `id` ended (finished, failed or cut off). If it was the
    /// current request, the next waiting one starts. Reports about requests that are no longer
    /// current (already interrupted) change nothing.
    package mutating func ended(_ id: UtteranceID) -> [Action] {
        guard current?.id == id else { return [] }
        current = nil
        currentIsStopping = false
        guard !waiting.isEmpty else { return [] }
        let next = waiting.removeFirst()
        current = next
        return [.start(next.id)]
    }
}
