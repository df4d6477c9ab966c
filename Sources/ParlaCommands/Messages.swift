import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import ParlaESpeak
import ParlaIO
import ParlaPulseAudio
#if canImport(Glibc)
    import Glibc
#endif

/// Writes a line to standard error.
package func printError(_ message: String, terminator: String = "\n") {
    var line = message + terminator
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Writes `text` to standard output at once (unbuffered, so events arrive when they happen).
func writeStandardOutput(_ text: String) {
    writeAll(1, Array(text.utf8))
}

/// An error the user can act on: printed as "Error: …" without the usage text.
struct UserError: Error, CustomStringConvertible, Equatable {
    var description: String
    init(_ description: String) { self.description = description }
}

extension String {
    /// `value` with one decimal ("nan" or "inf" when it is not finite, rather than trapping).
    package init(format1 value: Double) {
        guard value.isFinite, abs(value) < 1e15 else {
            self = value.isNaN ? "nan" : value < 0 ? "-inf" : "inf"
            return
        }
        let tenths = Int((value * 10).rounded())
        self = (tenths < 0 ? "-" : "") + "\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }
}

extension StringProtocol {
    /// Without leading and trailing whitespace.
    func trimmed() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
