#if canImport(Glibc)
    import Glibc
#endif
import ParlaCore
import ParlaIO

/// Small process helpers the commands share (the tools themselves run through swift-subprocess).
package enum Processes {
    /// Whether `tool` is an executable on $PATH.
    package static func have(_ tool: String) -> Bool {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(tool)", X_OK) == 0 }
    }
}
