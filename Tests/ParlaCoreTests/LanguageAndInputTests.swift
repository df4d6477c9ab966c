import Testing
import ParlaIO
import FoundationEssentials
@testable import ParlaCore

@Suite("Language tags")
struct LanguageTagTests {
    @Test(arguments: [
        ("en", "en"), ("EN_us", "en-US"), ("zh-hant-tw", "zh-Hant-TW"), ("es-419", "es-419"),
        ("en-gb-x-rp", "en-GB-x-rp"), ("cmn-latn-pinyin", "cmn-Latn-pinyin"), (" fr ", "fr"),
    ])
    func normalises(raw: String, expected: String) throws {
        #expect(try LanguageTag(parsing: raw).identifier == expected)
    }

    @Test(arguments: ["", "e", "english!", "en--US", "en US", "123", "en-toolongsubtag", "fr-ç"])
    func rejects(raw: String) {
        #expect(throws: ParlaError.invalidLanguageTag(raw)) { try LanguageTag(parsing: raw) }
    }

    @Test func partsAndParents() throws {
        let tag = try LanguageTag(parsing: "zh-Hant-TW")
        #expect(tag.language == "zh")
        #expect(tag.script == "Hant")
        #expect(tag.region == "TW")
        #expect(tag.parent?.identifier == "zh-Hant")
        #expect(tag.isSpecialization(of: "zh"))
        #expect(try !LanguageTag(parsing: "zhx").isSpecialization(of: "zh"))
    }
}

@Suite("UTF-8 input")
struct TextInputTests {
    @Test func validUTF8DecodesAndDropsBOM() throws {
        #expect(try TextInput.decode([0xEF, 0xBB, 0xBF] + Array("héllo 👋".utf8), source: "x") == "héllo 👋")
    }

    @Test(arguments: [
        ([0x61, 0x62, 0xFF, 0x63] as [UInt8], 2),          // invalid byte
        ([0x61, 0xC3] as [UInt8], 1),                      // truncated 2-byte sequence at the end
        ([0x61, 0x62, 0xC3, 0x28] as [UInt8], 2),          // lead byte without continuation
        ([0xE2, 0x82, 0x61] as [UInt8], 0),                // truncated 3-byte sequence
        ([0xED, 0xA0, 0x80] as [UInt8], 0),                // UTF-16 surrogate encoded in UTF-8
        ([0xC0, 0xAF] as [UInt8], 0),                      // overlong encoding
        (Array("ok ✓ 😀".utf8) + [0x80], 11),              // stray continuation byte
    ])
    func reportsFirstInvalidByte(bytes: [UInt8], offset: Int) {
        #expect(TextInput.firstInvalidUTF8Offset(bytes) == offset)
        #expect(throws: ParlaError.invalidUTF8(source: "f", byteOffset: offset)) {
            try TextInput.decode(bytes, source: "f")
        }
    }

    @Test func errorMessageNamesTheOffset() {
        let message = ParlaError.invalidUTF8(source: "'a.txt'", byteOffset: 17).description
        #expect(message.contains("offset 17"))
        #expect(message.contains("'a.txt'"))
    }
}

@Suite("WAV and JSON encoding")
struct EncodingTests {
    @Test func wavHeaderGoldenBytes() {
        let expected: [UInt8] = [
            0x52, 0x49, 0x46, 0x46, 0x88, 0x00, 0x00, 0x00,  // "RIFF", 36 + 100
            0x57, 0x41, 0x56, 0x45, 0x66, 0x6D, 0x74, 0x20,  // "WAVE", "fmt "
            0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,  // 16, PCM, mono
            0x22, 0x56, 0x00, 0x00, 0x44, 0xAC, 0x00, 0x00,  // 22050 Hz, 44100 bytes/s
            0x02, 0x00, 0x10, 0x00, 0x64, 0x61, 0x74, 0x61,  // block align 2, 16 bits, "data"
            0x64, 0x00, 0x00, 0x00,                          // 100 bytes
        ]
        #expect(WAVHeader.bytes(sampleRate: 22050, dataBytes: 100) == expected)
    }

    @Test func jsonQuoting() {
        #expect(JSONText.quoted("a\"b\\c\nd\u{1}é") == "\"a\\\"b\\\\c\\nd\\u0001é\"")
    }
}
