internal import CParlaPiper
import ParlaCore

/// How a Piper voice's audio is made: a chunk at a time as it is heard, or a whole sentence at
/// a time, for a voice whose graph does not split at its decoder.
package enum PiperDecoding: Sendable, Equatable {
    /// Decoded a chunk at a time: the first sound comes after the first chunk.
    case streamed
    /// Decoded a whole sentence at a time, and why.
    case wholeSentences(reason: String)
    /// The model cannot be read.
    case unreadable(reason: String)
}

extension SpeechVoice {
    /// For a Piper voice, how its audio is made (reads the model, without ONNX Runtime); nil for
    /// other engines, which all stream.
    package func piperDecoding() -> PiperDecoding? {
        guard engine == SpeechVoice.piperEngine else { return nil }
        var why = [CChar](repeating: 0, count: 512)
        let found = parla_piper_model_streams(engineVoice, &why, why.count)
        let reason = String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch found {
        case 1: return .streamed
        case 0: return .wholeSentences(reason: reason)
        default: return .unreadable(reason: reason)
        }
    }
}
