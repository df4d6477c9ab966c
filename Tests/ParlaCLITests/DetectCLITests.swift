import Foundation
import ParlaCore
import ParlaIO
import Testing
import ParlaAudioTestSupport

/// `parla detect` and detection in `parla say`, through the built binary.
@Suite("parla detect", .serialized)
struct DetectCLITests {
    let cli = CLITests()

    @Test func readableAndJSONOutput() throws {
        let text = "The revolutionary iPhone… Το επαναστατικό τηλέφωνο… هاتف ثوري"
        let r = try cli.parla(["detect", text])
        #expect(r.status == 0, "\(r.error)")
        let lines = r.output.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("0–26") && lines[0].contains(" en ") && lines[0].contains("espeak-ng.en"))
        #expect(lines[1].contains(" el ") && lines[2].contains(" ar "))

        let j = try cli.parla(["detect", "--json", text])
        #expect(j.status == 0, "\(j.error)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(j.output.utf8)) as? [String: Any])
        let segments = try #require(object["segments"] as? [[String: Any]])
        #expect(segments.map { $0["lang"] as? String } == ["en", "el", "ar"])
        #expect(segments.map { $0["start"] as? Int } == [0, 26, 52])
        #expect(segments.allSatisfy { ($0["confidence"] as? Double).map { (0...1).contains($0) } ?? false })
        #expect(segments.map { $0["voice"] as? String } == ["espeak-ng.en-us", "espeak-ng.el", "espeak-ng.ar"])
        #expect(segments.map { $0["text"] as? String }.compactMap { $0 }.joined() == text)
    }

    /// The detector never pretends: `--help` names the languages Parla speaks but cannot
    /// recognise, and that list is exactly what the catalog has and the model lacks.
    @Test func helpNamesTheLanguagesNeverDetected() throws {
        let catalog = try VoiceCatalog.default()
        let detector = try LanguageDetector.load(catalog: catalog)
        // What it can answer: a language of the model, or the language a script means alone.
        let detectable = Set(detector.model.groups.flatMap(\.languages).map(\.language))
            .union(catalog.scriptDefaults.values.map(\.language))
        // A language counts as detected when an answer picks its voice: Han text is "zh",
        // which Mandarin's voice speaks, so cmn is not missing.
        let detectedVoices = Set(detectable.compactMap { try? catalog.voice(for: LanguageTag($0) ?? "und").identifier })
        let missing = Set(catalog.languages.map(\.language)).subtracting(detectable)
            .filter { l in (try? catalog.voice(for: LanguageTag(l) ?? "und")).map { !detectedVoices.contains($0.identifier) } ?? true }
            .sorted()
        let help = try cli.parla(["detect", "--help"])
        #expect(help.status == 0)
        let named = help.output.replacingOccurrences(of: "\n", with: " ")
            .components(separatedBy: "Never detected: ").dropFirst().first?
            .components(separatedBy: ".").first?
            .components(separatedBy: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        #expect(named == missing, "the help names \(named); the catalog speaks, and the model lacks, \(missing)")
    }

    /// Languages the model gained classes for (issue 20), Serbian in Latin script among them,
    /// and the Malay/Indonesian pair, each in a sentence written for this test.
    @Test func smallLanguagesAndCloseNeighboursAreDetected() throws {
        let cases: [(String, String)] = [
            ("sw", "Habari za asubuhi, jina langu ni Juma na ninaishi Dar es Salaam."),
            ("mt", "Il-Malti huwa l-ilsien nazzjonali ta' Malta u lingwa uffiċjali tal-Unjoni Ewropea."),
            ("gd", "Tha mi a' fuireach ann an Glaschu agus tha Gàidhlig agam."),
            ("tt", "Мин татарча сөйләшәм, ә минем әнием Казанда яши."),
            ("mi", "Ko te reo Māori te reo taketake o Aotearoa."),
            ("tk", "Men Türkmenistanda ýaşaýaryn we türkmen dilinde gürleýärin."),
            ("lb", "Ech wunnen zu Lëtzebuerg an ech schwätze Lëtzebuergesch."),
            ("sr-Latn", "Ovo je rečenica na srpskom jeziku, a mesto gde živim je lepo i mirno."),
            ("ms", "Saya tidak boleh datang esok kerana saya perlu bekerja di pejabat."),
            ("id", "Saya tidak bisa datang besok karena saya harus bekerja di kantor."),
            ("gn", "Che ha'e peteĩ mbo'ehára ha amba'apo Paraguáipe."),
            ("om", "Afaan Oromoo afaan hojii naannoo Oromiyaa ti."),
            ("tn", "Ke a leboga thata ka thuso ya gago, tsala ya me."),
        ]
        let r = try cli.parla(["detect", "--lines"], stdin: Data(cases.map(\.1).joined(separator: "\n").utf8))
        #expect(r.status == 0, "\(r.error)")
        #expect(r.output.split(separator: "\n").map(String.init) == cases.map(\.0))
        // Serbian in Latin script is spoken by the Serbian voice.
        let json = try cli.parla(["detect", "--json", cases[7].1])
        #expect(json.output.contains(#""lang": "sr-Latn""#), "\(json.output)")
        #expect(json.output.contains(#""voice": "espeak-ng.sr""#), "\(json.output)")
    }

    @Test func linesAnswersOneLinePerInputLine() throws {
        var input = Data("Guten Morgen, wie geht es dir?\n\n1234\nこんにちは、元気ですか\r\n".utf8)
        input.append(contentsOf: [0x66, 0x6F, 0xFF, 0x0A])  // invalid UTF-8
        input.append(Data("Καλημέρα σας".utf8))  // last line without a newline
        let r = try cli.parla(["detect", "--lines"], stdin: input)
        #expect(r.output == "de\nund\nund\nja\nund\nel\n")
        #expect(r.status != 0)
        #expect(r.error.contains("line 5 is not valid UTF-8"))
    }

    @Test func segmentsFormatAndScalarOffsets() throws {
        let r = try cli.parla(["detect", "--segments"], stdin: Data("👍🏽 Hello world Καλημέρα\n\n123\n".utf8))
        #expect(r.status == 0, "\(r.error)")
        let lines = r.output.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4)
        // 👍🏽 is two scalars: offsets count Unicode scalars, not bytes or UTF-16 units.
        #expect(lines[0] == #"[{"start": 0, "end": 15, "lang": "en"}, {"start": 15, "end": 23, "lang": "el"}]"#)
        #expect(lines[1] == "[]")
        #expect(lines[2] == #"[{"start": 0, "end": 3, "lang": "und"}]"#)
    }

    @Test func linesStreamsEachAnswerBeforeTheInputEnds() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLITests.binary)
        p.arguments = ["detect", "--lines"]
        var env = ProcessInfo.processInfo.environment
        env["LANG"] = "C.UTF-8"
        env["LANGUAGE"] = nil
        p.environment = env
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        defer { if p.isRunning { p.terminate() } }
        // A watchdog: if an answer never comes, the process is killed and the read below ends.
        let watchdog = DispatchWorkItem { if p.isRunning { p.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: watchdog)
        func answer(to line: String) -> String {
            input.fileHandleForWriting.write(Data((line + "\n").utf8))
            var got = Data()
            while !got.contains(0x0A) {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                got.append(chunk)
            }
            return String(decoding: got, as: UTF8.self)
        }
        #expect(answer(to: "Bonjour tout le monde, comment allez-vous ?") == "fr\n")
        #expect(answer(to: "Доброе утро, как дела?") == "ru\n")
        try input.fileHandleForWriting.close()
        let status = waitForExit(p)
        watchdog.cancel()
        #expect(status == 0)
    }

    @Test func preferAndOnly() throws {
        let a = try cli.parla(["detect", "--lines", "--prefer", "de"], stdin: Data("Hotel\n".utf8))
        #expect(a.output == "de\n")
        let b = try cli.parla(["detect", "--lines"], stdin: Data("Hotel\n".utf8), environment: ["LANGUAGE": "nl:de", "LANG": "nl_NL.UTF-8"])
        #expect(b.output == "nl\n")
        let c = try cli.parla(["detect", "--lines", "--only", "fr,es"], stdin: Data("Good morning everyone\n".utf8))
        #expect(c.output == "fr\n" || c.output == "es\n")
        let bad = try cli.parla(["detect", "--prefer", "not a tag!", "x"])
        #expect(bad.status != 0 && bad.error.contains("BCP 47"))
        let both = try cli.parla(["detect", "--lines", "--segments"])
        #expect(both.status != 0 && both.error.contains("not both"))
    }

    @Test func saySegmentsByLanguageUnlessToldNotTo() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let wav = dir.appendingPathComponent("a.wav").path
        let text = "Good morning everyone. Καλημέρα σε όλους. Bonjour à tous, mes amis."
        let r = try cli.parla(["say", text, "-o", wav, "--timings", "-"])
        #expect(r.status == 0, "\(r.error)")
        let timeline = try #require(try JSONSerialization.jsonObject(with: Data(r.output.utf8)) as? [String: Any])
        let segments = try #require(timeline["segments"] as? [[String: Any]])
        #expect(segments.map { $0["language"] as? String } == ["en", "el", "fr"])
        #expect(r.error.contains("languages: en, el, fr"))

        let off = try cli.parla(["say", text, "-o", wav, "--no-detect"])
        #expect(off.status == 0, "\(off.error)")
        #expect(off.error.contains("languages: en\n") || off.error.hasSuffix("languages: en"))
        let explicit = try cli.parla(["say", text, "-o", wav, "-l", "fr"])
        #expect(explicit.error.contains("languages: fr"))
        let preferred = try cli.parla(["say", "Hotel", "-o", wav, "--prefer", "de"])
        #expect(preferred.error.contains("languages: de"), "\(preferred.error)")
    }
}
