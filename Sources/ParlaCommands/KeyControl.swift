import Dispatch
import Parla
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// Keys that steer live speech from the terminal while `parla say --highlight` plays, the way
/// media players do: `+`/`-` faster and slower, `]`/`[` louder and quieter, space pauses and
/// resumes. The terminal is put in non-canonical, no-echo mode (Ctrl-C still interrupts) and
/// restored by ``finish()``.
///
/// Sendable because every stored property is a `let`, and each is Sendable but `source`:
/// a dispatch source may be cancelled from any thread, which is all ``finish()`` does with it,
/// but swift-corelibs-libdispatch does not mark its protocols Sendable.
final class KeyControl: @unchecked Sendable {
    /// Each press changes the rate by this factor, and the volume by 3 dB.
    static let rateStep = 1.1
    static let volumeStep = 0.7079457843841379  // −3 dB

    private let fd: Int32
    private let ownsFD: Bool
    /// The terminal's settings before, restored by ``finish()``.
    private let saved: termios
    private let source: any DispatchSourceRead
    private let synth: SpeechSynthesizer
    /// What the keys changed, for the summary line.
    private let changed = Mutex(false)

    /// Starts reading keys from the terminal (standard input if it is one, else `/dev/tty`); nil
    /// when there is no terminal to read.
    init?(synth: SpeechSynthesizer) {
        var fd: Int32 = 0
        var owns = false
        if isatty(0) == 0 {
            fd = open("/dev/tty", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            owns = true
        }
        var t = termios()
        // Only in the foreground: a background job that sets the terminal is stopped (SIGTTOU).
        guard tcgetpgrp(fd) == getpgrp(), tcgetattr(fd, &t) == 0 else {
            if owns { close(fd) }
            return nil
        }
        saved = t
        t.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutableBytes(of: &t.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        guard tcsetattr(fd, TCSANOW, &t) == 0 else {
            if owns { close(fd) }
            return nil
        }
        self.fd = fd
        ownsFD = owns
        self.synth = synth
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .global())
        source.setEventHandler { [weak self] in self?.readKeys() }
        source.resume()
    }

    private func readKeys() {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else {
            if n == 0 { source.cancel() }  // the terminal went away
            return
        }
        for byte in buffer[..<n] { press(byte) }
    }

    private func press(_ key: UInt8) {
        let now = synth.liveProsody
        switch key {
        case UInt8(ascii: "+"), UInt8(ascii: "="):
            try? synth.setRate(min(now.rate * Self.rateStep, LiveProsody.rateRange.upperBound))
        case UInt8(ascii: "-"), UInt8(ascii: "_"):
            try? synth.setRate(max(now.rate / Self.rateStep, LiveProsody.rateRange.lowerBound))
        case UInt8(ascii: "]"):
            try? synth.setVolume(min(now.volume / Self.volumeStep, LiveProsody.volumeRange.upperBound))
        case UInt8(ascii: "["):
            try? synth.setVolume(now.volume * Self.volumeStep)
        case UInt8(ascii: " "):
            if synth.isPaused { synth.continue() } else { synth.pause(at: .immediate) }
            return
        default:
            return
        }
        changed.withLock { $0 = true }
    }

    /// Stops reading keys and restores the terminal; returns a line describing the rate and
    /// volume the keys left, nil if none was pressed.
    func finish() -> String? {
        source.cancel()
        var restored = saved
        tcsetattr(fd, TCSANOW, &restored)
        if ownsFD { close(fd) }
        guard changed.withLock({ $0 }) else { return nil }
        let p = synth.liveProsody
        let dB = p.volume > 0 ? 20 * log10(p.volume) : -.infinity
        return "Rate ×\(String(format2: p.rate)), volume \(String(format1: dB)) dB"
    }
}

extension String {
    /// `value` with two decimals.
    package init(format2 value: Double) {
        guard value.isFinite else {
            self = String(format1: value)
            return
        }
        let hundredths = Int((value * 100).rounded())
        let frac = abs(hundredths) % 100
        self = (hundredths < 0 ? "-" : "") + "\(abs(hundredths) / 100)." + (frac < 10 ? "0" : "") + "\(frac)"
    }
}
