import Foundation
import ParlaAudioTestSupport
import Testing

/// The environment that gives `parla` the joe voice (and only it: no voices of the user's).
func piperEnvironment(_ extra: [String: String?] = [:]) -> [String: String?] {
    var env: [String: String?] = [
        "PARLA_PIPER_VOICES": PiperFixture.voiceDirectory, "PARLA_ONNXRUNTIME": PiperFixture.runtime, "LANG": "C.UTF-8",
        "LANGUAGE": nil,
    ]
    for (k, v) in extra { env[k] = v }
    return env
}

extension LiveCLITests {
    /// joe through a private sound server: the words come as the audio plays, the sound arrives,
    /// and `finished` comes after the last of it.
    @Test(arguments: SoundServer.allCases)
    func aPiperVoicePlaysWithWordEvents(_ kind: SoundServer) async throws {
        if let missing = PiperFixture.missing { Issue.record(Comment(rawValue: missing)) }
        let server = try await TestAudioServer.start(kind)
        let r = try await offPool {
            try runProcess(
                CLITests.binary,
                // One sentence: made whole before it plays, so that a loaded machine (the live
                // tests run side by side) cannot make the stream run dry.
                ["say", "-v", PiperFixture.voice, "--events", "json", "--device", server.sink, "This is Joe speaking now."],
                environment: piperEnvironment(["PULSE_SERVER": server.server]))
        }
        #expect(r.status == 0, "\(r.error)")
        let events = try lines(r.output)
        let words = events.filter { $0["event"] as? String == "word" }
        #expect(words.map { $0["text"] as? String ?? "" } == ["This", "is", "Joe", "speaking", "now"], "\(r.output)")
        #expect(events.last?["event"] as? String == "finished", "\(r.output)")
        let times = events.map { $0["t_ns"] as? Int ?? 0 }
        #expect(times == times.sorted())
        let loud = server.recorder.loudSampleTimes()
        #expect(loud.count > 5000, "only \(loud.count) loud samples arrived")
        #expect(UInt64(times.last ?? 0) >= loud.last ?? .max)
    }
}

@Suite("Piper voices from the command line")
struct PiperCLITests {
    func parla(_ args: [String], _ env: [String: String?] = piperEnvironment()) async throws -> ProcessResult {
        try await offPool { try runProcess(CLITests.binary, args, environment: env) }
    }

    @Test func voicesListsIt() async throws {
        let r = try await parla(["voices", "-l", "en"])
        #expect(r.status == 0, "\(r.error)")
        let line = r.output.split(separator: "\n").first { $0.hasPrefix(PiperFixture.voice) } ?? ""
        #expect(line.contains("piper") && line.contains("medium") && line.contains("22050") && line.contains("en-US"), "\(r.output)")
        // The detector says which voice would speak each part.
        let d = try await parla(["detect", "The revolutionary phone is here. Το επαναστατικό τηλέφωνο."])
        #expect(d.output.contains(PiperFixture.voice) && d.output.contains("espeak-ng.el"), "\(d.output)")
    }

    @Test func withoutTheRuntimeTheErrorSaysHowToInstallIt() async throws {
        let dir = try makeTemporaryDirectory()
        let out = dir.appendingPathComponent("hello.wav").path
        let r = try await parla(
            ["say", "-v", PiperFixture.voice, "Hello.", "-o", out],
            piperEnvironment(["PARLA_ONNXRUNTIME": "/nonexistent/libonnxruntime.so.1", "XDG_CACHE_HOME": dir.path]))
        #expect(r.status != 0)
        #expect(r.error.contains("ONNX Runtime") && r.error.contains("scripts/setup"), "\(r.error)")
        #expect(try leftovers(in: dir).isEmpty, "a partial file was left behind")
    }

    @Test func renderGivesTheSameBytesForAnyJobs() async throws {
        let dir = try makeTemporaryDirectory()
        let input = dir.appendingPathComponent("items.tsv")
        try """
            a\ten\tThe first line is spoken by Joe.
            b\ten\tA second one, with a comma.
            c\tel\tΚαλημέρα κόσμε.
            d\ten\tAnd a fourth, to spread over the workers.
            """.write(to: input, atomically: true, encoding: .utf8)
        var digests: [[String: Data]] = []
        for jobs in ["1", "2"] {
            let out = dir.appendingPathComponent("out-\(jobs)")
            let r = try await parla(["render", input.path, "-o", out.path, "--jobs", jobs, "--timings"])
            #expect(r.status == 0, "\(r.error)")
            var files: [String: Data] = [:]
            for id in ["a", "b", "c", "d"] {
                files[id] = try Data(contentsOf: out.appendingPathComponent(id + ".wav"))
            }
            digests.append(files)
            let results = try String(contentsOf: out.appendingPathComponent("results.jsonl"), encoding: .utf8)
            #expect(results.contains(PiperFixture.voice) && results.contains("espeak-ng.el"), "\(results)")
        }
        #expect(digests[0] == digests[1])
    }
}
