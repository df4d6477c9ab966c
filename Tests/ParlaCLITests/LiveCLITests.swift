import Foundation
import ParlaCore
import ParlaPulseAudio
import ParlaAudioTestSupport
import Testing

/// `parla say` playing through a private PulseAudio daemon, checked at the null sink's monitor.
@Suite("parla say: live playback")
struct LiveCLITests {
    func say(_ args: [String], server: String) async throws -> ProcessResult {
        try await offPool { try runProcess(CLITests.binary, ["say"] + args, environment: ["PULSE_SERVER": server, "LANG": "C.UTF-8", "LANGUAGE": nil]) }
    }

    func lines(_ output: String) throws -> [[String: Any]] {
        try output.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
    }

    @Test(arguments: SoundServer.allCases)
    func eventsJSONFollowsThePlayback(_ kind: SoundServer) async throws {
        let server = try await TestAudioServer.start(kind)
        let r = try await say(["--events", "json", "--device", server.sink, "Hello world"], server: server.server)
        #expect(r.status == 0, "\(r.error)")
        let events = try lines(r.output)
        let kinds = events.map { $0["event"] as? String ?? "?" }
        #expect(kinds == ["started", "word", "sentence", "word", "finished"] || kinds == ["started", "sentence", "word", "word", "finished"],
            "events: \(r.output)")
        let words = events.filter { $0["event"] as? String == "word" }
        #expect(words.map { $0["text"] as! String } == ["Hello", "world"])
        #expect(words.map { $0["start"] as! Int } == [0, 6])
        #expect(words.map { $0["end"] as! Int } == [5, 11])
        #expect((words[1]["audio_ms"] as! Double) > (words[0]["audio_ms"] as! Double))
        #expect(events.allSatisfy { ($0["t_ns"] as? Int ?? 0) > 0 && $0["utterance"] as? Int != nil })
        let times = events.map { $0["t_ns"] as? Int ?? 0 }
        #expect(times == times.sorted())
        // The audio really arrived, before `finished` was printed.
        let loud = server.recorder.loudSampleTimes()
        #expect(loud.count > 3000)
        #expect(UInt64(times.last ?? 0) >= loud.last ?? .max)
    }

    @Test(arguments: SoundServer.allCases)
    func ctrlCSilencesAtOnceAndExits130(_ kind: SoundServer) async throws {
        let server = try await TestAudioServer.start(kind)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLITests.binary)
        p.arguments = ["say", "--events", "json", "One two three four five six seven eight nine ten eleven twelve thirteen."]
        var env = ProcessInfo.processInfo.environment
        env["PULSE_SERVER"] = server.server
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        var received = Data()
        while !(String(decoding: received, as: UTF8.self).components(separatedBy: "\"word\"").count > 3) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            received += chunk
        }
        let signalled = monotonicNanoseconds()
        kill(p.processIdentifier, SIGINT)
        received += out.fileHandleForReading.readDataToEndOfFile()
        #expect(await exitStatus(p) == 130)
        let last = try lines(String(decoding: received, as: UTF8.self)).last
        #expect(last?["event"] as? String == "interrupted")
        try await Task.sleep(for: .milliseconds(300))
        let loud = server.recorder.loudSampleTimes()
        #expect(loud.contains { $0 < signalled })
        #expect(loud.filter { $0 > signalled + 150_000_000 }.count < 50)  // isolated samples from a rewind at most
    }

    @Test func highlightShowsTheWordBeingHeard() async throws {
        let server = try await TestAudioServer.start()
        let r = try await say(["--highlight", "Hello brave world"], server: server.server)
        #expect(r.status == 0, "\(r.error)")
        for word in ["Hello", "brave", "world"] {
            #expect(r.output.contains("\u{1B}[7m\(word)\u{1B}[27m"))
        }
        #expect(r.output.hasSuffix("\r\u{1B}[KHello brave world\n"))
    }

    @Test(arguments: SoundServer.allCases)
    func noServerOrNoDeviceSaysWhatToDo(_ kind: SoundServer) async throws {
        let none = try await say(["Hello"], server: "unix:/nonexistent/parla/native")
        #expect(none.status != 0)
        #expect(none.error.contains("No sound server is available"))
        #expect(none.error.contains("-o FILE.wav"))
        let server = try await TestAudioServer.start(kind)
        let wrong = try await say(["--device", "no_such_sink", "Hello"], server: server.server)
        #expect(wrong.status != 0)
        #expect(wrong.error.contains("no_such_sink"))
        #expect(wrong.error.contains("pactl list short sinks"))
        #expect(server.recorder.loudSampleTimes().isEmpty)
    }
}
