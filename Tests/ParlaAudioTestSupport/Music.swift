import Foundation
import ParlaIO
import ParlaCore
import ParlaPulseAudio
#if canImport(Glibc)
import Glibc
#endif

/// Another program's audio for the ducking tests: `paplay` playing a steady 440 Hz tone with
/// `media.role=music` to a second null sink of the test server, `music`, whose monitor is
/// recorded, so the tone's level can be measured apart from Parla's speech.
/// Unchecked: it holds the player's `Process`, which is not Sendable; it is started in `init`
/// and only ended (once) by `deinit` or `stop()`.
public final class TestMusic: @unchecked Sendable {
    /// The sink the music plays to.
    public let sink = "music"
    /// Records the music sink's monitor.
    public let recorder: PulseAudioRecorder
    private let player: Process
    private let directory: URL

    /// Starts the music on `server` and waits until it is heard at a steady level.
    public static func start(on server: TestAudioServer, seconds: Int = 40) async throws -> TestMusic {
        let directory = try makeTemporaryDirectory()
        let tone = directory.appendingPathComponent("tone.wav").path
        let sox = try runProcess("/usr/bin/sox", ["-n", "-r", "22050", "-c", "1", "-b", "16", tone, "synth", "\(seconds)", "sine", "440", "vol", "0.3"])
        guard sox.status == 0 else { throw TestAudioServerError(message: "sox could not make a tone: \(sox.error)") }
        let loaded = try runProcess("/usr/bin/pactl", ["-s", server.server, "load-module", "module-null-sink", "sink_name=music", "rate=22050", "channels=1"])
        guard loaded.status == 0 else { throw TestAudioServerError(message: "cannot load a music sink: \(loaded.error)") }
        var recorder: PulseAudioRecorder?
        let started = Date()
        while recorder == nil {
            recorder = try? PulseAudioRecorder(source: "music.monitor", server: server.server)
            if recorder == nil {
                if Date().timeIntervalSince(started) > 15 { throw TestAudioServerError(message: "no monitor for the music sink") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try await recorder?.settle()
        let player = Process()
        player.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
        player.arguments = ["--property=media.role=music", "--client-name=test-music", "-d", "music", tone]
        var env = ProcessInfo.processInfo.environment
        env["PULSE_SERVER"] = server.server
        player.environment = env
        player.standardOutput = FileHandle.nullDevice
        player.standardError = FileHandle.nullDevice
        try player.run()
        guard let recorder else { throw TestAudioServerError(message: "no monitor for the music sink") }
        let music = TestMusic(recorder: recorder, player: player, directory: directory)
        // Heard, at a steady level: two 300 ms windows in a row within 0.2 dB.
        let deadline = Date().addingTimeInterval(15)
        while true {
            let now = monotonicNanoseconds()
            if let level = music.level(from: now - 300_000_000, to: now), level > -20,
               let earlier = music.level(from: now - 600_000_000, to: now - 300_000_000), abs(level - earlier) < 0.2 { break }
            if Date() > deadline { throw TestAudioServerError(message: "the music was not heard at the music sink's monitor") }
            try await Task.sleep(for: .milliseconds(50))
        }
        return music
    }

    private init(recorder: PulseAudioRecorder, player: Process, directory: URL) {
        self.recorder = recorder
        self.player = player
        self.directory = directory
    }

    /// The music's RMS level in dBFS in blocks that reached the monitor between `from` and `to`
    /// (monotonic nanoseconds; by the recording's sample clock, not when the test's reader woke,
    /// see ``PulseAudioRecorder/clockedBlocks()``), nil if none did.
    public func level(from: UInt64, to: UInt64) -> Double? {
        let samples = recorder.clockedBlocks().filter { $0.arrivalNanoseconds > from && $0.arrivalNanoseconds <= to }.flatMap(\.samples)
        guard !samples.isEmpty else { return nil }
        let power = samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples.count)
        return 10 * log10(max(power, 1e-3) / (32768.0 * 32768.0))
    }

    /// The first time from `from` on when the level over `window` is within `tolerance` dB of
    /// `reference`, nil if it never is before `to`.
    public func firstTime(atLevel reference: Double, tolerance: Double = 1, from: UInt64, to: UInt64, window: UInt64 = 20_000_000) -> UInt64? {
        var t = from
        while t + window <= to {
            if let l = level(from: t, to: t + window), abs(l - reference) <= tolerance { return t + window }
            t += window / 2
        }
        return nil
    }

    deinit {
        if player.isRunning { kill(player.processIdentifier, SIGKILL) }
        recorder.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
