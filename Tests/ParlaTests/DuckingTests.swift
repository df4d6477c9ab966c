import Foundation
import Parla
import ParlaAudioTestSupport
import ParlaEngine
import ParlaPulseAudio
import Testing

/// Ducking, through a private sound server: another program's music (paplay, role `music`, on
/// a sink of its own so its level can be measured apart from the speech) is lowered while
/// Parla speaks and comes back after.
@Suite("Ducking other audio through a private sound server", .serialized)
struct DuckingTests {
    static let sentence = "The music is lower while this sentence is spoken, and back up after it."

    /// Speaks `text` and returns when the first word was reported and when it finished
    /// (monotonic nanoseconds).
    func speak(_ texts: [String], with synth: SpeechSynthesizer) async throws -> (start: UInt64, end: UInt64) {
        let log = EventLog(synth)
        let ids = texts.map { synth.speak(Utterance(string: $0)) }
        #expect(await log.wait { !log.words(ids[0]).isEmpty })
        let start = monotonicNanoseconds()
        #expect(await log.wait(timeout: 30) { ids.allSatisfy { log.terminal($0) != nil } })
        let end = monotonicNanoseconds()
        for id in ids {
            guard case .finished = log.terminal(id)?.kind else {
                Issue.record("it did not finish: \(log.of(id).map(\.kind.name))")
                return (start, end)
            }
        }
        return (start, end)
    }

    func synth(_ server: TestAudioServer, ducking: DuckingOptions?) -> SpeechSynthesizer {
        SpeechSynthesizer(
            audioOutput: AudioOutputOptions(device: server.sink, server: server.server, ducking: ducking),
            engine: SynthesisEngine())
    }

    @Test(arguments: SoundServer.allCases)
    func otherAudioIsLoweredWhileParlaSpeaksAndRestoredAfter(_ kind: SoundServer) async throws {
        let server = try await TestAudioServer.start(kind)
        let music = try await TestMusic.start(on: server)
        let now = monotonicNanoseconds()
        let full = try #require(music.level(from: now - 400_000_000, to: now))

        // Off by default: the music keeps its level while Parla speaks.
        let plain = try await speak([Self.sentence], with: synth(server, ducking: nil))
        let undisturbed = try #require(music.level(from: plain.start + 150_000_000, to: plain.end - 100_000_000))
        #expect(abs(undisturbed - full) < 1, "without ducking the music went from \(full) to \(undisturbed) dBFS")

        // With ducking: 15 dB lower while speaking, back to where it was after the release.
        let ducker = synth(server, ducking: DuckingOptions(attenuation: 15, release: .milliseconds(300)))
        let spoken = try await speak([Self.sentence], with: ducker)
        let ducked = try #require(music.level(from: spoken.start + 150_000_000, to: spoken.end - 100_000_000))
        #expect(abs(ducked - (full - 15)) < 2, "ducked from \(full) to \(ducked) dBFS (15 dB asked)")
        try await Task.sleep(for: .milliseconds(1500))
        let back = music.firstTime(atLevel: full, from: spoken.end, to: monotonicNanoseconds())
        let after = try #require(music.level(from: spoken.end + 1_000_000_000, to: spoken.end + 1_500_000_000))
        #expect(abs(after - full) < 0.5, "after the speech the music is at \(after) dBFS, before it was \(full)")
        let restoreMilliseconds = back.map { Double($0 - spoken.end) / 1e6 } ?? .infinity
        #expect(restoreMilliseconds < 1000)
        print("ducking on \(kind): \(String(format: "%.1f", ducked - full)) dB while speaking; back within 1 dB \(String(format: "%.0f", restoreMilliseconds)) ms after the speech ended (release 300 ms)")

        // Speech that starts while the music is down keeps it down: no pumping between two
        // utterances closer than the release time.
        let two = try await speak(["One, two.", "Three, and still low."], with: ducker)
        var t = two.start + 150_000_000
        while t + 40_000_000 < two.end - 100_000_000 {
            let l = try #require(music.level(from: t, to: t + 40_000_000))
            #expect(l < full - 10, "the music came up to \(l) dBFS between two utterances")
            t += 40_000_000
        }
    }

    /// A program that outlives its synthesizer is not left with the ducking guard as a zombie:
    /// the guard is waited for once it exits.
    @Test func aSynthesizerThatDuckedLeavesNoZombieGuard() async throws {
        let server = try await TestAudioServer.start(.pulseaudio)
        let before = Self.zombieGuards()
        do {
            let ducker = synth(server, ducking: DuckingOptions(attenuation: 15, release: .milliseconds(50)))
            _ = try await speak(["Ducked, briefly."], with: ducker)
            #expect(!Self.childGuards().subtracting(before).isEmpty, "no guard was started")
        }
        var left = Self.zombieGuards().subtracting(before)
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while monotonicNanoseconds() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            left = Self.zombieGuards().subtracting(before)
            if left.isEmpty, Self.childGuards().subtracting(before).isEmpty { break }
        }
        #expect(left.isEmpty, "zombie guards left: \(left.sorted())")
    }

    /// This process's children started as `/proc/self/exe` (as the guard is, so named `exe`),
    /// and of them, those that have ended and were not waited for.
    static func childGuards(zombiesOnly: Bool = false) -> Set<Int32> {
        let me = getpid()
        var found: Set<Int32> = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
            else { continue }
            let name = String(stat[stat.index(after: open)..<close])
            let rest = stat[stat.index(after: close)...].split(separator: " ")
            guard rest.count > 1, Int32(rest[1]) == me, name == "exe" else { continue }
            if !zombiesOnly || rest[0] == "Z" { found.insert(pid) }
        }
        return found
    }

    static func zombieGuards() -> Set<Int32> { childGuards(zombiesOnly: true) }

    /// The roles module-role-ducking triggers on, read from its argument as `pactl list
    /// modules` shows it.
    @Test func roleDuckingModuleArgumentsAreRead() {
        #expect(Ducker.triggerRoles("") == ["phone"])
        #expect(Ducker.triggerRoles("ducking_roles=music volume=-20dB") == ["phone"])
        #expect(Ducker.triggerRoles("trigger_roles=a11y,phone ducking_roles=music") == ["a11y", "phone"])
        #expect(Ducker.triggerRoles("trigger_roles=\"a11y, event\" global=true") == ["a11y", "event"])
        #expect(Ducker.triggerRoles("ducking_roles=a11y trigger_roles='phone'") == ["phone"])
    }

    /// Where PulseAudio's own module-role-ducking triggers on Parla's role, Parla leaves it to
    /// the module: the music drops by the module's 20 dB, not by 20 + 15.
    @Test func pulseAudiosRoleDuckingModuleIsUsedWhereLoaded() async throws {
        let server = try await TestAudioServer.start(.pulseaudio)
        let loaded = try runProcess("/usr/bin/pactl", ["-s", server.server, "load-module", "module-role-ducking",
            "trigger_roles=a11y", "ducking_roles=music", "volume=-20dB", "global=true"])
        #expect(loaded.status == 0, "\(loaded.error)")
        let music = try await TestMusic.start(on: server)
        let now = monotonicNanoseconds()
        let full = try #require(music.level(from: now - 400_000_000, to: now))
        let spoken = try await speak([Self.sentence], with: synth(server, ducking: DuckingOptions(attenuation: 15)))
        let ducked = try #require(music.level(from: spoken.start + 200_000_000, to: spoken.end - 100_000_000))
        #expect(abs(ducked - (full - 20)) < 2, "ducked from \(full) to \(ducked) dBFS (the module's 20 dB)")
    }
}
