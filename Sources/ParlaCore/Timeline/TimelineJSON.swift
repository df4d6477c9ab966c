/// The `--timings` JSON document. Schema (version 1), every offset in Unicode scalars of the
/// input text, end exclusive; times in milliseconds from the start of the audio; a word's
/// "phonemes" (IPA, as the engine spoke it) only where the engine said:
///
/// ```
/// { "version": 1, "sampleRate": 22050, "durationMs": 2140.5, "offsetUnit": "unicode-scalar",
///   "segments":  [ { "start": 0, "end": 12, "language": "en", "voice": "espeak-ng.en-us",
///                    "startMs": 0.0, "endMs": 950.3 } ],
///   "sentences": [ { "start": 0, "end": 12, "startMs": 0.0, "endMs": 870.1 } ],
///   "words":     [ { "start": 0, "end": 5, "word": "Hello", "startMs": 0.0, "endMs": 290.2,
///                    "segment": 0, "estimated": false, "phonemes": "həlˈoʊ" } ] }
/// ```
extension SpeechTimeline {
    /// The timeline as the JSON document described above.
    public func json() -> String {
        var out = TimelineJSON.header(sampleRate: sampleRate, sampleCount: sampleCount) + "  \"segments\": ["
        let shift = TimelineJSON.Shift()
        for (i, s) in segments.enumerated() {
            out += (i == 0 ? "\n    " : ",\n    ") + TimelineJSON.entry(s, shift: shift, sampleRate: sampleRate)
        }
        out += segments.isEmpty ? "],\n  \"sentences\": [" : "\n  ],\n  \"sentences\": ["
        for (i, s) in sentences.enumerated() {
            out += (i == 0 ? "\n    " : ",\n    ") + TimelineJSON.entry(s, shift: shift, sampleRate: sampleRate)
        }
        out += sentences.isEmpty ? "],\n  \"words\": [" : "\n  ],\n  \"words\": ["
        for (i, w) in words.enumerated() {
            out += (i == 0 ? "\n    " : ",\n    ") + TimelineJSON.entry(w, shift: shift, sampleRate: sampleRate)
        }
        out += words.isEmpty ? "]\n}\n" : "\n  ]\n}\n"
        return out
    }
}

/// The pieces of the timings document, shared by ``SpeechTimeline/json()`` and the streaming
/// ``TimingsFileWriter``.
package enum TimelineJSON {
    /// Where a piece of a longer rendering sits: added to its offsets, samples and segment indices.
    package struct Shift {
        package var scalars = 0
        package var samples = 0
        package var segments = 0

        package init(scalars: Int = 0, samples: Int = 0, segments: Int = 0) {
            self.scalars = scalars
            self.samples = samples
            self.segments = segments
        }
    }

    package static func header(sampleRate: Int, sampleCount: Int) -> String {
        "{\n  \"version\": 1,\n  \"sampleRate\": \(sampleRate),\n"
            + "  \"durationMs\": \(ms(sampleCount, sampleRate)),\n  \"offsetUnit\": \"unicode-scalar\",\n"
    }

    package static func entry(_ s: SegmentMark, shift: Shift, sampleRate r: Int) -> String {
        "{\"start\": \(s.range.lowerBound + shift.scalars), \"end\": \(s.range.upperBound + shift.scalars), \"language\": \(JSONText.quoted(s.language.identifier)), \"voice\": \(JSONText.quoted(s.voice)), \"startMs\": \(ms(s.startSample + shift.samples, r)), \"endMs\": \(ms(s.endSample + shift.samples, r))}"
    }

    package static func entry(_ s: SentenceMark, shift: Shift, sampleRate r: Int) -> String {
        "{\"start\": \(s.range.lowerBound + shift.scalars), \"end\": \(s.range.upperBound + shift.scalars), \"startMs\": \(ms(s.startSample + shift.samples, r)), \"endMs\": \(ms(s.endSample + shift.samples, r))}"
    }

    package static func entry(_ w: WordMark, shift: Shift, sampleRate r: Int) -> String {
        "{\"start\": \(w.range.lowerBound + shift.scalars), \"end\": \(w.range.upperBound + shift.scalars), \"word\": \(JSONText.quoted(w.word)), \"startMs\": \(ms(w.startSample + shift.samples, r)), \"endMs\": \(ms(w.endSample + shift.samples, r)), \"segment\": \(w.segment + shift.segments), \"estimated\": \(w.isEstimated)\(w.phonemes.map { ", \"phonemes\": \(JSONText.quoted($0))" } ?? "")}"
    }

    /// Milliseconds with one decimal, rounded to the nearest tenth.
    package static func ms(_ sample: Int, _ sampleRate: Int) -> String {
        let tenths = (sample * 10_000 + sampleRate / 2) / sampleRate
        return "\(tenths / 10).\(tenths % 10)"
    }
}

/// Helpers for writing JSON text by hand (fast, with a fixed key order).
package enum JSONText {
    /// `value` with exactly three decimals, e.g. `1.500`.
    package static func threeDecimals(_ value: Double) -> String {
        // JSON has no NaN or infinity: NaN is written as 0, infinities as ±1e12.
        let finite = value.isNaN ? 0 : min(max(value, -1e12), 1e12)
        let thousandths = Int((finite * 1000).rounded())
        let frac = String(abs(thousandths) % 1000)
        return (thousandths < 0 ? "-" : "") + "\(abs(thousandths) / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    /// `s` as a JSON string literal, quotes included.
    package static func quoted(_ s: String) -> String {
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
