#ifndef PARLA_ENGINE_WIRE_H
#define PARLA_ENGINE_WIRE_H
// The messages between Parla (EngineHost.swift) and its engine host (engine_host.c), both of
// which read their numbers from here: a type byte, a little-endian 32-bit payload length,
// then the payload. Integers are little-endian.

/// The version of these messages: the host says it in READY, and Parla refuses another.
#define PARLA_ENGINE_PROTOCOL 4
/// The largest payload either side accepts (64 MiB).
#define PARLA_ENGINE_MAX_MESSAGE (64u << 20)

enum {
    // Parla → host
    /// Speak one run: seq u32, flags u32 (PARLA_RUN_), rate, pitch, volume, punctuation (i32
    /// each), the voice name (u16 length + UTF-8), then the text (UTF-8, the rest).
    PARLA_MSG_SPEAK = 'S',
    /// Stop run seq (u32) or any earlier one.
    PARLA_MSG_STOP = 'X',
    /// List the installed voices.
    PARLA_MSG_LIST_VOICES = 'V',
    /// Begin utterance id (u32): the host forks a child from its loaded engine to speak it.
    PARLA_MSG_BEGIN = 'B',
    /// The utterance is over: its child exits.
    PARLA_MSG_FINISH = 'F',
    /// Load the Piper voice whose model is at this path (UTF-8, the whole payload) in the host
    /// itself, so that the children it forks for utterances have it loaded.
    PARLA_MSG_PRELOAD = 'P',
    // host → Parla
    /// The engine is loaded: protocol u32, sample rate u32 (0, then why in UTF-8, if not).
    PARLA_MSG_READY = 'R',
    /// A voice asked for with PRELOAD: loaded (u32 1) or not (a PARLA_RUN_ failure status,
    /// then why, UTF-8).
    PARLA_MSG_PRELOADED = 'p',
    /// Audio: native 16-bit samples.
    PARLA_MSG_AUDIO = 'A',
    /// An engine event: kind u8 (PARLA_ENGINE_EVENT_, with PARLA_ENGINE_EVENT_ESTIMATED), position, length
    /// and sample (i32 each).
    PARLA_MSG_EVENT = 'E',
    /// The phonemes a word was spoken with: its position (i32, as its event's), then IPA
    /// (UTF-8, the rest). After the word's event.
    PARLA_MSG_PHONEMES = 'I',
    /// A run ended: seq u32, status i32 (PARLA_RUN_ status), and for a failure, why (UTF-8,
    /// the rest, possibly empty).
    PARLA_MSG_DONE = 'D',
    /// The installed voices: names, each followed by a newline.
    PARLA_MSG_VOICE_LIST = 'L',
    /// The child speaking utterance id (u32) died: the signal (u32; 0 if it exited in error).
    PARLA_MSG_CRASHED = 'C',
};
#endif
