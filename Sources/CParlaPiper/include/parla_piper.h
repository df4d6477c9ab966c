#ifndef PARLA_PIPER_H
#define PARLA_PIPER_H
// Piper's neural voices (an ONNX model and its .onnx.json), spoken with ONNX Runtime, which is
// loaded on first use (piper_runtime.c). The text is turned into phonemes by espeak-ng, as
// Piper was trained, and every word's time comes from the model's own phoneme lengths.
//
// Runs where espeak-ng runs: in the engine host's child for the utterance, or in a render
// worker's child for its chunk. Nothing here is thread-safe: one thread at a time.
#include <stddef.h>
#include <stdint.h>

typedef struct parla_piper_voice parla_piper_voice;

/// The prefix of an engine voice name that names a Piper model: "piper:" then the model's path.
#define PARLA_PIPER_PREFIX "piper:"

/// Loads ONNX Runtime (once) and the voice at `model_path` (its config is MODEL.json beside
/// it). Returns NULL and writes why into `error` (with what to do) if either cannot be loaded.
parla_piper_voice *parla_piper_load(const char *model_path, char *error, size_t error_size);
/// parla_piper_load, then the voice's first run (parla_piper_warm_up), made sooner: the
/// warm-up's flow and decoder run on the second thread while the encoder's session is made,
/// on the encoder's output kept from an earlier load (checked against this load's own).
parla_piper_voice *parla_piper_load_warm(const char *model_path, char *error, size_t error_size);
/// 1 if the last parla_piper_load failed because ONNX Runtime could not be loaded (the voice
/// itself may be fine), else 0.
int parla_piper_load_wanted_runtime(void);
/// Gives a loaded voice sessions of its own with `threads` intra-op threads, made from its
/// prepared copy (cached, mapped: some 80 ms for the three parts), for a process forked after
/// the voice was loaded: ONNX Runtime's threads do not survive a fork, so a voice loaded
/// before one has one thread. The new sessions make their first run (see piper_voice.c)
/// before they replace the old ones, which they do only if all are made (else the old ones
/// stay). Not on a thread beside one that speaks with the voice. Returns 1 if it replaced them.
int parla_piper_rethread(parla_piper_voice *voice, int threads);
/// Makes the voice's first run now, which it otherwise makes before it first speaks: a
/// process that forks children to speak calls it once, and every child starts warm (a render
/// worker does not: its memory would keep that run's buffers).
void parla_piper_warm_up(parla_piper_voice *voice);
/// Frees a voice.
void parla_piper_free(parla_piper_voice *voice);
/// The voice's sample rate (Hz).
int parla_piper_sample_rate(const parla_piper_voice *voice);
/// Whether the voice's durations are the model's own (1), or estimated (0: the model has no
/// Ceil node to read them from).
int parla_piper_exact_timing(const parla_piper_voice *voice);

/// What a run reports, in order: audio blocks and events (the same kinds as espeak-ng's, with
/// 1-based Unicode scalar positions into the run's text and the sample where they start).
typedef struct {
    void *context;
    /// Returns non-zero to stop.
    int (*should_stop)(void *context);
    void (*audio)(void *context, const int16_t *samples, int count);
    /// kind: 1 word, 2 sentence; with PARLA_PIPER_ESTIMATED set when its time is a guess.
    void (*event)(void *context, int kind, int position, int length, int sample);
    /// The phonemes (IPA, UTF-8, `length` bytes, not NUL-terminated) the word at `position`
    /// was spoken with, as they were fed to the voice; after that word's event. May be NULL.
    void (*phonemes)(void *context, int position, const char *ipa, int length);
} parla_piper_output;

enum { PARLA_PIPER_ESTIMATED = 0x80 };
enum { PARLA_PIPER_OK = 0, PARLA_PIPER_STOPPED = 1, PARLA_PIPER_FAILED = 3 };

/// parla_piper_speak's options: live speech, where the first sound matters, has its first clause
/// ("Hello there," of "Hello there, how are you?") spoken as a sentence of its own: the model
/// takes about as long per second of speech for any length, so a short first piece is heard
/// sooner, and the rest is made while it plays.
enum { PARLA_PIPER_EARLY_FIRST_CLAUSE = 1 };
/// Live speech: a voice that streams decodes a short first chunk, so that it is heard sooner
/// (rendering decodes chunks of one size).
enum { PARLA_PIPER_LIVE = 2 };

/// Whether the model at `model_path` streams (1: it splits at its decoder, and is decoded a
/// chunk at a time as it is heard), is spoken a whole sentence at a time (0, with why in `why`),
/// or cannot be read (-1, with why). Reads the model, without ONNX Runtime.
int parla_piper_model_streams(const char *model_path, char *why, size_t why_size);

/// The rates parla_piper_speak takes (others are clamped).
enum { PARLA_PIPER_RATE_MIN = 80, PARLA_PIPER_RATE_MAX = 1000 };

/// Whether rates past the model's and pitch can be honoured: libsonic (libsonic.so.0, beside
/// the program or the system's) is loaded on first call. Without it, rates stop at 450 and
/// the pitch is the voice's.
int parla_piper_can_stretch(void);
/// Where libsonic was loaded from (NULL: it was not).
const char *parla_piper_stretch_path(void);
/// Whether an engine host whose program is in `program_directory` (NULL: look only in the
/// system's places) would find libsonic, without loading it for good: 1 or 0.
int parla_piper_stretch_found(const char *program_directory);

/// Speaks UTF-8 `text` (plain text, no markup). `rate` is in espeak-ng's words per minute
/// (175 = the voice's own speed, PARLA_PIPER_RATE_MIN to _MAX: the audio is rate / 175 times
/// as fast, pauses included), `pitch` espeak-ng's 0-100 (50 = the voice's; each 50 an
/// octave, as espeak-ng's base pitch), `volume` 0-200 (100 = as the model speaks), `options`
/// PARLA_PIPER_ options. The model's noise is seeded when the voice loads: a process that
/// loads it, then speaks the same text, gives the same samples. Returns a
/// PARLA_PIPER_ status; on failure, `error` says why.
int parla_piper_speak(parla_piper_voice *voice, const char *text, int rate, int pitch, int volume, int options,
                      const parla_piper_output *output, char *error, size_t error_size);

/// The espeak-ng builds that phonemize for Piper voices (parla_piper_phonemizer's `trained`).
enum { PARLA_PIPER_PHONEMIZE = 0, PARLA_PIPER_ESPEAK_1_52 = 1 };

/// Which espeak-ng phonemizes the Piper voice at `model_path` in an engine host whose program
/// is in `program_directory` (NULL: this program's), found without loading it: `trained` is
/// the one the voice was trained with (PARLA_PIPER_PHONEMIZE for Piper 1.x voices, else
/// PARLA_PIPER_ESPEAK_1_52), `used` the directory of the one that speaks ("" for the system's
/// libespeak-ng). Returns 1 if the trained one speaks, 0 if another stands in, -1 if the
/// voice's config cannot be read.
int parla_piper_phonemizer(const char *model_path, const char *program_directory, int *trained, char *used, size_t used_size);

/// Where ONNX Runtime was loaded from, or NULL if it is not loaded.
const char *parla_piper_runtime_path(void);
#endif
