import FoundationEssentials
import ParlaIO
import ParlaCore
import ParlaSpeechd
import Synchronization
import Testing

/// A speaker that only records what it is asked (the real one is tested against a real
/// speech-dispatcher in ParlaCLITests).
final class FakeSpeaker: ModuleSpeaker, Sendable {
    let spoken = Collected([Utterance]())
    let stops = Atomic<Int>(0)
    let failPlan: Bool
    init(failPlan: Bool = false) { self.failPlan = failPlan }
    func speak(_ utterance: Utterance) throws(ParlaError) -> (id: UtteranceID, voices: [String]) {
        if failPlan { throw .noVoiceForLanguage("xx") }
        return spoken.withLock { $0.append(utterance); return (UtteranceID($0.count), ["en (fake)"]) }
    }
    func stop() { stops.add(1, ordering: .relaxed) }
}

/// Text collected from several threads.
final class Collected<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { storage.withLock { body(&$0) } }
}

/// A session wired to a fake speaker, with everything it writes collected. Unchecked: the
/// session is set once in `init` and then used by one test task at a time.
final class ModuleHarness: @unchecked Sendable {
    let written = Collected("")
    let logged = Collected([String]())
    let speaker: FakeSpeaker
    var session: ModuleSession!

    init(speaker: FakeSpeaker = FakeSpeaker(), maxRate: Double = ModuleSettings.defaultMaxRate) throws {
        self.speaker = speaker
        let catalog = try VoiceCatalog.default()
        session = ModuleSession(
            catalog: { catalog }, makeSpeaker: { _, _ in speaker },
            output: { [written] text in written.withLock { $0 += text } },
            log: { [logged] line in logged.withLock { $0.append(line) } },
            maxRate: maxRate)
    }

    /// Sends lines and returns what the module wrote in answer.
    @discardableResult
    func send(_ lines: String...) -> String {
        written.withLock { $0 = "" }
        for block in lines {
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) { _ = session.receive(String(line)) }
        }
        return written.withLock { $0 }
    }

    func deliver(_ event: ModuleEvent, _ id: Int = 1) -> String {
        written.withLock { $0 = "" }
        session.deliver(event, for: UtteranceID(id))
        return written.withLock { $0 }
    }
}

@Suite("speech-dispatcher module protocol")
struct SpeechdModuleTests {
    @Test func startupFollowsTheServersSequence() throws {
        let h = try ModuleHarness()
        let initReply = h.send("INIT")
        #expect(initReply.hasPrefix("299-Parla: ") && initReply.hasSuffix("\n299 OK LOADED SUCCESSFULLY\n"))
        // Server audio is refused (Parla plays itself); PulseAudio settings are taken.
        #expect(h.send("AUDIO", "audio_output_method=server", ".") == "207 OK RECEIVING AUDIO SETTINGS\n300-Parla plays through PulseAudio itself\n300 MODULE ERROR\n")
        #expect(h.send("AUDIO", "audio_output_method=pulse\naudio_pulse_device=default", ".") == "207 OK RECEIVING AUDIO SETTINGS\n203 OK AUDIO INITIALIZED\n")
        #expect(h.send("LOGLEVEL", "log_level=4", ".") == "207 OK RECEIVING LOGLEVEL SETTINGS\n203 OK LOGLEVEL SET\n")
        let voices = h.send("LIST VOICES").split(separator: "\n")
        #expect(voices.last == "200 OK VOICE LIST SENT")
        #expect(voices.contains("200-espeak-ng.el\tel\tnone"))
        // Every voice line has the three tab-separated fields the server insists on.
        #expect(voices.dropLast().allSatisfy { $0.hasPrefix("200-") && $0.split(separator: "\t").count == 3 })
        #expect(h.send("BOGUS") == "300 ERR UNKNOWN COMMAND\n")
        #expect(h.send("DEBUG ON /tmp/x ") == "200 OK DEBUGGING ON\n")
    }

    @Test func settingsMapToParlasUnits() throws {
        let h = try ModuleHarness()
        h.send("INIT")
        #expect(h.send("SET", "pitch=50\npitch_range=0\nrate=-100\nvolume=100\npunctuation_mode=all\nspelling_mode=off\ncap_let_recogn=spell\nvoice=female2\nlanguage=el\nsynthesis_voice=NULL\nsome_future_key=1", ".") == "203 OK RECEIVING SETTINGS\n203 OK SETTINGS RECEIVED\n")
        #expect(h.send("SPEAK", "<speak>Γειά σου</speak>", ".") == "202 OK RECEIVING MESSAGE\n200 OK SPEAKING\n")
        let u = try #require(h.speaker.spoken.withLock { $0.last })
        #expect(u.wordsPerMinute == 80 && u.pitch == 1.5 && u.volume == 1 && u.punctuation == .all)
        // The client's language is a preference: its voice (with the voice type's variant),
        // not a fixed utterance language, so other languages in the text keep their voices.
        #expect(u.language == nil && u.voice?.identifier == "espeak-ng.el+f2")
        // Out of range, or a voice the catalog does not have: refused (the server drops the message).
        #expect(h.send("SET", "rate=101", ".") == "203 OK RECEIVING SETTINGS\n303 ERROR INVALID PARAMETER OR VALUE\n")
        #expect(h.send("SET", "synthesis_voice=nosuchvoice", ".") == "203 OK RECEIVING SETTINGS\n303 ERROR INVALID PARAMETER OR VALUE\n")
        #expect(h.logged.withLock { $0.last?.contains("nosuchvoice") } == true)
        var s = ModuleSettings()
        try s.apply("rate=100")
        #expect(s.wordsPerMinute == 450)
        try s.apply("rate=0")
        #expect(s.wordsPerMinute == 175)
        // The module's ParlaMaxRate moves rate 100, and the steps up to it, not those below 0.
        s.maxRate = 1000
        try s.apply("rate=100")
        #expect(s.wordsPerMinute == 1000)
        try s.apply("rate=50")
        #expect(s.wordsPerMinute == 587.5)
        try s.apply("rate=-100")
        #expect(s.wordsPerMinute == 80)
        try s.apply("language=c")
        #expect(s.language == nil)
    }

    /// `ParlaMaxRate` in the module's configuration sets speech-dispatcher's rate 100 (as
    /// sd_espeak-ng's EspeakMaxRate); a value out of 175–1000 is reported and the default kept.
    @Test func theConfigurationsMaximumRateIsRate100() throws {
        #expect(ModuleSettings.maxRate(inConfiguration: "# nothing\nParlaPreferVoice \"en=x\"\n") == nil)
        #expect(ModuleSettings.maxRate(inConfiguration: "#ParlaMaxRate 900\nParlaMaxRate 800\n") == .success(800))
        #expect(ModuleSettings.maxRate(inConfiguration: "ParlaMaxRate \"1000\"") == .success(1000))
        for bad in ["ParlaMaxRate 1200", "ParlaMaxRate 100", "ParlaMaxRate fast"] {
            guard case .failure(let refusal) = ModuleSettings.maxRate(inConfiguration: bad) else {
                Issue.record("\(bad) was taken")
                continue
            }
            #expect(refusal.reason.contains("175 to 1000"))
        }
        let h = try ModuleHarness(maxRate: 800)
        h.send("INIT")
        #expect(h.send("SET", "rate=100", ".") == "203 OK RECEIVING SETTINGS\n203 OK SETTINGS RECEIVED\n")
        #expect(h.send("SPEAK", "Fast.", ".") == "202 OK RECEIVING MESSAGE\n200 OK SPEAKING\n")
        #expect(try #require(h.speaker.spoken.withLock { $0.last }).wordsPerMinute == 800)
    }

    @Test func eventsFollowTheMessageAndEndExactlyOnce() throws {
        let h = try ModuleHarness()
        h.send("INIT")
        #expect(h.send("SPEAK", #"<speak>Hello <mark name="m1"/>world</speak>"#, ".") == "202 OK RECEIVING MESSAGE\n200 OK SPEAKING\n")
        #expect(h.deliver(.started) == "701 BEGIN\n")
        #expect(h.deliver(.mark("m1")) == "700-m1\n700 INDEX MARK\n")
        #expect(h.deliver(.mark("m2"), 99) == "")  // another utterance's event
        #expect(h.deliver(.finished) == "702 END\n")
        // Idle: a late event, a STOP or a PAUSE writes nothing (the server would hang on it).
        #expect(h.deliver(.cancelled) == "")
        #expect(h.send("STOP") == "" && h.send("PAUSE") == "")
        #expect(h.speaker.stops.load(ordering: .relaxed) == 0)
        // STOP while speaking: the speaker stops, and its cancellation is reported as 703.
        h.send("SPEAK", "<speak>Again</speak>", ".")
        #expect(h.send("STOP") == "")
        #expect(h.speaker.stops.load(ordering: .relaxed) == 1)
        // BEGIN comes first even when the message is cut off before it was heard.
        #expect(h.deliver(.cancelled, 2) == "701 BEGIN\n703 STOP\n")
        #expect(h.deliver(.finished, 2) == "")
        #expect(!h.session.isSpeaking)
    }

    @Test func pauseStopsAtTheNextSentenceMark() throws {
        let h = try ModuleHarness()
        h.send("INIT")
        h.send("SPEAK", #"<speak>One. <mark name="__spd_0"/>Two <mark name="w"/>words. <mark name="__spd_1"/>Three.</speak>"#, ".")
        #expect(h.deliver(.started) == "701 BEGIN\n")
        #expect(h.send("PAUSE") == "")
        // A client's own mark does not pause; the next __spd_ mark does, and is the last sent.
        #expect(h.deliver(.mark("w")) == "700-w\n700 INDEX MARK\n")
        #expect(h.speaker.stops.load(ordering: .relaxed) == 0)
        #expect(h.deliver(.mark("__spd_1")) == "700-__spd_1\n700 INDEX MARK\n")
        #expect(h.speaker.stops.load(ordering: .relaxed) == 1)
        #expect(h.deliver(.mark("later")) == "")
        #expect(h.deliver(.cancelled) == "704 PAUSE\n")
        // With no sentence mark left, a paused message simply ends.
        h.send("SPEAK", "<speak>Last one</speak>", ".")
        h.send("PAUSE")
        #expect(h.deliver(.finished, 2) == "701 BEGIN\n702 END\n")
    }

    @Test func messagesBecomeUtterances() throws {
        let h = try ModuleHarness()
        h.send("INIT")
        // Bare text from an SSML client is wrapped; dots doubled by the server are undone.
        h.send("SPEAK", "Hi <mark name=\"x\"/>there\n..dot", ".")
        let bare = try #require(h.speaker.spoken.withLock { $0.last })
        #expect(bare.string == "Hi there\n.dot" && bare.marks.map(\.name) == ["x"])
        h.deliver(.finished)
        #expect(try ModuleMessage.key("shift_a").string == "shift a")
        #expect(try ModuleMessage.key("control_alt_delete").string == "control alt delete")
        #expect(try ModuleMessage.key("kp-enter").string == "keypad enter")
        #expect(try ModuleMessage.key("kp-*").string == "keypad star")
        #expect(try ModuleMessage.key("f11").string == "F 11")
        #expect(try ModuleMessage.key("prior").string == "page up")
        #expect(try ModuleMessage.character("space", capitals: .none).string == "space")
        #expect(try ModuleMessage.character("A", capitals: .spell).string == "capital A")
        #expect(try ModuleMessage.soundIcon("message_new").string == "message new")
        // The single character is spelled (say-as characters), in the client's language.
        let c = try ModuleMessage.character("ж", capitals: .none)
        #expect(c.text.runs.first?[SpeechAttributes.SpellOutAttribute.self] == true)
    }

    @Test func badMessagesAreRefusedAndTheNextOneSpeaks() throws {
        let h = try ModuleHarness()
        h.send("INIT")
        #expect(h.send("SPEAK", "<speak>broken <s>markup</speak>", ".") == "202 OK RECEIVING MESSAGE\n301 ERROR CANT SPEAK\n")
        #expect(h.send("SPEAK", "<speak> </speak>", ".") == "202 OK RECEIVING MESSAGE\n301 ERROR CANT SPEAK\n")
        #expect(h.send("SPEAK", "", ".") == "202 OK RECEIVING MESSAGE\n301 ERROR CANT SPEAK\n")
        #expect(h.send("CHAR", "a\nb", ".") == "202 OK RECEIVING MESSAGE\n305 DATA MORE THAN ONE LINE\n")
        #expect(h.logged.withLock { $0.first?.contains("line 1, column") } == true)
        #expect(h.send("SPEAK", "<speak>fine</speak>", ".") == "202 OK RECEIVING MESSAGE\n200 OK SPEAKING\n")
        // A plan that fails (no voice for the language) is refused as well.
        let failing = try ModuleHarness(speaker: FakeSpeaker(failPlan: true))
        failing.send("INIT")
        #expect(failing.send("SPEAK", "<speak>x</speak>", ".") == "202 OK RECEIVING MESSAGE\n301 ERROR CANT SPEAK\n")
        #expect(!failing.session.isSpeaking)
    }

    @Test func quitIsAnswered() throws {
        let h = try ModuleHarness()
        h.send("INIT")
        #expect(h.session.receive("QUIT") == false)
    }
}
