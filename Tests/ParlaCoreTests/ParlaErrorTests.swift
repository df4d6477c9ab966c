import Testing
import ParlaCore

/// ParlaError is a struct with a code, so that new kinds of failure do not break programs that
/// handle some of them: what a program compares and reads.
@Suite struct ParlaErrorTests {
    @Test func codesAreDistinctAndStable() {
        let codes: [ParlaError.Code] = [
            .invalidLanguageTag, .unknownVoice, .noVoiceForLanguage, .voiceCatalogNotFound, .invalidVoicePreset, .emptyText,
            .invalidSSML, .invalidUTF8, .unreadableInput, .unwritableOutput, .parameterOutOfRange, .engineUnavailable,
            .engineCrashed, .voiceUnavailable, .engineFailure, .cancelled, .languageModelInvalid, .languageModelNotFound,
            .audioServerUnavailable, .audioServerLost, .audioDeviceNotFound, .audioServerStalled, .audioFailure, .invalidInput,
            .invalidTimeline,
        ]
        #expect(Set(codes).count == codes.count)
        #expect(Set(codes.map(\.rawValue)).count == codes.count)
        // Raw values are what logs and other languages see: changing one breaks them.
        #expect(ParlaError.Code.engineCrashed.rawValue == "engine-crashed")
        #expect(ParlaError.Code(rawValue: "unknown-voice") == .unknownVoice)
    }

    @Test func aProgramMatchesTheCodesItKnowsAndPassesTheRest() {
        func handle(_ error: ParlaError) -> String {
            switch error {
            case .emptyText: "nothing to say"
            case ParlaError.Code.unknownVoice: "pick another voice: \(error.subject ?? "")"
            case ParlaError.Code.engineUnavailable, ParlaError.Code.engineCrashed: "engine: \(error.subject ?? "")"
            default: "other: \(error.code)"
            }
        }
        #expect(handle(.emptyText) == "nothing to say")
        #expect(handle(.unknownVoice("espeak-ng.xx")) == "pick another voice: espeak-ng.xx")
        #expect(handle(.engineUnavailable("onnxruntime", reason: "not found")) == "engine: onnxruntime")
        #expect(handle(.engineCrashed("espeak-ng", reason: "crashed")) == "engine: espeak-ng")
        #expect(handle(.audioFailure("no")) == "other: audio-failure")
        // Comparing values compares everything they hold.
        #expect(ParlaError.emptyText == .emptyText)
        #expect(ParlaError.unknownVoice("a") != .unknownVoice("b"))
        #expect(ParlaError.unknownVoice("a").code == ParlaError.unknownVoice("b").code)
    }

    @Test func eachErrorKeepsWhatItIsAbout() {
        let ssml = ParlaError.invalidSSML(line: 3, column: 14, reason: "an unclosed <s>")
        #expect(ssml.code == .invalidSSML && ssml.line == 3 && ssml.column == 14 && ssml.reason == "an unclosed <s>")
        #expect(ssml.description == "Invalid SSML at line 3, column 14: an unclosed <s>.")
        let utf8 = ParlaError.invalidUTF8(source: "notes.txt", byteOffset: 7)
        #expect(utf8.subject == "notes.txt" && utf8.byteOffset == 7 && utf8.description.contains("iconv"))
        let range = ParlaError.parameterOutOfRange(name: "Rate", value: 9, range: 0.25...4)
        #expect(range.subject == "Rate" && range.description == "Rate 9 is out of range: use a value from 0.25 to 4.")
        let voice = ParlaError.voiceUnavailable("piper.damaged", reason: "its model cannot be read")
        #expect(voice.code == .voiceUnavailable && voice.subject == "piper.damaged" && voice.description.contains("piper.damaged"))
        #expect(ParlaError.engineFailure("no").subject == nil && ParlaError.engineFailure("no", engine: "piper").subject == "piper")
    }
}
