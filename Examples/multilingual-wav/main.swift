// Renders a multilingual attributed string to a WAV file and prints each word with its time.
//
//   swift run example-multilingual-wav [output.wav]
import FoundationEssentials
import Parla

var text = AttributedString("The revolutionary phone. ")
var greek = AttributedString("Το επαναστατικό τηλέφωνο. ")
greek.speechLanguage = "el"
var arabic = AttributedString("هاتف ثوري.")
arabic.speechLanguage = "ar"
text.append(greek)
text.append(arabic)

let output = CommandLine.arguments.dropFirst().first ?? "multilingual.wav"
let synth = SpeechSynthesizer()
let timeline = try await synth.write(Utterance(text), to: URL(fileURLWithPath: output))

// Times are Durations; whole milliseconds read best here.
func ms(_ sample: Int) -> Int { Int(timeline.time(ofSample: sample) / .milliseconds(1)) }
for segment in timeline.segments {
    print("\(segment.language) (\(segment.voice)) from \(ms(segment.startSample)) ms")
}
for word in timeline.words {
    print("  \(ms(word.startSample))–\(ms(word.endSample)) ms  \(word.word)")
}
print("Wrote \(output)")
