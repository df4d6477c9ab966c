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

/// Speaks `utterance` live and waits for its end, showing the highlighted text or printing
/// `--events json` lines; the caller has installed `Interrupt.onSignal` to stop `synth`.
/// - Throws: `ExitCode(130)` when a signal cut it off, the error it failed with.
func playToEnd(
    _ prepared: PreparedUtterance, with synth: SpeechSynthesizer, highlight: Bool, eventsJSON: Bool, ipa: Bool = false,
    keys: Bool = false
) async throws {
    if let code = Interrupt.signalled { throw ExitCode(code) }
    let events = synth.events()
    let control = keys ? KeyControl(synth: synth) : nil
    defer {
        if let line = control?.finish() { printError(line) }
    }
    let utterance = prepared.utterance
    let id = synth.speak(prepared)
    if Interrupt.signalled != nil { synth.stop(at: .immediate) }  // a signal just before speak
    var view = highlight ? HighlightView(text: utterance.inputText, width: HighlightView.terminalWidth()) : nil
    var ipaLine = false, lastWordEnd = 0  // a line of --ipa is open; where its last word ends
    for await event in events where event.utterance == id {
        if eventsJSON { writeStandardOutput(Say.json(event)) }
        if ipa {
            // Each word's phonemes as it is heard; a sentence a line (a sentence's event can
            // come after its first word's).
            switch event.kind {
            case .willSpeakSentence(let r) where ipaLine && r.scalarRange.lowerBound >= lastWordEnd:
                writeStandardOutput("\n")
                ipaLine = false
            case .willSpeakWord(let r):
                lastWordEnd = r.scalarRange.upperBound
                if let p = r.phonemes {
                    writeStandardOutput((ipaLine ? " " : "") + p)
                    ipaLine = true
                }
            default:
                if event.kind.isTerminal && ipaLine { writeStandardOutput("\n") }
            }
        }
        if var v = view {
            if case .willSpeakWord(let r) = event.kind { writeStandardOutput(v.highlight(r.scalarRange)) }
            if event.kind.isTerminal { writeStandardOutput(v.finish()) }
            view = v
        }
        switch event.kind {
        case .finished: return
        case .cancelled: throw ExitCode(Interrupt.signalled ?? 1)
        case .failed(let error): throw error
        default: continue
        }
    }
}
