import ParlaIO
import ArgumentParser
import FoundationEssentials
import Parla
import ParlaCommands
import ParlaTesting
#if canImport(Glibc)
    import Glibc
#endif

/// `parla-bench` (run through `scripts/bench-live`): onset, stop, word-event drift
/// and voice-switch gap of live speech, measured at a null sink's monitor, next to
/// speech-dispatcher (`spd-say`) and the `espeak-ng` command in the same run.
struct BenchLive: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parla-bench", abstract: "Benchmark live playback at a PulseAudio sink's monitor (see scripts/bench-live).")

    @Option(help: "PulseAudio server to use (default: PULSE_SERVER).") var server: String?
    @Option(help: "The null sink to play to; its monitor is recorded.") var sink: String = "parla_bench"
    @Option(help: "Runs per measurement.") var runs: Int = 20
    @Flag(help: "Skip speech-dispatcher and espeak-ng.") var parlaOnly = false
    @Option(
        help:
            "Benchmark this speak-selection binary instead (hotkey to first sound, toggle stop); the PRIMARY selection must hold a long text."
    )
    var selection: String?
    @Option(help: "The name of the speak-selection row (with --selection).") var label: String = "speak-selection"
    @Option(help: "The targets line printed under the speak-selection table.")
    var targets: String = "targets: first sound ≤ 30 (process start and engine loading included), toggle stop ≤ 20"
    @Option(
        help:
            "Measure this parla binary's start instead: 'parla say Hello world.' against 'espeak-ng Hello world.', alternating, process start to first audible sample."
    )
    var startup: String?
    @Option(help: "With --startup: the voice 'parla say' speaks with (-v).") var startupVoice: String?
    @Option(help: "With --startup: what 'parla say' speaks (the baseline must speak the same).") var startupText: String = "Hello world."
    @Option(
        help:
            "With --startup: the baseline, a shell command that speaks 'Hello world.' (default: the espeak-ng command); its name is --baseline-name."
    )
    var baseline: String?
    @Option(help: "With --baseline: its name in the table.") var baselineName: String = "baseline"
    @Option(
        help:
            "Measure sd_parla against sd_espeak-ng inside the speech-dispatcher at this address (unix_socket:PATH); see scripts/bench-speechd."
    )
    var speechd: String?
    @Flag(
        help:
            "Measure live rate changes (latency in ms of audio, word drift across the change, words repeated or skipped) and live volume (see scripts/bench-prosody)."
    )
    var prosody = false
    @Flag(
        help:
            "Measure rendered rates and pitch: each rate's speed-up over 175 ÷ the one asked for joe and espeak-ng, joe's F0 at pitch 25 and 75, joe's CPU at 800 against 175 (no sound server; see scripts/bench-prosody)."
    )
    var rates = false
    @Option(
        help:
            "Measure libparla's C API: this program (bench/c-onset.c built against libparla) speaks, and its call to first sound is set against the Swift API's in this process (see scripts/bench-c)."
    )
    var cHelper: String?
    @Option(help: "speech-dispatcher's log directory (sd_parla logs when it reads STOP there, at LogLevel 5).")
    var speechdLog: String = "."
    @Option(
        help:
            "With --speechd: only these figures, comma-separated, of echo, messages, say-all, cancel, switch, drift (default: all)."
    )
    var speechdFigures: String = "echo,messages,say-all,cancel,switch,drift"

    static let mixed = "Hello there, how are you today. Καλημέρα σας, τι κάνετε;"
    static let english = "Hello there, how are you today."
    static let greek = "Καλημέρα σας, τι κάνετε;"
    static let long = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen."
    /// A first sentence of 40 words with no comma (a comma would let its first clause go ahead
    /// alone): its first sound measures how a natural voice streams.
    static let fortyWords =
        "Screen reader users choose a voice by how fast it answers so the natural voice now makes its audio a little at a time and plays the first part while it is still working on the rest of this sentence."
    /// The 40-word sentence, then more sentences to 10,000 characters (a chapter read aloud): its
    /// first sound should not wait for the rest.
    static let book: String = {
        let more = [
            "The rain had stopped by the time the train reached the coast, and the sea was grey and quiet.",
            "She counted the windows of the station twice, because the first time she had been thinking of something else.",
            "Nobody on the platform seemed to be waiting for anyone, which was exactly what she had hoped for.",
        ]
        var text = fortyWords
        var i = 0
        while text.utf8.count < 10_000 {
            text += " " + more[i % more.count]
            i += 1
        }
        return text
    }()

    func run() async throws {
        // The reference renderings of a Piper voice are made as live speech is spoken (its
        // first clause alone), so that they are the same audio (engine_host.c).
        if rates {
            try await benchRates()
            return
        }
        setenv("PARLA_PIPER_EARLY_CLAUSE", "all", 0)
        var recorder: PulseAudioRecorder?
        for _ in 0..<250 where recorder == nil {  // the sink is loaded just after the socket appears
            recorder = try? PulseAudioRecorder(source: sink + ".monitor", server: server)
            if recorder == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        guard let recorder else { throw ParlaError.audioDeviceNotFound(sink + ".monitor") }
        try await recorder.settle()  // a new null sink's first block
        if let selection {
            try await benchSelection(recorder, binary: selection)
            return
        }
        if let speechd {
            try await benchSpeechd(recorder, address: speechd, logDirectory: speechdLog)
            return
        }
        if prosody {
            try await benchProsody(recorder)
            return
        }
        if let cHelper {
            try await benchCLibrary(recorder, helper: cHelper)
            return
        }
        if let startup {
            try await benchStartup(recorder, binary: startup)
            return
        }
        var table: [(String, String, [Double], [Double], [Double], [Double])] = []

        let parla = try await measureParla(recorder)
        table.append(("parla (in-process)", "", parla.onset, parla.stop, parla.drift, parla.gap))
        let voices =
            (try? VoiceCatalog.default()).map { c in ["en", "el"].compactMap { try? c.voice(for: LanguageTag($0) ?? "en").identifier } }
            ?? []
        if !parlaOnly {
            let pcmGap = try await naturalGap()
            if Processes.have("espeak-ng") {
                let e = try await measureCommand(recorder, speak: { ["espeak-ng", "-v", $0, $1] }, stop: nil, pcmGap: pcmGap)
                table.append(("espeak-ng command", "kill", e.onset, e.stop, [], e.gap))
            }
            if Processes.have("spd-say") {
                let s = try await measureCommand(
                    recorder, speak: { ["spd-say", "-w", "-l", $0, $1] }, stop: ["spd-say", "-C"], pcmGap: pcmGap)
                table.append(("speech-dispatcher (spd-say)", "spd-say -C", s.onset, s.stop, [], s.gap))
            }
        }
        print("")
        print("Live playback at the null sink's monitor, \(runs) runs each; median / p95 in ms")
        print(
            "system".padding(30) + "onset".padding(16, left: true) + "stop".padding(16, left: true)
                + "word drift".padding(16, left: true) + "|drift| p95".padding(13, left: true) + "switch gap".padding(16, left: true))
        for (name, _, onset, stop, drift, gap) in table {
            let absDrift = drift.map(abs)
            print(
                name.padding(30) + cell(onset) + cell(stop)
                    + (drift.isEmpty ? "n/a".padding(16, left: true) : cell(drift))
                    + (drift.isEmpty ? "n/a" : fmt(percentile(absDrift, 0.95))).padding(13, left: true) + cell(gap))
        }
        print("targets: onset ≤ 15, stop ≤ 10, |drift median| ≤ 15 and p95 ≤ 30, gap ≤ 20")
        print(
            "parla: word drift against each word's own onset at the monitor; the server ran dry \(Int(parla.underflows.reduce(0, +))) times in "
                + "\(parla.underflows.count) runs (\(parla.underflows.filter { $0 > 0 }.count) runs with one or more); the buffer at the end, median / max: "
                + "\(fmt(percentile(parla.buffer, 0.5))) / \(fmt(parla.buffer.max() ?? .nan)) ms")
        print("voices: " + voices.joined(separator: ", ") + "; switch gap: at the English → Greek switch, beyond the engines' own silence")
        print(
            "silence between two English sentences beyond the voice's own, median / p95: " + cell(parla.sentenceGap) + " ms (target ≤ 10)")
        print(
            "first sound of a 40-word first sentence (no comma), voice warm, median / p95: " + cell(parla.longOnset) + " ms (target ≤ 80)")
        let bookRatio = percentile(parla.bookOnset, 0.5) / percentile(parla.longOnset, 0.5)
        print(
            "the same sentence first in a 10,000-character text, median / p95: " + cell(parla.bookOnset) + " ms = "
                + fmt2(bookRatio) + "× the sentence alone (target ≤ 1.2)")
        print(
            "espeak-ng and spd-say are separate processes: their onset includes process start (and, for spd-say, the round trip to its daemon); their stop is 'kill' / 'spd-say -C' to silence."
        )
    }

    // MARK: Start-up

    /// Process start to first audible sample of `parla say` and of `espeak-ng`, alternating.
    func benchStartup(_ recorder: PulseAudioRecorder, binary: String) async throws {
        let text = startupText
        let parlaSay = [binary, "say"] + (startupVoice.map { ["-v", $0] } ?? []) + [text]
        let other: (String, [String]) = baseline.map { (baselineName, ["/bin/sh", "-c", $0]) } ?? ("espeak-ng", ["espeak-ng", text])
        let commands: [(String, [String])] = [("parla say" + (startupVoice.map { " -v " + $0 } ?? ""), parlaSay), other]
        var onsets: [[Double]] = commands.map { _ in [] }
        for (_, command) in commands { _ = waitForExit(Processes.spawn(command)) }  // page in
        for run in 0..<runs {
            for (k, (name, command)) in commands.enumerated() {
                recorder.reset()
                let t0 = monotonicNanoseconds()
                _ = waitForExit(Processes.spawn(command))
                try await Task.sleep(for: .milliseconds(200))
                guard let first = recorder.loudSampleTimes(after: t0).first else { continue }
                onsets[k].append(ms(first - t0))
                FileHandleErr.write("\(name) run \(run + 1)/\(runs): onset \(fmt(onsets[k].last ?? 0)) ms\n")
            }
        }
        print("")
        print(
            "Start-up at the null sink's monitor (process start to first audible sample), \(runs) runs each, alternating; median / p95 in ms"
        )
        for (k, (name, _)) in commands.enumerated() {
            print(name.padding(30) + cell(onsets[k]))
        }
        if let p = onsets.first, let e = onsets.last, !p.isEmpty, !e.isEmpty {
            print(
                "ratio parla / \(other.0) (medians): " + fmt2(percentile(p, 0.5) / percentile(e, 0.5))
                    + (baseline == nil ? "  (target ≤ 1)" : "  (target ≤ 0.35)"))
        }
    }

    // MARK: speak-selection

    /// Process start to first audible sample, and a second process's start to silence.
    func benchSelection(_ recorder: PulseAudioRecorder, binary: String) async throws {
        var rows: [(String, [Double], [Double])] = []
        var first: [Double] = [], toggle: [Double] = [], exits: [Double] = []
        _ = try await hotkey(recorder, start: [binary], stop: [binary])  // page the binary and voices in
        for run in 0..<runs {
            guard let (a, b, gone) = try await hotkey(recorder, start: [binary], stop: [binary]) else { continue }
            first.append(a)
            toggle.append(b)
            exits.append(gone)
            FileHandleErr.write(
                "\(label) run \(run + 1)/\(runs): first sound \(fmt(a)) ms, toggle stop \(fmt(b)) ms, first process gone \(fmt(gone)) ms\n")
        }
        rows.append((label, first, toggle))
        if !parlaOnly && Processes.have("spd-say") {
            var sf: [Double] = [], ss: [Double] = []
            _ = try await hotkey(recorder, start: ["spd-say", Self.long], stop: ["spd-say", "-C"])  // starts its daemon
            for run in 0..<runs {
                guard let (a, b, _) = try await hotkey(recorder, start: ["spd-say", Self.long], stop: ["spd-say", "-C"]) else { continue }
                sf.append(a)
                ss.append(b)
                FileHandleErr.write("spd-say run \(run + 1)/\(runs): first sound \(fmt(a)) ms, stop \(fmt(b)) ms\n")
            }
            rows.append(("spd-say / spd-say -C (running daemon)", sf, ss))
        }
        print("")
        print("Hotkey commands at the null sink's monitor, \(runs) runs each; median / p95 in ms")
        print("command".padding(44) + "first sound".padding(18, left: true) + "stop".padding(18, left: true))
        for (name, a, b) in rows {
            print(name.padding(44) + cell(a).padding(18, left: true) + cell(b).padding(18, left: true))
        }
        // The stop column ends at the last loud sample the monitor shows after the second
        // press; a stop faster than its timing (a few ms) reads 0. When the first process is
        // gone bounds it from above.
        print("\(label): the speaking process had exited \(cell(exits)) ms after the second press")
        print(targets)
    }

    /// Starts `start`, measures until its first loud sample, lets it speak 300 ms, starts `stop`
    /// while it sounds, and measures until the last loud sample, and until `start`'s process
    /// has exited. Both processes are waited for.
    func hotkey(_ recorder: PulseAudioRecorder, start: [String], stop: [String]) async throws -> (Double, Double, Double)? {
        recorder.reset()
        let t0 = monotonicNanoseconds()
        let speaker = Processes.spawn(start)
        var heard: UInt64?
        while heard == nil && monotonicNanoseconds() - t0 < 5_000_000_000 {
            heard = recorder.loudSampleTimes(after: t0).first
            if heard == nil { try await Task.sleep(for: .milliseconds(2)) }
        }
        try await Task.sleep(for: .milliseconds(300))
        try await waitUntilSounding(recorder)
        let t1 = monotonicNanoseconds()
        let stopper = Processes.spawn(stop)
        _ = waitForExit(speaker)
        let gone = monotonicNanoseconds()
        _ = waitForExit(stopper)
        try await Task.sleep(for: .milliseconds(300))
        guard let heard else { return nil }
        let last = recorder.loudSampleTimes(after: t0).last ?? t1
        return (ms(heard - t0), last > t1 ? ms(last - t1) : 0, ms(gone - t1))
    }

    // MARK: Parla

    struct Figures {
        var onset: [Double] = []
        /// The first sound of the 40-word sentence, alone and as the first of a long text.
        var longOnset: [Double] = []
        var bookOnset: [Double] = []
        var stop: [Double] = []
        var drift: [Double] = []
        var gap: [Double] = []
        var sentenceGap: [Double] = []
        /// Per run of the mixed sentence: the server's underflows, and the buffer at the end (ms).
        var underflows: [Double] = []
        var buffer: [Double] = []
    }

    static let twoSentences = "Hello there, how are you today. I am fine, thank you, and the weather is good."

    /// Silence at the sink between two sentences of one language, beyond the silence the engine
    /// itself puts there (in the synthesized audio).
    func measureSentenceGap(_ synth: SpeechSynthesizer, _ recorder: PulseAudioRecorder, into f: inout Figures) async throws {
        let box = SampleBox()
        let timeline = try await synth.write(Utterance(string: Self.twoSentences)) { e in
            if case .audio(let b) = e { box.append(b.samples) }
        }
        let pcm = box.samples
        guard timeline.sentences.count > 1 else { return }
        let boundary = timeline.sentences[1].startSample
        let firstLoudPCM = pcm.firstIndex { $0.magnitude >= 300 } ?? 0
        let pcmSilence = silence(in: pcm, around: boundary)
        for run in 0..<runs {
            recorder.reset()
            let t0 = monotonicNanoseconds()
            _ = await synth.speakAndWait(Utterance(string: Self.twoSentences))
            try await Task.sleep(for: .milliseconds(150))
            let loud = recorder.loudSampleTimes(after: t0)
            guard let first = loud.first else { continue }
            let boundaryTime = Double(first) + Double(boundary - firstLoudPCM) * 1e9 / 22050
            f.sentenceGap.append(longestSilence(loud, near: boundaryTime) - pcmSilence)
            FileHandleErr.write("parla sentence gap \(run + 1)/\(runs): \(fmt(f.sentenceGap.last ?? .nan)) ms\n")
        }
    }

    func measureParla(_ recorder: PulseAudioRecorder) async throws -> Figures {
        let synth = SpeechSynthesizer(audioOutput: AudioOutputOptions(device: sink, server: server))
        try await synth.prepareToSpeak()
        var f = Figures()
        // The synthesized audio, to know where each word and the language boundary lie in it.
        let box = SampleBox()
        let timeline = try await synth.write(Utterance(string: Self.mixed)) { e in
            if case .audio(let b) = e { box.append(b.samples) }
        }
        let pcm = box.samples
        // Live speech skips the engine's silence before the first sound (up to -60 dBFS, as
        // TimelineBuilder does): its samples are counted from there.
        let firstLoudPCM = pcm.firstIndex { $0.magnitude >= 300 } ?? 0
        let leadIn = pcm.firstIndex { $0.magnitude > 32 } ?? 0
        let boundary = timeline.segments.count > 1 ? timeline.segments[1].startSample : pcm.count / 2
        let pcmSilence = silence(in: pcm, around: boundary)

        _ = await synth.speakAndWait(Utterance(string: "Warm up."))
        for run in 0..<runs {
            recorder.reset()
            let events = synth.events()
            let t0 = monotonicNanoseconds()
            let id = synth.speak(Utterance(string: Self.mixed))
            var words: [(UInt64, Int)] = []
            var playback: PlaybackReport?
            for await e in events where e.utterance == id {
                if case .willSpeakWord(let r) = e.kind { words.append((e.time.nanoseconds, r.audioSample)) }
                if e.kind.isTerminal {
                    playback = e.playback
                    break
                }
            }
            try await Task.sleep(for: .milliseconds(150))
            let loud = recorder.loudSampleTimes(after: t0)
            guard let first = loud.first else { continue }
            f.onset.append(ms(first - t0))
            // Each word against its own onset at the monitor (silence the server plays when it
            // runs dry moves both); how often the server ran dry, and the buffer it ended with.
            var line: [String] = []
            let drift = recorder.wordDrift(
                words: words.map { (time: $0.0, sample: $0.1) }, synthesized: pcm, sampleRate: timeline.sampleRate, after: t0,
                leadIn: leadIn)
            for (word, d) in zip(words, drift) { line.append("\(word.1):\(fmt(d))") }
            f.drift += drift
            if let playback { f.underflows.append(Double(playback.underflows)); f.buffer.append(playback.latency.inMilliseconds) }
            if getenv("PARLA_BENCH_VERBOSE") != nil { FileHandleErr.write("drift " + line.joined(separator: " ") + "\n") }
            let boundaryTime = Double(first) + Double(boundary - firstLoudPCM) * 1e9 / 22050
            f.gap.append(longestSilence(loud, near: boundaryTime) - pcmSilence)
            FileHandleErr.write("parla run \(run + 1)/\(runs): onset \(fmt(f.onset.last ?? .nan)) ms\n")
        }
        try await measureSentenceGap(synth, recorder, into: &f)
        // The 40-word sentence alone, and as the first of a 10,000-character text, alternating.
        for run in 0..<runs {
            for (text, isBook) in [(Self.fortyWords, false), (Self.book, true)] {
                recorder.reset()
                let t0 = monotonicNanoseconds()
                let id = synth.speak(Utterance(string: text))
                var first: UInt64?
                for _ in 0..<400 where first == nil {
                    try await Task.sleep(for: .milliseconds(5))
                    first = recorder.loudSampleTimes(after: t0).first
                }
                synth.stop(at: .immediate)
                _ = id
                try await Task.sleep(for: .milliseconds(200))
                guard let first else { continue }
                if isBook { f.bookOnset.append(ms(first - t0)) } else { f.longOnset.append(ms(first - t0)) }
                FileHandleErr.write(
                    "parla \(isBook ? "10,000-character" : "40-word") run \(run + 1)/\(runs): onset \(fmt(ms(first - t0))) ms\n")
            }
        }
        for run in 0..<runs {
            recorder.reset()
            let events = synth.events()
            let id = synth.speak(Utterance(string: Self.long))
            var n = 0
            for await e in events where e.utterance == id {
                if case .willSpeakWord = e.kind { n += 1 }
                if n == 3 { break }
            }
            let t0 = monotonicNanoseconds()
            synth.stop()
            try await Task.sleep(for: .milliseconds(300))
            let last = recorder.loudSampleTimes().last ?? t0
            f.stop.append(last > t0 ? ms(last - t0) : 0)
            FileHandleErr.write("parla stop \(run + 1)/\(runs): \(fmt(f.stop.last ?? .nan)) ms\n")
        }
        return f
    }

    func render(_ synth: SpeechSynthesizer, _ text: String) async throws -> [Int16] {
        let box = SampleBox()
        try await synth.write(Utterance(string: text)) { e in
            if case .audio(let b) = e { box.append(b.samples) }
        }
        return box.samples
    }

    /// Silence the engine itself puts between the English and the Greek sentence, rendering them
    /// separately as the command-line tools do.
    func naturalGap() async throws -> Double {
        let synth = SpeechSynthesizer()
        let a = try await render(synth, Self.english)
        let b = try await render(synth, Self.greek)
        let tail = a.count - 1 - (a.lastIndex { $0.magnitude >= 300 } ?? a.count - 1)
        let head = b.firstIndex { $0.magnitude >= 300 } ?? 0
        return Double(tail + head) * 1000 / 22050
    }

    // MARK: Other systems

    func measureCommand(_ recorder: PulseAudioRecorder, speak: (String, String) -> [String], stop: [String]?, pcmGap: Double) async throws
        -> Figures
    {
        var f = Figures()
        _ = waitForExit(Processes.spawn(speak("en", "Warm up.")))  // spd-say starts its daemon on first use
        for run in 0..<runs {
            recorder.reset()
            let t0 = monotonicNanoseconds()
            let a = Processes.spawn(speak("en", Self.english))
            _ = waitForExit(a)
            let b = Processes.spawn(speak("el", Self.greek))
            _ = waitForExit(b)
            try await Task.sleep(for: .milliseconds(300))
            let loud = recorder.loudSampleTimes(after: t0)
            guard let first = loud.first else { continue }
            f.onset.append(ms(first - t0))
            f.gap.append(longestSilence(loud, near: nil) - pcmGap)
            FileHandleErr.write("\(speak("en", "")[0]) run \(run + 1)/\(runs): onset \(fmt(f.onset.last ?? .nan)) ms\n")
        }
        for _ in 0..<runs {
            recorder.reset()
            let p = Processes.spawn(speak("en", Self.long))
            // Wait until it is audible, then let it speak a little.
            let start = monotonicNanoseconds()
            while recorder.loudSampleTimes(after: start).isEmpty && monotonicNanoseconds() - start < 5_000_000_000 {
                try await Task.sleep(for: .milliseconds(5))
            }
            try await Task.sleep(for: .milliseconds(400))
            try await waitUntilSounding(recorder)
            let t0 = monotonicNanoseconds()
            if let stop {
                _ = waitForExit(Processes.spawn(stop))
            } else {
                if let p { kill(p, SIGKILL) }
            }
            _ = waitForExit(p)
            try await Task.sleep(for: .milliseconds(400))
            let last = recorder.loudSampleTimes().last ?? t0
            f.stop.append(last > t0 ? ms(last - t0) : 0)
        }
        return f
    }

    // MARK: Helpers

    /// Returns once the monitor has had a loud sample in the last 15 ms (or after a second):
    /// a stop pressed in a pause between words would find no sound left to stop, and measure 0.
    func waitUntilSounding(_ recorder: PulseAudioRecorder) async throws {
        let giveUp = monotonicNanoseconds() + 1_000_000_000
        while monotonicNanoseconds() < giveUp {
            if !recorder.loudSampleTimes(after: monotonicNanoseconds() - 15_000_000).isEmpty { return }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    func ms(_ ns: UInt64) -> Double { Double(ns) / 1e6 }

    /// The longest run of silence (ms) between loud samples, near `center` (within 1.5 s) or anywhere.
    func longestSilence(_ loud: [UInt64], near center: Double?) -> Double {
        var best = 0.0
        for (a, b) in zip(loud, loud.dropFirst()) {
            if let center, abs(Double(a) - center) > 1.5e9 { continue }
            best = max(best, (Double(b) - Double(a)) / 1e6)
        }
        return best
    }

    /// The longest silence (ms) within 1.5 s of `boundary` in the synthesized audio.
    func silence(in pcm: [Int16], around boundary: Int) -> Double {
        let lo = max(0, boundary - 33075), hi = min(pcm.count, boundary + 33075)
        var best = 0, run = 0
        for i in lo..<hi {
            if pcm[i].magnitude >= 300 { best = max(best, run); run = 0 } else { run += 1 }
        }
        return Double(best) * 1000 / 22050
    }

    func cell(_ values: [Double]) -> String {
        guard !values.isEmpty else { return "n/a".padding(16, left: true) }
        return "\(fmt(percentile(values, 0.5))) / \(fmt(percentile(values, 0.95)))".padding(16, left: true)
    }

    func fmt(_ v: Double) -> String { String(format1: v) }
    /// Two decimals (a ratio near 1).
    func fmt2(_ v: Double) -> String {
        guard v.isFinite else { return "\(v)" }
        let hundredths = Int((v * 100).rounded())
        let rest = abs(hundredths) % 100
        return (hundredths < 0 ? "-" : "") + "\(abs(hundredths) / 100)." + (rest < 10 ? "0" : "") + "\(rest)"
    }

    func percentile(_ values: [Double], _ p: Double) -> Double {
        let s = values.sorted()
        guard !s.isEmpty else { return .nan }
        return s[min(s.count - 1, Int((Double(s.count - 1) * p).rounded()))]
    }
}

enum FileHandleErr {
    static func write(_ s: String) {
        var line = s
        line.withUTF8 { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
