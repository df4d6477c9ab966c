import FoundationEssentials
import ParlaCore

/// One text to render in a batch, with its per-item overrides.
public struct BatchItem: Sendable, Hashable, Codable {
    /// The item's identifier: its output files are `ID.wav` and `ID.json`.
    public var id: String
    /// The text (SSML markup when ``isSSML``).
    public var text: String
    /// The language of text without an explicit language (nil: the batch's, else detected).
    public var language: LanguageTag?
    /// The voice for text whose language it speaks (nil: the batch's, else each language's
    /// default).
    public var voice: SpeechVoice?
    /// The rate in words per minute, 80–1,000 (nil: the voice's), as ``/ParlaCore/Utterance/wordsPerMinute``.
    public var wordsPerMinute: Double?
    /// Pitch multiplier, 0–2 (nil: 1, the voice's normal pitch), as ``/ParlaCore/Utterance/pitch``.
    public var pitch: Double?
    /// Whether ``text`` is SSML.
    public var isSSML = false
    /// 1-based line in the input (0 for an item read from its own file).
    public var line: Int
    /// A UTF-8 text file to speak instead of ``text``: it is read and spoken paragraph by
    /// paragraph (paragraphs end at blank lines), never whole, so it may be of any length.
    public var textFile: URL?

    /// Creates an item.
    public init(
        id: String, text: String, language: LanguageTag? = nil, voice: SpeechVoice? = nil, wordsPerMinute: Double? = nil,
        pitch: Double? = nil, isSSML: Bool = false, line: Int = 0, textFile: URL? = nil
    ) {
        self.textFile = textFile
        self.id = id
        self.text = text
        self.language = language
        self.voice = voice
        self.wordsPerMinute = wordsPerMinute
        self.pitch = pitch
        self.isSSML = isSSML
        self.line = line
    }
}

/// Reading batch inputs: one utterance per line of text, TSV or JSONL.
public enum BatchInput {
    /// How the lines of an input are read.
    public enum Format: String, Sendable, CaseIterable {
        /// One utterance per line; the id is the line number, zero-padded to 6 digits.
        case text
        /// `id<TAB>text` or `id<TAB>language<TAB>text`.
        case tsv
        /// `{"id", "text", "language"?, "voice"?, "rate"?, "pitch"?, "ssml"?}` per line.
        case jsonl

        /// The format a file name suggests (`.tsv`, `.jsonl`/`.ndjson`, anything else: text).
        public static func guess(path: String) -> Format {
            let lower = path.lowercased()
            if lower.hasSuffix(".tsv") { return .tsv }
            if lower.hasSuffix(".jsonl") || lower.hasSuffix(".ndjson") { return .jsonl }
            return .text
        }
    }

    /// A line that could not be read as an item: reported, and the batch goes on.
    public struct LineError: Error, Sendable, Hashable {
        /// The item's id when it could be read, else `line-N`.
        public var id: String
        /// 1-based line number.
        public var line: Int
        /// What is wrong, and what to do.
        public var reason: String
        /// An error for line `line` of item `id`.
        public init(id: String, line: Int, reason: String) {
            self.id = id
            self.line = line
            self.reason = reason
        }
    }

    private struct JSONItem: Decodable {
        var id: String?
        var text: String?
        var language: String?
        var voice: String?
        var rate: Double?
        var pitch: Double?
        var ssml: Bool?
    }

    /// Reads line `number` (1-based) of an input in `format`, finding the voices it names in
    /// `catalog`. The file's fields are turned into the item's units here: a JSONL `pitch` of
    /// 0–99 (50: normal) becomes a ``BatchItem/pitch``, a `rate` stays words per
    /// minute. Blank lines give nil.
    public static func item(
        fromLine raw: Substring, number: Int, format: Format, catalog: VoiceCatalog
    ) -> Result<BatchItem, LineError>? {
        let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
        if line.allSatisfy(\.isWhitespace) { return nil }
        let fallbackID = "line-\(number)"
        switch format {
        case .text:
            return .success(BatchItem(id: lineID(number), text: String(line), line: number))
        case .tsv:
            let fields = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count >= 2 else {
                return .failure(LineError(id: fallbackID, line: number, reason: "expected 'id<TAB>text' or 'id<TAB>language<TAB>text'"))
            }
            let id = String(fields[0])
            if let problem = invalidID(id) { return .failure(LineError(id: fallbackID, line: number, reason: problem)) }
            if fields.count == 3 {
                guard let language = LanguageTag(String(fields[1])) else {
                    return .failure(LineError(id: id, line: number, reason: ParlaError.invalidLanguageTag(String(fields[1])).description))
                }
                return .success(BatchItem(id: id, text: String(fields[2]), language: language, line: number))
            }
            return .success(BatchItem(id: id, text: String(fields[1]), line: number))
        case .jsonl:
            let decoded: JSONItem
            do {
                decoded = try JSONDecoder().decode(JSONItem.self, from: Data(line.utf8))
            } catch {
                return .failure(
                    LineError(
                        id: fallbackID, line: number,
                        reason: "not a JSON object with string \"id\" and \"text\" (check the quoting and commas)"))
            }
            guard let id = decoded.id, let text = decoded.text else {
                return .failure(LineError(id: decoded.id ?? fallbackID, line: number, reason: "a JSONL item needs \"id\" and \"text\""))
            }
            if let problem = invalidID(id) { return .failure(LineError(id: fallbackID, line: number, reason: problem)) }
            var item = BatchItem(id: id, text: text, wordsPerMinute: decoded.rate, isSSML: decoded.ssml ?? false, line: number)
            do throws(ParlaError) {
                item.language = try decoded.language.map { l throws(ParlaError) in try LanguageTag(parsing: l) }
                item.voice = try decoded.voice.map { v throws(ParlaError) in try catalog.voice(identifier: v) }
                if let pitch = decoded.pitch {
                    guard (0...99).contains(pitch) else { throw .parameterOutOfRange(name: "pitch", value: pitch, range: 0...99) }
                    item.pitch = pitch / 50
                }
            } catch {
                return .failure(LineError(id: id, line: number, reason: error.description))
            }
            return .success(item)
        }
    }

    /// The id of line `number` of a text input: the number zero-padded to 6 digits.
    public static func lineID(_ number: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }

    /// Why `id` cannot name output files, or nil if it can.
    public static func invalidID(_ id: String) -> String? {
        if id.isEmpty { return "the id is empty" }
        if id.utf8.count > 200 { return "the id is longer than 200 bytes" }
        if id.hasPrefix(".") { return "the id '\(id)' starts with '.'" }
        if id.contains("/") || id.contains("\0") { return "the id '\(id)' contains '/' or a NUL byte" }
        return nil
    }

    /// Whether `id` belongs to shard `index` of `count`: a 64-bit FNV-1a hash of its UTF-8 bytes,
    /// modulo `count`. The same on every machine and run.
    public static func shard(of id: String, count: Int) -> Int {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in id.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01B3
        }
        return Int(hash % UInt64(count))
    }
}
