import ArgumentParser
import Dispatch
import FoundationEssentials
import Parla
import ParlaEngine
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

extension ParlaError {
    /// The error as the commands print it: the library's message, then what to do in terms
    /// of the command line.
    package var commandLineMessage: String {
        guard let advice = commandLineAdvice else { return description }
        return description + " " + advice
    }

    private var commandLineAdvice: String? {
        switch code {
        case .invalidLanguageTag: return "Run 'parla voices' to list the languages Parla speaks."
        case .unknownVoice: return "Run 'parla voices' to list them."
        case .noVoiceForLanguage:
            let language = subject?.split(separator: "-").first.map(String.init) ?? "LANG"
            return "Run 'parla voices' to list the languages Parla speaks, or 'parla voices --language \(language)' to search."
        case .voiceCatalogNotFound: return "Or pass --voices DIR."
        case .emptyText: return "Pass the text as an argument, with -f FILE, or on standard input."
        case .invalidSSML: return "Without --ssml the input is read as plain text."
        case .languageModelInvalid, .languageModelNotFound: return "(--voices DIR; or --no-detect and -l LANG.)"
        case .audioServerUnavailable, .audioServerStalled: return "(-o FILE.wav writes a file.)"
        case .audioServerLost: return "-o FILE.wav renders without one."
        case .audioDeviceNotFound: return "Leave out --device to use the default."
        case .invalidTimeline: return "Without --timings and --vtt the audio is rendered."
        default: return nil
        }
    }
}
