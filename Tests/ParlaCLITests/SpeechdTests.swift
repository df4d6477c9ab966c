import Foundation
import ParlaCore
import ParlaAudioTestSupport
import Testing

/// sd_parla inside a real, private speech-dispatcher, heard at a private sound server's monitor;
/// the client is spd-say, or python3-speechd (the library Orca uses) through
/// scripts/lib/speechd-client.py.
@Suite("speech-dispatcher with sd_parla", .serialized)
struct SpeechdTests {
    static let module = URL(fileURLWithPath: CLITests.binary).deletingLastPathComponent().appendingPathComponent("sd_parla").path
    static let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/lib/speechd-client.py").path

    struct Event {
        var name: String
        var mark: String?
        var time: UInt64
    }

    /// Runs the Python client; returns its exit status and events.
    func client(_ daemon: TestSpeechDispatcher, _ arguments: [String]) async throws -> (status: Int32, events: [Event]) {
        let r = try await offPool { try runProcess("/usr/bin/python3", [Self.client, daemon.address] + arguments) }
        let events = r.output.split(separator: "\n").compactMap { line -> Event? in
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return Event(name: o["event"] as? String ?? "?", mark: o["name"] as? String, time: UInt64(o["t_ns"] as? Int ?? 0))
        }
        return (r.status, events)
    }

    func start(_ kind: SoundServer = .pulseaudio) async throws -> (TestAudioServer, TestSpeechDispatcher) {
        let audio = try await TestAudioServer.start(kind)
        let daemon = try await TestSpeechDispatcher.start(module: Self.module, audio: audio)
        return (audio, daemon)
    }

    @Test(arguments: SoundServer.allCases)
    func spdSayIsHeard(_ kind: SoundServer) async throws {
        let (audio, daemon) = try await start(kind)
        let r = try await offPool { try daemon.spdSay(["-w", "-o", "parla", "Hello from Parla."]) }
        #expect(r.status == 0, "\(r.error)")
        #expect(audio.recorder.loudSampleTimes().count > 3000, "module log: \(daemon.log("parla"))")
        // The module lists Parla's catalog, with language and variant.
        let voices = try await offPool { try daemon.spdSay(["-o", "parla", "-L"]) }
        #expect(voices.output.contains("espeak-ng.el") && voices.output.contains("espeak-ng.ar"))
    }

    /// One message in English, Greek and Arabic: three voices, and the client's language is
    /// only a preference.
    @Test func oneMessageThreeLanguagesThreeVoices() async throws {
        let (audio, daemon) = try await start()
        let r = try await offPool { try daemon.spdSay(["-w", "-l", "en-US", "Hello world. Καλημέρα κόσμε. مرحبا بالعالم."]) }
        #expect(r.status == 0)
        let log = daemon.log("parla")
        let line = log.split(separator: "\n").last { $0.contains("SPEAK of") } ?? ""
        #expect(line.contains("espeak-ng.en-us") && line.contains("espeak-ng.el") && line.contains("espeak-ng.ar"), "\(log)")
        #expect(audio.recorder.loudSampleTimes().count > 10000)
    }

    /// Orca's way: a mark before every word. Every mark reaches the client, in order, when its
    /// word's audio reaches the sink.
    @Test func indexMarksArriveWhenTheirWordsAreHeard() async throws {
        let (audio, daemon) = try await start()
        let words = "Marks keep the caret in step with the audio of every single word here".split(separator: " ")
        let ssml = "<speak>" + words.enumerated().map { "<mark name=\"w\($0.offset)\"/>\($0.element) " }.joined() + "</speak>"
        let r = try await client(daemon, ["--ssml", ssml])
        #expect(r.status == 0)
        let marks = r.events.filter { $0.name == "index_mark" }
        #expect(marks.map(\.mark) == words.indices.map { "w\($0)" })
        // Where each word starts in the audio: the same text rendered by Parla with the same settings.
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let wav = dir.appendingPathComponent("w.wav").path, timings = dir.appendingPathComponent("t.json").path
        let render = try runProcess(CLITests.binary, ["say", "--ssml", "-v", "espeak-ng.en-us", "-r", "175", "-o", wav, "--timings", timings, ssml])
        #expect(render.status == 0, "\(render.error)")
        let timeline = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: timings))) as! [String: Any]
        let starts = (timeline["words"] as! [[String: Any]]).map { $0["startMs"] as! Double }
        let pcm = try Data(contentsOf: URL(fileURLWithPath: wav)).dropFirst(44).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        let firstLoudPCM = pcm.firstIndex { abs(Int($0)) > 300 } ?? 0
        let first = try #require(audio.recorder.loudSampleTimes().first)
        // One mark per word, each compared with its own word: no mark may go missing.
        try #require(marks.count == starts.count, "\(marks.count) marks for the timeline's \(starts.count) words")
        let drift = zip(marks, starts).map { (m, ms) in (Double(m.time) - Double(first) - (ms - Double(firstLoudPCM) * 1000 / 22050) * 1e6) / 1e6 }.sorted()
        let median = drift[drift.count / 2]
        let p80 = drift.map(abs).sorted()[drift.count * 8 / 10 - 1]
        #expect(abs(median) <= 30 && p80 <= 80, "mark drift in ms \(drift)")
    }

    @Test func cancelSilencesAtOnce() async throws {
        let (audio, daemon) = try await start()
        let r = try await client(daemon, ["--text", "One two three four five six seven eight nine ten eleven twelve thirteen fourteen.", "--cancel-after", "1.0"])
        #expect(r.status == 0)
        #expect(r.events.contains { $0.name == "cancel" } && !r.events.contains { $0.name == "end" })
        let sent = try #require(r.events.first { $0.name == "cancel_sent" }?.time)
        #expect(audio.recorder.loudSampleTimes(after: sent + 150_000_000).count < 50)
    }

    /// speech-dispatcher pauses at a sentence mark and resumes by sending the rest of the text:
    /// every word mark arrives once, in order, across the pause.
    @Test func pauseThenResumeRepeatsAndSkipsNoWord() async throws {
        let (audio, daemon) = try await start()
        defer { withExtendedLifetime(audio) {} }
        let words = "One two. Three four. Five six. Seven eight. Nine ten.".split(separator: " ")
        let ssml = "<speak>" + words.enumerated().map { "<mark name=\"w\($0.offset)\"/>\($0.element) " }.joined() + "</speak>"
        let r = try await client(daemon, ["--ssml", ssml, "--pause-after", "0.5", "--resume-after", "0.3"])
        #expect(r.status == 0)
        let names = r.events.map(\.name)
        #expect(names.contains("pause") && names.contains("resume") && names.last == "end", "\(names) \(daemon.log("parla"))")
        #expect(r.events.filter { $0.name == "index_mark" }.map(\.mark) == words.indices.map { "w\($0)" })
    }

    @Test func charactersAndKeysAreSpoken() async throws {
        let (audio, daemon) = try await start()
        #expect(try await client(daemon, ["--char", "a"]).status == 0)
        let afterChar = audio.recorder.loudSampleTimes().count
        #expect(afterChar > 500)
        #expect(try await client(daemon, ["--key", "shift_a"]).status == 0)
        #expect(audio.recorder.loudSampleTimes().count > afterChar + 1000)
        let log = daemon.log("parla")
        #expect(log.contains("CHAR of 1 characters") && log.contains("KEY of 7 characters"), "\(log)")
    }

    /// Invalid SSML, an unknown voice, an empty and a huge message: each is refused or ended with
    /// a reason in the module's log, and the next message still plays.
    @Test func badMessagesAreRefusedAndTheNextPlays() async throws {
        let (audio, daemon) = try await start()
        let broken = try await client(daemon, ["--ssml", "<speak>broken <s>markup</speak>", "--timeout", "3"])
        #expect(!broken.events.contains { $0.name == "begin" })
        #expect(daemon.log("parla").contains("cannot speak this SPEAK message"))
        let unknown = try await client(daemon, ["--text", "Who is speaking?", "--voice", "no-such-voice", "--timeout", "3"])
        #expect(!unknown.events.contains { $0.name == "begin" })
        #expect(daemon.log("parla").contains("synthesis_voice=no-such-voice"))
        let empty = try await client(daemon, ["--ssml", "<speak> </speak>", "--timeout", "3"])
        #expect(!empty.events.contains { $0.name == "begin" })
        let huge = String(repeating: "This sentence is one of very many. ", count: 3_500)  // 122,500 characters (an argument may hold 128 KiB)
        let long = try await client(daemon, ["--text", huge, "--cancel-after", "1.5"])
        #expect(long.events.contains { $0.name == "begin" } && long.events.contains { $0.name == "cancel" })
        let before = audio.recorder.loudSampleTimes().count
        let fine = try await client(daemon, ["--text", "Still here."])
        #expect(fine.status == 0 && fine.events.contains { $0.name == "end" })
        #expect(audio.recorder.loudSampleTimes().count > before + 2000)
    }

    /// speech-dispatcher 0.11 does not restart a module that died: it notices (broken pipe),
    /// speaks the next message with another module, and reloads dead modules on SIGUSR1. After
    /// that, Parla speaks again.
    @Test func aKilledModuleIsReloadedAndSpeaksAgain() async throws {
        let audio = try await TestAudioServer.start(.pulseaudio)
        let daemon = try await TestSpeechDispatcher.start(module: Self.module, audio: audio, withESpeakModule: true)
        let first = Task { try await client(daemon, ["--text", "One two three four five six seven eight nine ten eleven twelve.", "--timeout", "4"]) }
        let start = Date()
        while audio.recorder.loudSampleTimes().count < 2000 && Date().timeIntervalSince(start) < 5 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(audio.recorder.loudSampleTimes().count >= 2000, "the first message was not heard")
        let killed = try await offPool { try runProcess("/usr/bin/pkill", ["-KILL", "-P", String(daemon.pid), "-x", "sd_parla"]) }
        #expect(killed.status == 0, "pkill: \(killed.status) \(killed.error)")
        _ = try await first.value  // speechd sends no END for the message it lost
        while !daemon.log("speech-dispatcher").contains("Broken pipe to module") && Date().timeIntervalSince(start) < 10 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(daemon.log("speech-dispatcher").contains("Broken pipe to module"))
        kill(daemon.pid, SIGUSR1)
        while !daemon.log("speech-dispatcher").contains("Reloading output module parla") && Date().timeIntervalSince(start) < 15 { try await Task.sleep(for: .milliseconds(20)) }
        let before = audio.recorder.loudSampleTimes().count
        let r = try await client(daemon, ["--text", "Back again."])
        #expect(r.status == 0 && r.events.contains { $0.name == "end" }, "\(daemon.log("speech-dispatcher").suffix(3000))")
        #expect(daemon.log("parla").contains("SPEAK of 11 characters"), "the reloaded sd_parla did not speak: \(daemon.log("parla")) \(daemon.log("speech-dispatcher").suffix(4000))")
        #expect(audio.recorder.loudSampleTimes().count > before + 2000)
    }
}
