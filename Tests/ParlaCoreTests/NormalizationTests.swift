import ParlaIO
import Testing

@testable import ParlaCore

/// The engine's text has its decomposed letters composed (CanonicalComposition): checked
/// against Unicode's rules through Swift's canonical equivalence, on every decomposition of
/// the table and on text as users' keyboards and file systems produce it.
struct NormalizationTests {
    func nfc(_ s: String) -> String { String(String.UnicodeScalarView(CanonicalComposition.recompose(s.unicodeScalars))) }
    func scalars(_ s: String) -> [UInt32] { s.unicodeScalars.map(\.value) }

    /// NFD from the same table, written separately: each scalar fully decomposed, the marks
    /// left in the order the decompositions give (enough for these texts' single marks).
    func nfd(_ s: String) -> String {
        var map: [UInt32: [UInt32]] = [:]
        let d = CanonicalComposition.decompositions
        for i in stride(from: 0, to: d.count - 2, by: 3) { map[d[i] & 0x7FFF_FFFF] = d[i + 2] == 0 ? [d[i + 1]] : [d[i + 1], d[i + 2]] }
        func full(_ c: UInt32) -> [UInt32] { map[c].map { $0.flatMap(full) } ?? [c] }
        return String(String.UnicodeScalarView(s.unicodeScalars.flatMap { full($0.value) }.compactMap(Unicode.Scalar.init)))
    }

    @Test func decomposedTextComposes() {
        #expect(scalars(nfc("e\u{301}")) == [0xE9])
        // Vietnamese: two marks in either order compose into one letter (U+1EC7 ệ).
        #expect(scalars(nfc("e\u{323}\u{302}")) == [0x1EC7])
        #expect(scalars(nfc("e\u{302}\u{323}")) == [0x1EC7])
        // ê with a dot below: decomposed, reordered by class, composed again.
        #expect(scalars(nfc("\u{EA}\u{323}")) == [0x1EC7])
        // Greek with tonos; a mark nothing composes with stays after its letter.
        #expect(scalars(nfc("\u{3B1}\u{301}")) == [0x3AC])
        #expect(scalars(nfc("q\u{301}")) == [0x71, 0x301])
        // Hangul jamo, leading + vowel + trailing, become one syllable (한).
        #expect(scalars(nfc("\u{1112}\u{1161}\u{11AB}")) == [0xD55C])
        // Unlike NFC, nothing is taken apart that does not compose again: singletons (the
        // Ångström sign) and excluded letters (Devanagari qa U+0958, Bengali and Assamese য়
        // U+09DF, whose precomposed form espeak-ng's rules know) stay whole, and their
        // decomposed forms stay decomposed.
        #expect(scalars(nfc("\u{212B}")) == [0x212B])
        #expect(scalars(nfc("\u{958}")) == [0x958])
        #expect(scalars(nfc("\u{9DF}")) == [0x9DF])
        #expect(scalars(nfc("\u{9AF}\u{9BC}")) == [0x9AF, 0x9BC])
        // Text in NFC already is unchanged, and so is ASCII.
        for s in ["café", "Ελληνικά", "Tiếng Việt", "한국어", "مرحبا", "👋🏽", "abc", "हिन्दी", "தமிழ்"] { #expect(scalars(nfc(s)) == scalars(s)) }
        // Most text takes the fast path: no scalar that composition could change.
        #expect(CanonicalComposition.recomposed("Καλημέρα, مرحبا, 日本語, 한국어, Привет, café") == nil)
        #expect(CanonicalComposition.recomposed("cafe\u{301}") != nil)
        #expect(CanonicalComposition.recomposed("\u{1112}\u{1161}") != nil)
    }

    /// Every decomposition in the table: composing its full decomposition gives text
    /// canonically equivalent to the scalar, the scalar itself for the letters NFC composes,
    /// and composing again changes nothing. (Swift's `==` on strings is canonical
    /// equivalence.)
    @Test func everyTableEntryFollowsUnicode() {
        let d = CanonicalComposition.decompositions
        var checked = 0
        var i = 0
        while i + 2 < d.count {
            let code = d[i] & 0x7FFF_FFFF
            let composes = d[i] & 0x8000_0000 != 0
            i += 3
            guard let scalar = Unicode.Scalar(code) else {
                Issue.record("not a scalar: \(code)")
                continue
            }
            let original = String(Character(scalar))
            let composed = nfc(nfd(original))
            #expect(composed == original)
            #expect(scalars(nfc(composed)) == scalars(composed), "U+\(String(code, radix: 16)) composes further")
            if composes { #expect(scalars(composed) == [code], "U+\(String(code, radix: 16))") }
            // The letter itself is never taken apart.
            #expect(scalars(nfc(original)) == [code])
            checked += 1
        }
        #expect(checked > 2000)
    }

    @Test func everyHangulSyllableComposesFromItsJamo() {
        for code in UInt32(0xAC00)...0xD7A3 {
            let s = code - 0xAC00
            var jamo = [0x1100 + s / 588, 0x1161 + (s % 588) / 28]
            if s % 28 != 0 { jamo.append(0x11A7 + s % 28) }
            let text = String(String.UnicodeScalarView(jamo.compactMap(Unicode.Scalar.init)))
            #expect(scalars(nfc(text)) == [code])
        }
    }

    /// The engine gets NFC, and every engine position maps into the caller's text: inside a
    /// composed cluster, to the cluster's start.
    @Test func engineInputIsComposedAndMapsBack() {
        let text = "cafe\u{301} ok"  // 8 scalars; the engine gets 7
        let input = EngineInput(text: Substring(text).unicodeScalars, range: 20..<28, spellOut: false)
        #expect(input.text == "café ok")
        #expect(scalars(input.text) == [0x63, 0x61, 0x66, 0xE9, 0x20, 0x6F, 0x6B])
        #expect(input.textOffset(ofEnginePosition: 2) == 22)  // f
        #expect(input.textOffset(ofEnginePosition: 3) == 23)  // é: the cluster e + U+0301
        #expect(input.textOffset(ofEnginePosition: 4) == 25)  // the space after it
        #expect(input.textOffset(ofEnginePosition: 6) == 27)  // k
        // Text whose letters NFC would take apart or whose marks it would only reorder is
        // given as it is (Assamese, Bengali, Arabic with shadda and fatha, Myanmar).
        for given in [
            "\u{9A4}\u{9B2}\u{9F0} \u{9B8}\u{9CB}\u{981}\u{9AB}\u{9BE}\u{9B2}\u{9C7} \u{99B}\u{9BE}\u{9DF}\u{9BE} \u{9AA}\u{9C7}\u{9B2}\u{9BE}\u{993}\u{995}",
            "\u{9AC}\u{9BF}\u{9A6}\u{9CD}\u{9AF}\u{9AE}\u{9BE}\u{9A8} \u{9A8}\u{9DF}", "\u{628}\u{651}\u{64E}", "\u{1000}\u{103A}\u{1037}",
        ] {
            let n = given.unicodeScalars.count
            #expect(
                EngineInput(text: Substring(given).unicodeScalars, range: 0..<n, spellOut: false).text.unicodeScalars.elementsEqual(
                    given.unicodeScalars))
        }
        // Spelled text is composed too, and escapes still map back.
        let spelled = EngineInput(text: Substring("e\u{301}&").unicodeScalars, range: 0..<3, spellOut: true)
        #expect(spelled.text.contains("é&amp;"))
    }

    /// The detector's way back from composed offsets to the caller's.
    @Test func recomposedOffsetsMapBack() throws {
        let r = try #require(CanonicalComposition.recomposed("xe\u{301}y e\u{301}"))
        #expect(r.scalars == [0x78, 0xE9, 0x79, 0x20, 0xE9])
        #expect(r.originalCount == 7)
        #expect((0...5).map(r.originalOffset(of:)) == [0, 1, 3, 4, 5, 7])
    }

    /// Detection judges decomposed text as the composed text it is, with offsets in the
    /// decomposed text.
    @Test func detectionSeesThroughDecomposition() throws {
        let composed = "Tiếng Việt rất hay, và tiếng Pháp cũng vậy. Ελληνικά είναι ωραία."
        let decomposed = nfd(composed)
        #expect(decomposed.unicodeScalars.count > composed.unicodeScalars.count)
        #expect(decomposed == composed)
        let detector = try LanguageDetector.load(catalog: .default())
        let a = detector.detect(composed), b = detector.detect(decomposed)
        #expect(a.map(\.language) == b.map(\.language))
        #expect(b.first?.language == "vi")
        #expect(b.last?.language == "el")
        // The same segments, each in the caller's (decomposed) offsets and indices.
        #expect(b.map { String(decomposed[$0.indices]) } == a.map { nfd(String(composed[$0.indices])) })
        #expect(b.last?.range.upperBound == decomposed.unicodeScalars.count)
        for s in b {
            #expect(decomposed.unicodeScalars.distance(from: decomposed.startIndex, to: s.indices.lowerBound) == s.range.lowerBound)
        }
    }
}
