import ParlaCore
// Canonical PCM WAV files: the header, and a writer that streams samples into one.

/// The 44-byte header of a canonical PCM WAV file (RIFF, `fmt ` chunk, `data` chunk).
package enum WAVHeader {
    /// The header for `dataBytes` bytes of `bitsPerSample`-bit PCM, every field little-endian.
    package static func bytes(sampleRate: Int, channels: Int = 1, bitsPerSample: Int = 16, dataBytes: Int) -> [UInt8] {
        var b: [UInt8] = []
        b.reserveCapacity(44)
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { b.append(contentsOf: $0) } }
        func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { b.append(contentsOf: $0) } }
        let blockAlign = channels * bitsPerSample / 8
        b.append(contentsOf: Array("RIFF".utf8))
        u32(UInt32(clamping: 36 + dataBytes))
        b.append(contentsOf: Array("WAVE".utf8))
        b.append(contentsOf: Array("fmt ".utf8))
        u32(16)  // fmt chunk size
        u16(1)  // PCM
        u16(UInt16(channels))
        u32(UInt32(sampleRate))
        u32(UInt32(sampleRate * blockAlign))  // byte rate
        u16(UInt16(blockAlign))
        u16(UInt16(bitsPerSample))
        b.append(contentsOf: Array("data".utf8))
        u32(UInt32(clamping: dataBytes))
        return b
    }
}

/// Streams 16-bit mono PCM into a WAV file, fixing the RIFF sizes when it is finished.
package final class WAVFileWriter {
    private let file: AtomicFile
    /// Samples per second written into the header.
    package let sampleRate: Int
    /// Samples written so far.
    package private(set) var sampleCount = 0

    /// Starts a WAV file destined for `path` (written under a temporary name until ``finish()``;
    /// `durable`: flushed to disk before it takes its name, as Parla's atomic files are).
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``.
    package convenience init(path: String, sampleRate: Int, durable: Bool = true) throws(ParlaError) {
        try self.init(file: AtomicFile(path: path, durable: durable), sampleRate: sampleRate)
    }

    /// Starts a WAV file in `file`, made already (so that a path that cannot be written is
    /// reported before the sample rate is known).
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``.
    package init(file: AtomicFile, sampleRate: Int) throws(ParlaError) {
        self.file = file
        self.sampleRate = sampleRate
        try file.write(WAVHeader.bytes(sampleRate: sampleRate, dataBytes: 0))
    }

    /// Appends samples.
    /// - Throws: ``/ParlaCore/ParlaError/unwritableOutput(path:reason:)``, also as soon as the audio
    ///   would not fit in a WAV file (4 GiB, about 27 hours at 22050 Hz).
    package func append(_ samples: [Int16]) throws(ParlaError) {
        guard (sampleCount + samples.count) * 2 <= Int(UInt32.max) - 36 else {
            throw .unwritableOutput(
                path: file.path,
                reason: "the audio is longer than a WAV file can hold (4 GiB, about 27 hours at \(sampleRate) Hz): split the text")
        }
        try file.write(samples: samples)
        sampleCount += samples.count
    }

    /// Writes the final sizes into the header and renames the file into place.
    package func finish() throws(ParlaError) {
        guard sampleCount * 2 <= Int(UInt32.max) - 36 else {
            file.discard()
            throw .unwritableOutput(path: file.path, reason: "the audio is longer than a WAV file can hold (4 GiB)")
        }
        try file.overwrite(WAVHeader.bytes(sampleRate: sampleRate, dataBytes: sampleCount * 2), at: 0)
        try file.commit()
    }

    /// Abandons the file; nothing appears under the destination name.
    package func discard() { file.discard() }
}
