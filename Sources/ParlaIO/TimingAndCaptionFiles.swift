import ParlaCore
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes the `--timings` JSON document of a rendering made of one or more pieces (a long
/// file is spoken paragraph by paragraph) without holding its words in memory: entries go to
/// anonymous spill files and are joined under the final name at ``commit(sampleCount:)``.
/// The document is the one ``SpeechTimeline/json()`` writes, offsets in the whole input.
package final class TimingsFileWriter {
    private let file: AtomicFile
    private let sampleRate: Int
    private let segments: Spill
    private let sentences: Spill
    private let words: Spill
    private var segmentCount = 0

    /// Starts a timings file destined for `path`.
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``.
    package init(path: String, sampleRate: Int, durable: Bool = true) throws(ParlaError) {
        file = try AtomicFile(path: path, durable: durable)
        self.sampleRate = sampleRate
        segments = try Spill(for: path)
        sentences = try Spill(for: path)
        words = try Spill(for: path)
    }

    /// Adds the timeline of a piece whose text starts at scalar `scalarOffset` of the input and
    /// whose audio starts at sample `sampleOffset`.
    package func add(_ timeline: SpeechTimeline, scalarOffset: Int, sampleOffset: Int) throws(ParlaError) {
        let shift = TimelineJSON.Shift(scalars: scalarOffset, samples: sampleOffset, segments: segmentCount)
        for s in timeline.segments { try segments.add(TimelineJSON.entry(s, shift: shift, sampleRate: sampleRate)) }
        for s in timeline.sentences { try sentences.add(TimelineJSON.entry(s, shift: shift, sampleRate: sampleRate)) }
        for w in timeline.words { try words.add(TimelineJSON.entry(w, shift: shift, sampleRate: sampleRate)) }
        segmentCount += timeline.segments.count
    }

    /// Writes the document for `sampleCount` samples of audio and renames it into place.
    package func commit(sampleCount: Int) throws(ParlaError) {
        try file.write(Array((TimelineJSON.header(sampleRate: sampleRate, sampleCount: sampleCount) + "  \"segments\": [").utf8))
        try segments.copy(to: file)
        try file.write(Array((segments.isEmpty ? "],\n  \"sentences\": [" : "\n  ],\n  \"sentences\": [").utf8))
        try sentences.copy(to: file)
        try file.write(Array((sentences.isEmpty ? "],\n  \"words\": [" : "\n  ],\n  \"words\": [").utf8))
        try words.copy(to: file)
        try file.write(Array((words.isEmpty ? "]\n}\n" : "\n  ]\n}\n").utf8))
        try file.commit()
    }

    /// Abandons the file.
    package func discard() { file.discard() }
}

/// WebVTT captions, one cue per sentence, written as pieces are rendered.
package final class CaptionFileWriter {
    private let file: AtomicFile
    private let sampleRate: Int
    private var cues = 0

    /// Starts a caption file destined for `path`.
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``.
    package init(path: String, sampleRate: Int, durable: Bool = true) throws(ParlaError) {
        file = try AtomicFile(path: path, durable: durable)
        self.sampleRate = sampleRate
        try file.write(Array("WEBVTT\n\n".utf8))
    }

    /// Adds a cue for each sentence of a piece whose audio starts at `sampleOffset`;
    /// `text` is the piece's input text (markup for SSML, which is stripped from the cues).
    package func add(_ sentences: [SentenceMark], text: String, isMarkup: Bool, sampleOffset: Int) throws(ParlaError) {
        let scalars = Array(text.unicodeScalars)
        for s in sentences {
            let lo = min(max(s.range.lowerBound, 0), scalars.count), hi = min(max(s.range.upperBound, lo), scalars.count)
            let cue = Self.cueText(String(String.UnicodeScalarView(scalars[lo..<hi])), isMarkup: isMarkup)
            guard !cue.isEmpty, s.endSample > s.startSample else { continue }
            cues += 1
            let block = "\(cues)\n\(timestamp(s.startSample + sampleOffset)) --> \(timestamp(s.endSample + sampleOffset))\n\(cue)\n\n"
            try file.write(Array(block.utf8))
        }
    }

    /// Renames the captions into place.
    package func commit() throws(ParlaError) { try file.commit() }

    /// Abandons the file.
    package func discard() { file.discard() }

    /// `HH:MM:SS.mmm`.
    func timestamp(_ sample: Int) -> String {
        let ms = (sample * 1000 + sampleRate / 2) / sampleRate
        func pad(_ v: Int, _ n: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, n - s.count)) + s }
        return "\(pad(ms / 3_600_000, 2)):\(pad(ms / 60_000 % 60, 2)):\(pad(ms / 1000 % 60, 2)).\(pad(ms % 1000, 3))"
    }

    /// A sentence as cue text: markup removed, whitespace collapsed to single spaces (a cue
    /// must not hold a blank line or `-->`), `&`, `<` and `>` escaped as WebVTT requires.
    static func cueText(_ sentence: String, isMarkup: Bool) -> String {
        var plain = sentence
        if isMarkup {
            var out = ""
            var tag: String?  // the tag being read
            for ch in sentence {
                if ch == "<" {
                    tag = ""
                } else if ch == ">", let t = tag {
                    if t.hasPrefix("break") { out.append(" ") }  // a pause separates words
                    tag = nil
                } else if let t = tag {
                    tag = t + String(ch)
                } else {
                    out.append(ch)
                }
            }
            plain = Self.decodingNumericReferences(out).replacing("&lt;", with: "<").replacing("&gt;", with: ">")
                .replacing("&quot;", with: "\"").replacing("&apos;", with: "'")
                .replacing("&amp;", with: "&")
        }
        let words = plain.split(whereSeparator: { $0.isWhitespace || $0.isNewline })
        return words.joined(separator: " ")
            .replacing("&", with: "&amp;").replacing("<", with: "&lt;")
            .replacing(">", with: "&gt;")
    }
}

extension CaptionFileWriter {
    /// `text` with XML character references (`&#8217;`, `&#x2019;`) replaced by their
    /// characters; a reference to no valid scalar is left as it is.
    static func decodingNumericReferences(_ text: String) -> String {
        guard text.contains("&#") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstRange(of: "&#") {
            out += rest[..<amp.lowerBound]
            let after = rest[amp.upperBound...]
            let hex = after.first == "x" || after.first == "X"
            let digits = (hex ? after.dropFirst() : after).prefix { hex ? $0.isHexDigit : $0.isASCII && $0.isNumber }
            if !digits.isEmpty, digits.count <= 8, digits.endIndex < after.endIndex, after[digits.endIndex] == ";",
                let value = UInt32(digits, radix: hex ? 16 : 10), let scalar = Unicode.Scalar(value)
            {
                out.unicodeScalars.append(scalar)
                rest = after[after.index(after: digits.endIndex)...]
            } else {
                out += "&#"
                rest = after
            }
        }
        return out + rest
    }
}

/// Comma-separated JSON entries kept in an unlinked temporary file.
private final class Spill {
    private let stream: UnsafeMutablePointer<FILE>
    private(set) var isEmpty = true
    private var closed = false
    private let path: String

    /// An unlinked file next to `path` (on the output's disk, not in a RAM-backed /tmp).
    init(for path: String) throws(ParlaError) {
        self.path = path
        let directory = AtomicFile.split(path).directory
        var fd: Int32 = -1
        #if os(Linux)
            fd = AtomicFile.unnamedFile(in: directory)
        #endif
        if fd < 0 {
            // Named like the other temporary files (`.NAME.parla-PID-….tmp`), so that a process
            // killed before the unlink below leaves nothing that the cleanups do not find.
            var template = Array((directory + "/.spill.parla-\(getpid())-XXXXXX.tmp").utf8CString)
            fd = template.withUnsafeMutableBufferPointer { t in t.baseAddress.map { mkstemps($0, 4) } ?? -1 }
            guard fd >= 0 else { throw .unwritableOutput(path: path, reason: "no temporary file: " + systemErrorMessage()) }
            template.withUnsafeBufferPointer { t in _ = t.baseAddress.map { unlink($0) } }
        }
        guard let f = fdopen(fd, "w+") else {
            close(fd)
            throw .unwritableOutput(path: path, reason: "no temporary file: " + systemErrorMessage())
        }
        stream = f
    }

    deinit { if !closed { fclose(stream) } }

    func add(_ entry: String) throws(ParlaError) {
        let text = (isEmpty ? "\n    " : ",\n    ") + entry
        isEmpty = false
        guard fputs(text, stream) >= 0 else { throw .unwritableOutput(path: path, reason: systemErrorMessage()) }
    }

    func copy(to file: AtomicFile) throws(ParlaError) {
        guard fflush(stream) == 0 else { throw .unwritableOutput(path: path, reason: systemErrorMessage()) }
        rewind(stream)
        var block = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = block.withUnsafeMutableBytes { fread($0.baseAddress, 1, 1 << 16, stream) }
            if n == 0 { break }
            try file.write(block[0..<n])
        }
        fclose(stream)
        closed = true
    }
}
