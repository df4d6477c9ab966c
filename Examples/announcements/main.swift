// Reads a text aloud; two seconds in, "New message from Ana" is announced with high priority,
// cutting the reading off, and the reading carries on from the start of the sentence that was
// being heard (or the word, with --word). Every event is printed as a JSON line, as
// `parla say --events json` does; a summary of the resume goes to standard error.
//
//   swift run example-announcements [--word] [FILE]
import FoundationEssentials
import Parla
#if canImport(Glibc)
    import Glibc
#endif

let arguments = CommandLine.arguments.dropFirst()
let byWord = arguments.contains("--word")
let text: String
if let path = arguments.first(where: { !$0.hasPrefix("--") }) {
    text = try String(contentsOf: URL(fileURLWithPath: path), encoding: .utf8)
} else {
    text = """
        Parla reads long texts aloud. When a notification arrives, it is announced at once, \
        and the reading does not lose its place. It goes back to the start of the sentence \
        you were hearing, so you hear that sentence whole. Nothing is skipped and nothing is \
        said twice after that point.
        """
}

/// `text` as a JSON string.
func quoted(_ text: String) -> String {
    var out = "\""
    for u in text.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case _ where u.value < 0x20:
            out += "\\u" + String(repeating: "0", count: 4 - String(u.value, radix: 16).count) + String(u.value, radix: 16)
        default: out.unicodeScalars.append(u)
        }
    }
    return out + "\""
}

func json(_ e: SpeechEvent) -> String {
    var fields = ["\"event\": \(quoted(e.kind.name))", "\"t_ns\": \(e.time.nanoseconds)", "\"utterance\": \(e.utterance)"]
    switch e.kind {
    case .willSpeakWord(let r), .willSpeakSentence(let r), .resumed(from: let r):
        fields += ["\"start\": \(r.scalarRange.lowerBound)", "\"end\": \(r.scalarRange.upperBound)", "\"text\": \(quoted(r.text))"]
    case .failed(let error):
        fields.append("\"error\": \(quoted(error.description))")
    default:
        break
    }
    if let a = e.announcement { fields.append("\"announcement\": \(quoted(a.string))") }
    return "{" + fields.joined(separator: ", ") + "}"
}

let synth = SpeechSynthesizer()
try await synth.prepareToSpeak()
var reading = Utterance(string: text)
reading.resumesAfterInterruption = true
reading.resumePoint = byWord ? .word : .sentence
let events = synth.events()
let id = synth.speak(reading)

let printer = Task {
    var lastHeard: SpokenRange?
    var resumedFrom: SpokenRange?
    var ending: SpeechEvent?
    for await e in events {
        print(json(e))
        guard e.utterance == id else { continue }
        if case .willSpeakWord(let w) = e.kind, resumedFrom == nil { lastHeard = w }
        if case .resumed(let r) = e.kind { resumedFrom = r }
        if e.kind.isTerminal {
            ending = e
            break
        }
    }
    return (lastHeard, resumedFrom, ending)
}

try await Task.sleep(for: .seconds(2))
var news = AttributedString("New message from Ana")
news.speechAnnouncementPriority = .high
_ = await synth.announce(news)
let (lastHeard, resumedFrom, ending) = await printer.value

var summary = "reading ended: \(ending?.kind.name ?? "?")"
if let lastHeard, let resumedFrom {
    // Words from the resume point up to the one that was cut off (0: it resumed with that word).
    let scalars = Array(text.unicodeScalars)
    let between = scalars[min(resumedFrom.scalarRange.lowerBound, scalars.count)..<min(lastHeard.scalarRange.lowerBound, scalars.count)]
    var view = String.UnicodeScalarView()
    view.append(contentsOf: between)
    let wordsBack = String(view).split(whereSeparator: \.isWhitespace).count
    summary +=
        "; cut off while \"\(lastHeard.text)\" (offset \(lastHeard.scalarRange.lowerBound)) was heard,"
        + " resumed from \"\(resumedFrom.text)\" (offset \(resumedFrom.scalarRange.lowerBound)), \(wordsBack) words back"
}
let line = Array((summary + "\n").utf8)
_ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
