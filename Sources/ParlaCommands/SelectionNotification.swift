import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import Subprocess
#if canImport(Glibc)
    import Glibc
#endif

extension Selection {
    /// Shows `text` in a desktop notification (best effort, without waiting).
    /// When `notify-send` is missing, says so unless `quietly` (a reason that is also spoken).
    /// A notification daemon that does not answer is given up after ``notificationDeadline``
    /// (notify-send itself would wait 25 s), so it never keeps the program waiting.
    static func notify(_ text: String, quietly: Bool = false) async {
        guard Processes.have("notify-send") else {
            if !quietly { printError("--notify needs notify-send (apt-get install libnotify-bin); continuing without it.") }
            return
        }
        let body = text.count > 300 ? String(text.prefix(300)) + "…" : text
        _ = try? await withThrowingTaskGroup(of: Void.self) { race in
            race.addTask { _ = try await run(.name("notify-send"), arguments: ["--app-name=Parla", "Parla", body], output: .discarded) }
            race.addTask { try await Task.sleep(for: notificationDeadline) }
            defer { race.cancelAll() }
            try await race.next()
        }
    }

    /// How long notify-send may take to hand a notification over.
    static let notificationDeadline = Duration.seconds(2)
}
