/// The `--timings` JSON document. Schema (version 1), every offset in Unicode scalars of the
/// input text, end exclusive; times in milliseconds from the start of the audio:
///
/// ```
/// { "version": 1, "sampleRate": 22050, "durationMs": 2140.5, "offsetUnit": "unicode-scalar",
///   "segments":  [ { "start": 0, "end": 12, "language": "en", "voice": "espeak-ng.en-us",
///                    "startMs": 0.0, "endMs": 950.3 } ],
///   "sentences": [ { "start": 0, "end": 12, "startMs": 0.0, "endMs": 870.1 } ],
///   "words":     [ { "start": 0, "end": 5, "word": "Hello", "startMs": 0.0, "endMs": 290.2,
///                    "segment": 0, "estimated": false } ] }
/// ```
extension SpeechTimeline {
    /// The timeline as the JSON document described above.
    public func json() -> String {
        var out = "{\n  \"version\": 1,\n  \"sampleRate\": \(sampleRate),\n"
        out += "  \"durationMs\": \(ms(sampleCount)),\n  \"offsetUnit\": \"unicode-scalar\",\n  \"segments\": ["
        for (i, s) in segments.enumerated() {
            out += i == 0 ? "\n    " : ",\n    "
            out += "{\"start\": \(s.range.lowerBound), \"end\": \(s.range.upperBound), \"language\": \(JSONText.quoted(s.language.identifier)), \"voice\": \(JSONText.quoted(s.voice)), \"startMs\": \(ms(s.startSample)), \"endMs\": \(ms(s.endSample))}"
        }
        out += segments.isEmpty ? "],\n  \"sentences\": [" : "\n  ],\n  \"sentences\": ["
        for (i, s) in sentences.enumerated() {
            out += i == 0 ? "\n    " : ",\n    "
            out += "{\"start\": \(s.range.lowerBound), \"end\": \(s.range.upperBound), \"startMs\": \(ms(s.startSample)), \"endMs\": \(ms(s.endSample))}"
        }
        out += sentences.isEmpty ? "],\n  \"words\": [" : "\n  ],\n  \"words\": ["
        for (i, w) in words.enumerated() {
            out += i == 0 ? "\n    " : ",\n    "
            out += "{\"start\": \(w.range.lowerBound), \"end\": \(w.range.upperBound), \"word\": \(JSONText.quoted(w.word)), \"startMs\": \(ms(w.startSample)), \"endMs\": \(ms(w.endSample)), \"segment\": \(w.segment), \"estimated\": \(w.isEstimated)}"
        }
        out += words.isEmpty ? "]\n}\n" : "\n  ]\n}\n"
        return out
    }

    private func ms(_ sample: Int) -> String {
        let tenths = (sample * 10_000 + sampleRate / 2) / sampleRate
        return "\(tenths / 10).\(tenths % 10)"
    }
}

/// Helpers for writing JSON text by hand (fast, with a fixed key order).
public enum JSONText {
    /// `s` as a JSON string literal, quotes included.
    public static func quoted(_ s: String) -> String {
    var out = "\""
    for u in s.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if u.value < 0x20 || u.value == 0x2028 || u.value == 0x2029 {
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(u)
            }
        }
    }
    return out + "\""
}
}
