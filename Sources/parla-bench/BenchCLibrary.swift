import FoundationEssentials
import Parla
import ParlaCommands
import ParlaCore
import ParlaPulseAudio
import ParlaTesting

#if canImport(Glibc)
    import Glibc
#endif

/// `parla-bench --c-helper PATH` (scripts/bench-c): call to first sound at the monitor through
/// libparla's C API (a C program, bench/c-onset.c) against the Swift API in this process, the
/// voice warm in both, the same text, the same recorder.
extension BenchLive {
    func benchCLibrary(_ recorder: PulseAudioRecorder, helper: String) async throws {
        let text = Self.english
        // The Swift API, in this process.
        let synth = SpeechSynthesizer(audioOutput: AudioOutputOptions(device: sink, server: server))
        try await synth.prepareToSpeak()
        _ = await synth.speakAndWait(Utterance(string: "Warm up."))
        var swift: [Double] = []
        for run in 0..<runs {
            try await Task.sleep(for: .milliseconds(400))
            recorder.reset()
            let t0 = monotonicNanoseconds()
            _ = await synth.speakAndWait(Utterance(string: text))
            try await Task.sleep(for: .milliseconds(150))
            if let first = recorder.loudSampleTimes(after: t0).first { swift.append(ms(first - t0)) }
            FileHandleErr.write("Swift API run \(run + 1)/\(runs): onset \(fmt(swift.last ?? .nan)) ms\n")
        }
        // The C API, in a C program: it prints the time of each call; the sound is found here.
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw ParlaError.engineFailure("no pipe for \(helper)") }
        recorder.reset()
        guard let pid = Processes.spawn([helper, String(runs), text, sink], stdout: pipeEnds[1], stderr: 2) else {
            throw ParlaError.engineFailure("could not start \(helper)")
        }
        close(pipeEnds[1])
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(pipeEnds[0], &buffer, buffer.count)
            if n <= 0 { break }
            output += buffer[0..<n]
        }
        close(pipeEnds[0])
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try await Task.sleep(for: .milliseconds(150))
        let calls = String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { UInt64($0) }
        guard calls.count == runs else { throw ParlaError.engineFailure("\(helper) spoke \(calls.count) of \(runs) times") }
        let loud = recorder.loudSampleTimes()
        var c: [Double] = []
        for (k, t0) in calls.enumerated() {
            let next = k + 1 < calls.count ? calls[k + 1] : UInt64.max
            if let first = loud.first(where: { $0 >= t0 && $0 < next }) { c.append(ms(first - t0)) }
            FileHandleErr.write("C API run \(k + 1)/\(runs): onset \(fmt(c.last ?? .nan)) ms\n")
        }
        print("")
        print("Call to first sound at the null sink's monitor, voice warm, \(runs) runs each; median / p95 in ms")
        print("Swift API (SpeechSynthesizer.speak, in process)".padding(52) + cell(swift))
        print("C API (parla_speak_text, a C program on libparla)".padding(52) + cell(c))
        let difference = percentile(c, 0.5) - percentile(swift, 0.5)
        print("C − Swift, medians: \(fmt(difference)) ms (target: within 1 ms)")
    }
}
