#ifndef PARLA_ENGINE_DRIVER_H
#define PARLA_ENGINE_DRIVER_H
// Parla's one driver of its engines, for one thread of one process: espeak-ng (libespeak-ng,
// loaded on first use by CESpeakNGLazy) and Piper's neural voices (CParlaPiper, which takes
// its phonemes from the same espeak-ng). The engine host (engine_host.c) speaks through it
// for live speech and SpeechSynthesizer's renderings; render workers call it directly
// (SynthesisEngine.swift). Nothing else calls espeak-ng to speak.
#include <stddef.h>
#include <stdint.h>
#include "parla_piper.h"

// The voice the driver selects when it starts, before its first utterance: Parla's voice for
// English, the catalog's default for "en" (voices/defaults.json), spelled as Parla sends it:
// the driver compares names exactly (a test checks they agree).
#define PARLA_ENGINE_FIRST_VOICE "en-US"
// The directory of its file under espeak-ng-data/lang (the driver loads the voice from the
// file: engine_driver.c says why).
#define PARLA_ENGINE_FIRST_VOICE_FAMILY "gmw"

/// How a run ended (also sent on the engine host's wire, parla_engine_wire.h). From
/// PARLA_RUN_FAILED on, the run failed and `error` says why: FAILED, the engine could not speak
/// the text; UNAVAILABLE, a part the engine needs is missing (espeak-ng's data, ONNX Runtime);
/// VOICE_UNUSABLE, the voice is there but cannot be loaded (a damaged Piper model).
enum {
    PARLA_RUN_OK = 0,
    PARLA_RUN_STOPPED = 1,
    PARLA_RUN_UNKNOWN_VOICE = 2,
    PARLA_RUN_FAILED = 3,
    PARLA_RUN_UNAVAILABLE = 4,
    PARLA_RUN_VOICE_UNUSABLE = 5
};
/// A run's flags: its text is SSML; it ends a sentence or the utterance (espeak-ng then adds
/// its pause); live speech's first run, whose first clause a Piper voice speaks alone.
enum { PARLA_RUN_SSML = 1, PARLA_RUN_END_PAUSE = 2, PARLA_RUN_EARLY_FIRST_CLAUSE = 4 };
/// Which punctuation is spoken (espeak-ng's "some" is the list speech-dispatcher reads).
enum { PARLA_PUNCTUATION_NONE = 0, PARLA_PUNCTUATION_ALL = 1, PARLA_PUNCTUATION_SOME = 2 };
/// Engine events: the kinds, and the bit set on a kind whose time is a guess.
enum { PARLA_ENGINE_EVENT_WORD = 1, PARLA_ENGINE_EVENT_SENTENCE = 2, PARLA_ENGINE_EVENT_ESTIMATED = 0x80 };
/// How many Piper voices a process keeps loaded (the oldest goes first).
enum { PARLA_ENGINE_PIPER_SLOTS = 4 };

/// One run: a voice, its prosody and its text.
typedef struct {
    /// An espeak-ng voice name ("en-US"), or PARLA_PIPER_PREFIX and a Piper model's path.
    const char *voice;
    /// UTF-8, NUL-terminated; `text_length` bytes without the NUL.
    const char *text;
    size_t text_length;
    /// espeak-ng's units: words per minute (175 normal), pitch 0-100 (50), volume 0-200 (100).
    int rate, pitch, volume;
    /// A PARLA_PUNCTUATION_ value.
    int punctuation;
    /// PARLA_RUN_ flags.
    unsigned flags;
} parla_run;

/// What a run reports, in order: audio blocks, then the events they carry (positions are
/// 1-based Unicode scalar offsets into the run's text; samples count from the run's start).
/// `should_stop` is asked at every block. The same shape as Piper's.
typedef parla_piper_output parla_run_output;

/// Loads espeak-ng (once): its data, the "some" punctuation list, phoneme events in IPA (what
/// Piper voices map their words with). Returns its sample rate; 0 and why in `error` (with
/// what to do) if it cannot be loaded.
int parla_engine_init(char *error, size_t error_size);
/// Selects Parla's English voice now, loading the data every voice shares (3 to 14 ms), so
/// that a process forked later selects any voice in about a millisecond. 1 if it did.
int parla_engine_select_first_voice(void);
/// Reads espeak-ng's list of voices (once per call: 2.4 ms), which selecting a voice by a name
/// that is not its file's path needs; processes forked later inherit it.
void parla_engine_read_voice_list(void);
/// Calls `each` with the name of every installed espeak-ng voice ("en-US", "fr", "cmn").
/// Returns how many there were.
int parla_engine_voice_names(void (*each)(void *context, const char *name), void *context);
/// Loads `voice` (an engine voice name) ahead of its first run, where loading takes time: a
/// Piper voice's model (about half a second; kept loaded). Returns 1 if it is ready (other
/// voices need nothing); else a PARLA_RUN_ failure status (UNAVAILABLE, VOICE_UNUSABLE) and
/// why in `error`.
int parla_engine_preload(const char *voice, char *error, size_t error_size);
/// parla_engine_preload, with the voice's first run made too (parla_piper_load_warm): for a
/// process that forks its children after it (the engine host), so each starts warm.
int parla_engine_preload_warm(const char *voice, char *error, size_t error_size);
/// Speaks one run, reporting to `output`. Returns a PARLA_RUN_ status; on failure, `error`
/// says why (empty for an unknown espeak-ng voice).
int parla_engine_speak(const parla_run *run, const parla_run_output *output, char *error, size_t error_size);
/// The slot of Piper voice `voice` (an engine voice name or a model path) among those loaded,
/// or -1.
int parla_engine_piper_slot(const char *voice);
/// The slot of the Piper voice this process last spoke with, or -1 if it spoke with none.
int parla_engine_last_piper_slot(void);
/// How many Piper voices have been loaded, in this process and those it was forked from (a
/// load moves the slots of the voices loaded before it).
int parla_engine_piper_loads(void);
/// Gives the Piper voice in `slot` sessions with `threads` threads (parla_piper_rethread), in
/// a process forked after it was loaded. Returns 1 if it did.
int parla_engine_rethread_piper_slot(int slot, int threads);
#endif
