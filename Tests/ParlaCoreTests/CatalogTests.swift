import Testing
import FoundationEssentials
@testable import ParlaCore
import ParlaIO

@Suite("Voice catalog files")
struct CatalogFileTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("voices").path

    /// voices/index.tsv is derived from the JSON files: both give the same catalog.
    @Test func indexMatchesTheJSONFiles() throws {
        let indexed = try VoiceCatalog.load(fromPath: Self.directory, useIndex: true)
        let decoded = try VoiceCatalog.load(fromPath: Self.directory, useIndex: false)
        #expect(indexed.voices == decoded.voices, "voices/index.tsv is stale: run 'python3 scripts/generate-voices.py --index-only'")
        #expect(indexed.languageDefaults == decoded.languageDefaults)
        #expect(indexed.scriptDefaults == decoded.scriptDefaults)
        #expect(indexed.variants == decoded.variants)
    }

    @Test func committedCatalogLoadsAndEveryDefaultExists() throws {
        let catalog = try VoiceCatalog.load(from: URL(filePath: Self.directory))
        #expect(catalog.voices.count > 100)
        for (language, id) in catalog.languageDefaults {
            #expect((try? catalog.voice(identifier: id)) != nil, "default for \(language) names missing voice \(id)")
        }
        for (script, language) in catalog.scriptDefaults {
            #expect((try? catalog.voice(for: language)) != nil, "script \(script) default \(language) has no voice")
        }
        #expect(try catalog.voice(for: "en").identifier == "espeak-ng.en-us")
        #expect(try catalog.voice(for: "el").identifier == "espeak-ng.el")
        #expect(try catalog.voice(for: "zh").identifier == "espeak-ng.cmn")
        #expect(try catalog.voice(identifier: "espeak-ng.fr+f2").variant == "f2")
    }

    @Test func userPresetsOverrideAndBrokenPresetsAreReported() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("parla-presets-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let preset = #"{"identifier": "me.slow-french", "name": "Slow French", "engine": "espeak-ng", "engineVoice": "fr-fr", "variant": "f2", "languages": ["fr"], "rate": 120}"#
        try Data(preset.utf8).write(to: URL(fileURLWithPath: dir + "/slow.json"))
        let catalog = try VoiceCatalog.load(fromPath: Self.directory, userPath: dir)
        #expect(try catalog.voice(identifier: "me.slow-french").wordsPerMinute == 120)

        try Data("{ not json".utf8).write(to: URL(fileURLWithPath: dir + "/broken.json"))
        #expect(throws: ParlaError.self) { try VoiceCatalog.load(fromPath: Self.directory, userPath: dir) }
        #expect(throws: ParlaError.voiceCatalogNotFound(searched: ["/nonexistent"])) { try VoiceCatalog.load(from: URL(filePath: "/nonexistent")) }
    }
}
