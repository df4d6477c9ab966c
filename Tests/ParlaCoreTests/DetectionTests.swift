import Foundation
import Testing
@testable import ParlaCore
import ParlaTestSupport
import ParlaIO

/// The detector with the shipped model and catalog defaults, and no user preferences.
let sharedDetector: LanguageDetector = {
    let catalog = try! VoiceCatalog.default()
    return try! LanguageDetector.load(catalog: catalog, preferences: LanguagePreferences([]))
}()

/// (language, text) of every segment.
func languages(_ text: String, _ detector: LanguageDetector = sharedDetector) -> [String] {
    detector.detect(text).map { $0.language?.identifier ?? "und" }
}

/// Checks the invariants every result must keep: segments in order, covering the text,
/// non-empty, on grapheme-cluster boundaries, with indices matching the offsets.
func checkInvariants(_ text: String, _ segments: [DetectedSegment], sourceLocation: SourceLocation = #_sourceLocation) {
    let scalars = text.unicodeScalars
    if scalars.isEmpty {
        #expect(segments.isEmpty, sourceLocation: sourceLocation)
        return
    }
    #expect(segments.first?.range.lowerBound == 0, sourceLocation: sourceLocation)
    #expect(segments.last?.range.upperBound == scalars.count, sourceLocation: sourceLocation)
    for (a, b) in zip(segments, segments.dropFirst()) {
        #expect(a.range.upperBound == b.range.lowerBound, sourceLocation: sourceLocation)
    }
    var lo = scalars.startIndex
    for s in segments {
        #expect(!s.range.isEmpty, sourceLocation: sourceLocation)
        #expect((0...1).contains(s.confidence), sourceLocation: sourceLocation)
        let hi = scalars.index(lo, offsetBy: s.range.count)
        defer { lo = hi }
        #expect(s.indices == lo..<hi, sourceLocation: sourceLocation)
        #expect(lo.samePosition(in: text) != nil, "segment start \(s.range.lowerBound) splits a grapheme cluster", sourceLocation: sourceLocation)
        #expect(hi.samePosition(in: text) != nil, "segment end \(s.range.upperBound) splits a grapheme cluster", sourceLocation: sourceLocation)
    }
}

@Suite("Unicode scripts")
struct ScriptTableTests {
    /// One letter of every script the catalog has a default voice for, plus the scripts
    /// shared by several languages.
    static let samples: [String: Character] = [
        "Latn": "A", "Cyrl": "Ж", "Arab": "ب", "Grek": "α", "Hebr": "א", "Hani": "中", "Hira": "あ",
        "Kana": "ア", "Jpan": "あ", "Hang": "한", "Deva": "क", "Beng": "অ", "Gujr": "ક", "Guru": "ਕ",
        "Orya": "କ", "Taml": "க", "Telu": "క", "Knda": "ಕ", "Mlym": "ക", "Sinh": "ක", "Thai": "ก",
        "Mymr": "က", "Geor": "ა", "Armn": "Ա", "Ethi": "ሀ", "Cher": "Ꭰ",
    ]

    @Test func everyScriptWithAVoiceIsInTheTable() throws {
        let catalog = try VoiceCatalog.default()
        #expect(!catalog.scriptDefaults.isEmpty)
        for code in catalog.scriptDefaults.keys {
            let sample = try #require(Self.samples[code], "add a sample letter for \(code)")
            let expected = code == "Jpan" ? "Hira" : code
            #expect(UnicodeScript.of(sample.unicodeScalars.first!).code == expected, "\(sample) should be \(expected)")
        }
    }

    @Test func neutralInheritedAstralAndUnassigned() {
        #expect(UnicodeScript.of("1") == .common)
        #expect(UnicodeScript.of(" ") == .common)
        #expect(UnicodeScript.of("😀") == .common)
        #expect(UnicodeScript.of("\u{0301}") == .inherited)
        #expect(UnicodeScript.of("\u{200D}") == .inherited)
        #expect(UnicodeScript.of("𐌰").code == "Goth")
        #expect(UnicodeScript.of("𠀀").code == "Hani")
        #expect(UnicodeScript.of(Unicode.Scalar(0x0378)!) == .unknown)
        #expect(UnicodeScript(code: "Latn")?.code == "Latn")
        #expect(UnicodeScript(code: "Nope") == nil)
    }

    @Test func scriptExtensions() {
        #expect(UnicodeScript.extensions(of: "\u{060C}")!.map(\.code).contains("Arab"))  // Arabic comma
        #expect(UnicodeScript.extensions(of: "\u{0964}")!.map(\.code).contains("Deva"))  // danda
        #expect(UnicodeScript.extensions(of: "\u{0964}")!.map(\.code).contains("Beng"))
        let choon = UnicodeScript.extensions(of: "\u{30FC}")!.map(\.code)  // ー
        #expect(choon.contains("Hira") && choon.contains("Kana"))
        #expect(UnicodeScript.extensions(of: "a") == nil)
    }
}

@Suite("language detection")
struct DetectionTests {
    @Test func theSelectedSentenceGetsOneVoicePerLanguage() {
        let text = "The revolutionary iPhone… Το επαναστατικό τηλέφωνο… هاتف ثوري"
        let segments = sharedDetector.detect(text)
        checkInvariants(text, segments)
        #expect(segments.map { $0.language?.identifier ?? "und" } == ["en", "el", "ar"])
        #expect(String(text[segments[0].indices]) == "The revolutionary iPhone… ")
        #expect(String(text[segments[1].indices]) == "Το επαναστατικό τηλέφωνο… ")
        #expect(segments.map(\.script) == ["Latn", "Grek", "Arab"])
    }

    @Test(arguments: [
        ("Її батько працює в Києві", "uk"),
        ("Усё добра, дзякуй вам за дапамогу", "be"),
        ("Ђорђе живи у Београду са породицом", "sr"),
        ("Ова е многу убава куќа", "mk"),
        ("Қазақстан Республикасының астанасы", "kk"),
        ("Это очень хорошая идея", "ru"),
        ("Това е много хубава къща", "bg"),
        ("این یک کتاب خوب است", "fa"),
        ("یہ ایک اچھی کتاب ہے", "ur"),
        ("هذا كتاب جيد جدا", "ar"),
    ])
    func lettersThatIdentifyALanguage(text: String, expected: String) {
        #expect(sharedDetector.mainLanguage(of: text)?.identifier == expected, "\(text)")
    }

    @Test func japaneseWithKanaAndChinese() {
        #expect(languages("私は東京に住んでいます。") == ["ja"])
        #expect(languages("我住在北京，每天坐地铁上班。") == ["zh"])
        #expect(languages("カタカナのテキスト") == ["ja"])
        let mixed = "今日は良い天気ですね。今天天气很好。"
        checkInvariants(mixed, sharedDetector.detect(mixed))
        #expect(languages(mixed) == ["ja", "zh"])
    }

    @Test func digitsAndPunctuationAtRunEdges() {
        let text = "«Bonjour», dit-il. 2024 Ελλάδα! (Ελλάδα)"
        let segments = sharedDetector.detect(text)
        checkInvariants(text, segments)
        #expect(segments.map { $0.language?.identifier ?? "und" } == ["fr", "el"])
        // Leading punctuation stays with the first run; trailing punctuation and the digits
        // before the space go with the text before them.
        #expect(String(text[segments[0].indices]) == "«Bonjour», dit-il. 2024 ")
        #expect(String(text[segments[1].indices]) == "Ελλάδα! (Ελλάδα)")
        // An opening bracket with no space before it starts the next run.
        let tight = "hello(Ελλάδα)"
        let t = sharedDetector.detect(tight)
        #expect(t.map { String(tight[$0.indices]) } == ["hello", "(Ελλάδα)"])
        // Only digits and punctuation: one segment, no language.
        let numbers = sharedDetector.detect("12:30 — 42 %")
        #expect(numbers.count == 1 && numbers[0].language == nil && numbers[0].script == nil)
        #expect(sharedDetector.mainLanguage(of: "12:30") == nil)
    }

    @Test func emojiAndCombiningMarksStayWhole() {
        let texts = [
            "I love 🍕 and 🇮🇹! Αγαπώ την πίτσα 👍🏽",
            "Family 👨‍👩‍👧 Οικογένεια 👨‍👩‍👧",
            "Cafe\u{301} au lait Ελλάδα\u{301}\u{302}",
            "e\u{301}\u{302}\u{303}Ж\u{301}",
            "👍🏽Ελλάδα",
        ]
        for text in texts {
            checkInvariants(text, sharedDetector.detect(text))
        }
        #expect(languages(texts[0]) == ["en", "el"])
    }

    @Test func emptyAndWhitespace() {
        #expect(sharedDetector.detect("").isEmpty)
        #expect(sharedDetector.mainLanguage(of: "") == nil)
        let blank = sharedDetector.detect("  \n\t ")
        #expect(blank.count == 1 && blank[0].language == nil && blank[0].range == 0..<5)
    }

    @Test func aLatinWordInsideRussianText() {
        let text = "Я купил новый iPhone вчера вечером в магазине"
        let segments = sharedDetector.detect(text)
        checkInvariants(text, segments)
        #expect(segments.count == 3)
        #expect(segments.first?.language == "ru" && segments.last?.language == "ru")
        #expect(String(text[segments[1].indices]) == "iPhone ")
        #expect(segments[1].script == "Latn")
    }

    @Test func contextKeepsRealSwitchesAndIgnoresFlapping() {
        let text = "The meeting starts at ten. Nous parlerons du budget et des nouveaux projets demain matin. Thanks everyone for coming today."
        let segments = sharedDetector.detect(text)
        checkInvariants(text, segments)
        #expect(segments.map { $0.language?.identifier ?? "und" } == ["en", "fr", "en"])
        #expect(String(text[segments[1].indices]).hasPrefix("Nous parlerons"))
        // Words that look foreign on their own do not break an English sentence.
        #expect(languages("We met in Paris at the hotel restaurant near the station and had a coffee.") == ["en"])
        #expect(languages("Der Zug nach Berlin fährt um acht Uhr vom Hauptbahnhof ab.") == ["de"])
    }

    /// The detector does not pretend: text of a language the model has no class for gets a
    /// low confidence (Haitian Creole, Greenlandic and Lojban are written in Latin letters, and
    /// each is labelled with some Latin-script language), while text of its own languages
    /// keeps a high one: Guarani and Oromo, which had no class before Mozilla's and
    /// LibreOffice's translations were read, among them. The labels are not changed.
    @Test func textOfALanguageWithoutAClassGetsALowConfidence() throws {
        for text in [
            "Mwen renmen ou anpil, epi mwen vle ale lakay mwen kounye a.",
            "Kalaallit Nunaanni inuit amerlanerit kalaallisut oqaluttarput.",
            "mi nelci lo nu tavla fo la lojban ca lo cabdei",
        ] {
            let segments = sharedDetector.detect(text).filter { $0.language != nil }
            #expect(segments.count == 1)
            #expect(try #require(segments.first).confidence < 0.5, "\(text): \(segments)")
        }
        for text in [
            "Hello, how are you today? I hope the weather is nice where you are.",
            "Bonjour, comment allez-vous aujourd'hui ? J'espère que tout va bien.",
            "Habari za asubuhi, jina langu ni Juma na ninaishi Dar es Salaam.",
            "Che ha'e peteĩ mbo'ehára ha amba'apo Paraguáipe.",
            "Afaan Oromoo afaan hojii naannoo Oromiyaa ti.",
        ] {
            let segments = sharedDetector.detect(text).filter { $0.language != nil }
            #expect(segments.count == 1)
            #expect(try #require(segments.first).confidence > 0.9, "\(text): \(segments)")
        }
        // Tatar's class learns from CLDR's names alone, and this sentence of everyday prose
        // sits at its fit limit: 0.94 under the naive-Bayes table, 0.55–1.0 under the refined
        // one depending on the training run's fit scale. It must stay above half (not taken
        // for a language without a class) and keep its label.
        let tatar = sharedDetector.detect("Мин татарча сөйләшәм, ә минем әнием Казанда яши.").filter { $0.language != nil }
        #expect(tatar.map(\.language?.language) == ["tt"])
        #expect(try #require(tatar.first).confidence > 0.5, "\(tatar)")
    }

    /// A letter or two of another script inside a word belongs to the word: Chuvash typed
    /// with the Latin ă, ĕ and ç inside Cyrillic words is one stretch of one language (it fell
    /// into 13 segments alternating two voices), while a longer stretch of another script
    /// keeps its own segment.
    @Test func aStrayLetterOfAnotherScriptStaysInItsWord() throws {
        let chuvash = "Эпĕ чăвашла калаçатăп, манăн анне Шупашкарта пурăнать."
        let segments = sharedDetector.detect(chuvash)
        #expect(segments.count == 1, "\(segments)")
        #expect(segments.first?.script == "Cyrl")
        #expect(try #require(segments.first).confidence < 0.5, "no class for Chuvash: \(segments)")
        #expect(sharedDetector.detect("Microsoftовский продукт").map(\.script) == ["Latn", "Cyrl"])
        let scripts = LanguageDetector.scripts(of: Array("калаçатăп".unicodeScalars.map(\.value)))
        #expect(Set(scripts.map(\.code)) == ["Cyrl"])
        // Two letters next to one of another script: nothing to say which is the stray.
        #expect(LanguageDetector.scripts(of: Array("μm".unicodeScalars.map(\.value))).map(\.code) == ["Grek", "Latn"])
    }

    /// Web addresses are in no language: a short sentence around one keeps its language, and an
    /// address alone has none (speech then uses the default language).
    @Test func webAddressesAreNoEvidence() {
        #expect(sharedDetector.mainLanguage(of: "Tài liệu đầy đủ có tại: <https://www.gnu.org/software/coreutils/head>") == "vi")
        #expect(sharedDetector.mainLanguage(of: "Besuchen Sie www.example.de für mehr.") == "de")
        #expect(sharedDetector.mainLanguage(of: "https://www.gnu.org/software/coreutils/") == nil)
        let text = "Voir https://example.com/page pour les détails."
        let v = text.unicodeScalars.map(\.value)
        #expect(LanguageDetector.urls(in: v) == [5..<29])
        // Only at the start of a word, and in any case.
        #expect(LanguageDetector.urls(in: "awww.x HTTP://A.B".unicodeScalars.map(\.value)) == [7..<17])
    }

    @Test func ngramCountMatchesTraining() {
        // "ab" framed is [2, a, b, 3]: unigrams a, b; bigrams 2a, ab, b3; trigrams 2ab, ab3;
        // four-grams 2ab3; none longer.
        #expect(LanguageDetector.ngramCount(letters: 2, maxOrder: 5) == 2 + 3 + 2 + 1)
        #expect(LanguageDetector.ngramCount(letters: 1, maxOrder: 3) == 1 + 2 + 1)
        #expect(LanguageDetector.ngramCount(letters: 10, maxOrder: 1) == 10)
    }

    @Test func preferencesBreakTies() {
        for tag in ["de", "nl", "en"] {
            var d = sharedDetector
            d.preferences = LanguagePreferences([LanguageTag(tag)!])
            #expect(d.mainLanguage(of: "Hotel")?.identifier == tag)
        }
        // With no preference the script's default (voices/defaults.json) decides.
        #expect(sharedDetector.mainLanguage(of: "Hotel") == "en")
        // Text that can be told apart is not overridden by a preference.
        var d = sharedDetector
        d.preferences = LanguagePreferences(["de"])
        #expect(d.mainLanguage(of: "Je voudrais une chambre pour deux nuits, s'il vous plaît.") == "fr")
    }

    @Test func candidatesRestrictTheChoice() {
        var d = sharedDetector
        d.candidates = ["fr", "el"]
        #expect(d.mainLanguage(of: "Good morning everyone") == "fr")
        #expect(languages("Hola Ελλάδα Привет", d) == ["fr", "el", "und"])
    }

    @Test func preferencesFromTheEnvironment() {
        #expect(LanguagePreferences.fromEnvironment(["LANGUAGE": "fr:de_AT", "LANG": "it_IT.UTF-8"]).languages.map(\.identifier) == ["fr", "de-AT", "it-IT"])
        #expect(LanguagePreferences.fromEnvironment(["LANG": "pt_BR.UTF-8@euro"]).languages == ["pt-BR"])
        #expect(LanguagePreferences.fromEnvironment(["LANG": "C.UTF-8"]).languages.isEmpty)
        #expect(LanguagePreferences.fromEnvironment(["LC_ALL": "POSIX", "LANG": "de_DE"]).languages.isEmpty)
        #expect(LanguagePreferences.fromEnvironment([:]).languages.isEmpty)
    }

    /// The texts of the timeline property tests (scripts, quotes, initials, emoji sequences,
    /// marks without a base, bidi and zero-width controls, long runs): segments keep their rules.
    @Test func generatedHostileTexts() {
        var generator = TextCaseGenerator(seed: 15)
        for _ in 0..<2000 {
            let c = generator.next()
            guard !c.isSSML else { continue }
            checkInvariants(c.text, sharedDetector.detect(c.text))
        }
    }

    @Test func oneMegabyteOfRandomUnicode() {
        var rng = SeededGenerator(seed: 42)
        var text = ""
        text.unicodeScalars.reserveCapacity(400_000)
        while text.utf8.count < 1_000_000 {
            // Mostly BMP, some astral; no surrogates.
            let v: UInt32 = rng.next() % 8 == 0 ? UInt32.random(in: 0x10000...0x10FFFF, using: &rng) : UInt32.random(in: 0...0xFFFF, using: &rng)
            if let s = Unicode.Scalar(v) { text.unicodeScalars.append(s) }
        }
        let segments = sharedDetector.detect(text)
        checkInvariants(text, segments)
        // And runs of real words of many scripts, repeated.
        let words = ["hello", "мир", "κόσμος", "世界", "こんにちは", "مرحبا", "नमस्ते", "שלום", "😀", "1984", "—", "\u{301}", "🇫🇷"]
        var mixed = ""
        for _ in 0..<50_000 { mixed += words[Int(rng.next() % UInt64(words.count))] + (rng.next() % 3 == 0 ? " " : "") }
        checkInvariants(mixed, sharedDetector.detect(mixed))
    }

    @Test func aDamagedModelIsAnErrorNotACrash() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("parla-model-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = try Data(contentsOf: URL(fileURLWithPath: try VoiceCatalog.locateDirectory() + "/langid.bin"))
        for (name, bytes) in [("garbage", Data("not a model".utf8)), ("truncated", good.prefix(good.count / 2)), ("empty", Data())] {
            let path = dir.appendingPathComponent(name).path
            try bytes.write(to: URL(fileURLWithPath: path))
            #expect(throws: ParlaError.self) { try LanguageModel(contentsOf: path) }
        }
        #expect(throws: ParlaError.self) { try LanguageModel(contentsOf: dir.appendingPathComponent("missing").path) }
        // A language bias that is not a small finite number (NaN here) is refused too: it would
        // poison every decision of its group.
        var bad = good
        let bias = try #require(firstBiases(in: good)?.offset)
        bad.replaceSubrange(bias..<bias + 4, with: [0x00, 0x00, 0xC0, 0x7F])
        let path = dir.appendingPathComponent("nan-bias").path
        try bad.write(to: URL(fileURLWithPath: path))
        #expect(throws: ParlaError.self) { try LanguageModel(contentsOf: path) }
        // So is a fit scale (model version 3) that is not a small positive number.
        if let fitScale = firstFitScaleOffset(in: good) {
            for value: [UInt8] in [[0x00, 0x00, 0xC0, 0x7F], [0, 0, 0, 0], [0x00, 0x00, 0x80, 0xBF]] {  // NaN, 0, -1
                var bad = good
                bad.replaceSubrange(fitScale..<fitScale + 4, with: value)
                try bad.write(to: URL(fileURLWithPath: path))
                #expect(throws: ParlaError.self) { try LanguageModel(contentsOf: path) }
            }
        }
    }

    @Test func aSharedModelIsParsedOnceAndReloadedWhenTheFileChanges() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("parla-model-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = try Data(contentsOf: URL(fileURLWithPath: try VoiceCatalog.locateDirectory() + "/langid.bin"))
        let path = dir.appendingPathComponent("langid.bin").path
        try good.write(to: URL(fileURLWithPath: path))
        let first = try LanguageModel.shared(at: path)
        #expect(try LanguageModel.shared(at: path) === first)
        // A new file at the same path is parsed again. (Its modification time is set apart: a
        // freed inode number can be reused, and file times are coarser than a fast rewrite.)
        try FileManager.default.removeItem(atPath: path)
        try good.write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000)], ofItemAtPath: path)
        let second = try LanguageModel.shared(at: path)
        #expect(second !== first)
        #expect(try LanguageModel.shared(at: path) === second)
        // A damaged replacement is an error, not the old tables.
        try FileManager.default.removeItem(atPath: path)
        try Data(good.prefix(good.count / 2)).write(to: URL(fileURLWithPath: path))
        #expect(throws: ParlaError.self) { try LanguageModel.shared(at: path) }
        // A missing file is an error too.
        try FileManager.default.removeItem(atPath: path)
        #expect(throws: ParlaError.self) { try LanguageModel.shared(at: path) }
    }

    /// Where the first group's fit scales are in a model file of version 3 or later (right
    /// after its biases); nil before.
    private func firstFitScaleOffset(in d: Data) -> Int? {
        guard d.count > 8, d[d.startIndex + 4] >= 3, let biases = firstBiases(in: d) else { return nil }
        return biases.offset + 4 * biases.languages
    }

    /// Where the first group's per-language biases start in a model file (see train.py's
    /// format), and how many languages the group has: magic and version, the lower-case map,
    /// the group count, the group's id and scripts, its numbers, then its language tags.
    private func firstBiases(in d: Data) -> (offset: Int, languages: Int)? {
        let b = [UInt8](d)
        guard b.count > 12 else { return nil }
        func u32(_ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 | Int(b[i + 2]) << 16 | Int(b[i + 3]) << 24 }
        var i = 8
        i += 4 + 8 * u32(i)  // the lower-case map
        i += 4  // group count
        guard i < b.count else { return nil }
        i += 1 + Int(b[i])  // group id
        guard i < b.count else { return nil }
        let scripts = Int(b[i])
        i += 1
        for _ in 0..<scripts where i < b.count { i += 1 + Int(b[i]) }
        i += (b[4] >= 2 ? 3 : 2) + 4  // max order, bits (and flags, from version 2), scale
        guard i + 2 <= b.count else { return nil }
        let languages = Int(b[i]) | Int(b[i + 1]) << 8
        i += 2
        for _ in 0..<languages where i < b.count { i += 1 + Int(b[i]) }
        return i + 4 <= b.count ? (i, languages) : nil
    }
}


@Suite("detection in speech plans")
struct DetectionPlanTests {

    @Test func textWithoutLanguageIsSegmentedAndExplicitSpansWin() throws {
        // "Bonjour" is marked Greek on purpose: the attribute wins over what it looks like.
        let text = attributed([("Good morning everyone. ", nil), ("Bonjour", "el"), (" Καλημέρα σε όλους. Bonsoir à tous, mes amis.", nil)])
        let plan = try SpeechPlan(Utterance(text), catalog: testCatalog, detector: sharedDetector)
        let segments = plan.segments.map { ($0.language.identifier, String(plan.text.unicodeScalars[plan.text.unicodeScalars.index(plan.text.unicodeScalars.startIndex, offsetBy: $0.range.lowerBound)..<plan.text.unicodeScalars.index(plan.text.unicodeScalars.startIndex, offsetBy: $0.range.upperBound)])) }
        #expect(segments.map(\.0) == ["en", "el", "fr"])
        #expect(segments[1].1 == "Bonjour Καλημέρα σε όλους. ")
    }

    @Test func utteranceLanguageOrNoDetectorMeansOneLanguage() throws {
        let text = "Good morning. Καλημέρα."
        var u = Utterance(string: text)
        #expect(try SpeechPlan(u, catalog: testCatalog).segments.map(\.language) == ["en"])
        #expect(try SpeechPlan(u, catalog: testCatalog, detector: sharedDetector).segments.map(\.language) == ["en", "el"])
        u.language = "fr"
        #expect(try SpeechPlan(u, catalog: testCatalog, detector: sharedDetector).segments.map(\.language) == ["fr"])
    }

    @Test func detectedLanguagesWithoutAVoiceFallBack() throws {
        // The test catalog has no German voice: German text falls back to the base language.
        let plan = try SpeechPlan(Utterance(string: "Guten Morgen, wie geht es dir heute?"), catalog: testCatalog, detector: sharedDetector)
        #expect(plan.segments.map(\.language) == ["en"])
    }
}
