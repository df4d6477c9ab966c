#ifndef PARLA_PIPER_INTERNAL_H
#define PARLA_PIPER_INTERNAL_H
#include "parla_piper.h"
#include <stddef.h>
#include <stdint.h>

// MARK: JSON (piper_json.c)

enum { PJ_NULL, PJ_BOOL, PJ_NUMBER, PJ_STRING, PJ_ARRAY, PJ_OBJECT };

typedef struct pj_value {
    int type;
    double number;           // numbers; 1/0 for booleans
    char *string;            // strings (UTF-8, NUL-terminated)
    size_t length;           // the string's length in bytes
    char *key;               // the key, for a member of an object
    struct pj_value *child;  // the first element or member
    struct pj_value *next;   // the next sibling
    size_t count;            // elements or members
} pj_value;

pj_value *pj_parse(const char *text, size_t length, char *error, size_t error_size);
void pj_free(pj_value *value);
const pj_value *pj_get(const pj_value *object, const char *key);
double pj_number(const pj_value *value, double fallback);
const char *pj_string(const pj_value *value);
/// Appends `c` to `out` at `*n` as UTF-8 (1 to 4 bytes), advancing `*n`.
void piper_put_utf8(char *out, size_t *n, uint32_t c);

// MARK: The model file (piper_model.c)

/// The output name of the model's only Ceil node (the frames each phoneme id lasts), or 0 if
/// there is none or more than one; `name` gets at most `size` - 1 bytes. -1 if the bytes are
/// not a model.
int piper_find_ceil_output(const unsigned char *model, size_t length, char *name, size_t size);
/// A copy of the model (malloc'd, its length in *out_length) whose random nodes have a fixed
/// `seed`, and with tensor `extra_output` (if not NULL) as one more graph output of floats.
/// NULL if the bytes are not a model.
unsigned char *piper_rewrite_model(const unsigned char *model, size_t length, const char *extra_output, float seed, size_t *out_length);
/// A model split at its decoder's input (see piper_model.c): the encoder takes the model's
/// inputs and gives the latent frames (named `latent`, [1, C, T]) and, if asked, the durations;
/// the decoder takes the latent (and "sid" if `decoder_takes_speaker`) and gives "output".
/// With `flow` (only when the durations are asked for), the flow is split off too: the encoder
/// gives the flow's first input, the durations and its second input if it has one (each
/// [1, Ci, T]), and the flow takes them (and "sid" if it reads it) and gives the latent.
typedef struct {
    unsigned char *encoder, *decoder, *flow;  // malloc'd serialized models; flow may be NULL
    size_t encoder_length, decoder_length, flow_length;
    char latent[512];
    int decoder_takes_speaker;
} piper_split;
/// Splits the model; its random nodes get `seed`, the encoder also outputs `durations` (if not
/// NULL). 1 on success; 0 if the graph does not split (why, in `why`): the voice is then spoken
/// whole; -1 if the bytes are not a model. With `split` NULL, only says whether it splits.
int piper_split_model(const unsigned char *model, size_t length, const char *durations, float seed, piper_split *split, char *why,
                      size_t why_size);
/// The decoder part of a split with its 1-D convolutions written in two dimensions ([1, C, 1, T]),
/// which ONNX Runtime runs faster (see piper_model.c); the same inputs and outputs. NULL if the
/// decoder is not one that can be rewritten so (it is then used as it is).
unsigned char *piper_planar_decoder(const unsigned char *model, size_t length, size_t *out_length);
/// How many frames of the latent the decoder's samples reach back (`back`) and ahead (`ahead`)
/// of their own frame, from its graph: a chunk decoded with that many frames either side gives
/// the whole sentence's samples. 1 if found; 0 if the decoder is not one this can follow.
int piper_decoder_context(const unsigned char *model, size_t length, int *back, int *ahead);
// MARK: Where things are (piper_paths.c)
/// The directory of the running program (from /proc/self/exe); 0 if it cannot be read.
int piper_program_directory(char *out, size_t size);
/// Parla's cache: $XDG_CACHE_HOME/parla, else ~/.cache/parla; 0 if neither is set.
int piper_cache_directory(char *out, size_t size);
// MARK: The espeak-ng that phonemizes (piper_espeak.c)
#include <espeak-ng/speak_lib.h>
/// A libespeak-ng that phonemizes for Piper voices: one loaded beside the system's for them (the
/// one a voice was trained with, piper_espeak.c), else the system's (initialised by the engine).
typedef struct {
    espeak_ERROR (*set_voice)(const char *name);
    void (*set_callback)(t_espeak_callback *callback);
    espeak_ERROR (*synth)(const void *text, size_t size, unsigned int position, espeak_POSITION_TYPE type, unsigned int end,
                          unsigned int flags, unsigned int *identifier, void *user_data);
    const char *(*text_to_phonemes)(const void **text, int mode, int phonemes);
    espeak_ERROR (*set_parameter)(espeak_PARAMETER parameter, int value, int relative);
    int (*get_parameter)(espeak_PARAMETER parameter, int current);
    int own;  // loaded for Piper alone: nothing else selects its voice
    struct piper_espeak_state *state;  // own: what it has selected, how its events are cut
} piper_espeak;
typedef struct piper_espeak_state {
    char selected[64];  // the voice it has selected
    /// The bytes of a phoneme's name its phoneme events carry: 8, or 4 (piper-phonemize's: its
    /// events keep a name's first 4 bytes, then whatever was in memory); 0 until probed.
    int event_bytes;
} piper_espeak_state;
/// Which espeak-ng a voice was trained with: piper-phonemize's (Piper 1.x; piper_version below
/// 1.3 or none) or 1.52 (piper1-gpl).
enum { PIPER_ESPEAK_TRAINED = 0, PIPER_ESPEAK_CURRENT = 1, PIPER_ESPEAK_KINDS = 2 };
/// The kind of a voice whose config says `piper_version` (NULL: none).
int piper_espeak_kind(const char *piper_version);
/// Where the espeak-ng of `kind` would be loaded from (`program_directory`: the engine host's,
/// NULL: this program's), without loading it: its directory in `dir`, and its kind returned
/// (the other kind's where the first is missing); -1 for $PARLA_PIPER_ESPEAK's, -2 for the
/// system's libespeak-ng (`dir` empty).
int piper_espeak_where(int kind, const char *program_directory, char *dir, size_t size);
/// The espeak-ng of `kind`, chosen (and loaded) on first use.
const piper_espeak *piper_espeak_get(int kind);
/// Learns how `e`'s phoneme events carry a name (state->event_bytes), once; its own only
/// (piper_phonemes.c).
void piper_espeak_probe(const piper_espeak *e);
/// Selects espeak-ng voice `voice` in `e` (at once if its own espeak-ng has it selected).
espeak_ERROR piper_espeak_select(const piper_espeak *e, const char *voice);
// MARK: Phonemes (piper_phonemes.c)

/// One sentence's phoneme ids, with the word each id belongs to.
typedef struct {
    int64_t *ids;
    int *word_of_id;     // index into words, or -1 (padding, punctuation, the ends)
    uint32_t *phoneme_of_id; // the phoneme (a scalar) an id is the first of, else 0
    size_t id_count, id_capacity;
    struct piper_word {
        int position;    // 1-based Unicode scalar position in the run's text
        int length;      // in scalars
        int first_id;    // the index of its first phoneme id, -1 until it has one
        int ipa_length;  // the phonemes fed to the voice for it (IPA, UTF-8; cut at a phoneme
        char ipa[96];    // when longer), stress marks included
    } *words;
    size_t word_count, word_capacity;
    int sentence_position;  // where the sentence starts (1-based scalar), 0 if unknown
    int estimated;          // words were spread over phonemes by guess, not matched
    int continues;          // the rest of a sentence whose first clause was spoken alone
    int goes_on;            // that first clause: the rest of its sentence follows
    int phonemes;           // phonemes espeak-ng gave for it (stress marks and spaces too)
    int skipped;            // of which the voice has no id for: left out
    uint32_t first_skipped; // the first of those, for the error when most are missing
} piper_sentence;

typedef struct piper_id_map piper_id_map;
/// The phoneme id map of a voice's config ("phoneme_id_map": {"a": [14], ...}).
piper_id_map *piper_id_map_create(const pj_value *map, char *error, size_t error_size);
void piper_id_map_free(piper_id_map *map);
/// The ids of a string of phonemes as a sentence's are laid out (the start, each phoneme's ids
/// and a pad, the end), skipping phonemes the voice has no id for; at most `capacity`.
size_t piper_id_map_ids(const piper_id_map *map, const char *phonemes, int64_t *out, size_t capacity);

/// Turns `text` into sentences of phoneme ids with espeak-ng voice `espeak_voice`, calling
/// `sentence` for each as soon as it is complete (with `early_first_clause`, the first clause
/// that ends in a comma, colon or semicolon is a sentence of its own). Returns 0, or the non-zero value `sentence`
/// returned (which stops it), or -1 with `error` set.
int piper_phonemize(const char *text, int espeak_kind, const char *espeak_voice, const piper_id_map *map, int early_first_clause,
                    int (*sentence)(void *context, piper_sentence *s), void *context, char *error, size_t error_size);

// MARK: ONNX Runtime (piper_runtime.c)

typedef struct piper_session piper_session;
/// What a session computes, from its inputs and outputs: the whole voice (phoneme ids to audio
/// and durations), its encoder (ids to the latent and durations), its decoder (latent to audio)
/// or its flow (the flow's inputs to the latent: an encoder whose flow is apart gives those).
enum { PIPER_WHOLE = 1, PIPER_ENCODER = 2, PIPER_DECODER = 3, PIPER_FLOW = 4 };
/// Loads the runtime on first use; NULL and `error` (how to install it) if it cannot be.
int piper_runtime_load(char *error, size_t error_size);
/// A session for a model held in memory, with `threads` intra-op threads. Its second output, if
/// any, holds the phoneme durations. With `ort_format`, the bytes are ONNX Runtime's own format,
/// used in place: they must outlive the session. With `save_to`, the optimized model is also written
/// there in that format (for a next load).
piper_session *piper_session_create(const void *model, size_t length, int threads, int ort_format, const char *save_to,
                                    char *error, size_t error_size);
void piper_session_free(piper_session *session);
/// PIPER_WHOLE, PIPER_ENCODER or PIPER_DECODER.
int piper_session_kind(const piper_session *session);
/// Whether the session gives the phoneme durations.
int piper_session_has_durations(const piper_session *session);
/// The name of the session's first input ("input": phoneme ids) and of its first output.
const char *piper_session_input(const piper_session *session);
const char *piper_session_output(const piper_session *session);
/// The loaded ONNX Runtime's version ("1.32.0").
const char *piper_runtime_version(void);
/// Whether the model takes a speaker id input ("sid").
int piper_session_has_speaker(const piper_session *session);
/// Runs a whole voice or an encoder on `count` ids. On success *audio (malloc'd) holds *samples
/// floats: the audio, or the encoder's latent ([*channels][frames], frames = *samples /
/// *channels); and, if the session has durations, *durations (malloc'd) one frame count per id;
/// and, for an encoder that gives the flow's second input, *side (malloc'd, [*side_channels]
/// [frames]). 0 on success.
int piper_session_run(piper_session *session, const int64_t *ids, size_t count, const float scales[3], int64_t speaker,
                      float **audio, size_t *samples, int64_t *channels, float **durations, float **side, int64_t *side_channels,
                      char *error, size_t error_size);
/// Runs a decoder or a flow on `frames` frames of its input ([channels][frames]; for a flow with
/// two inputs, `side` [side_channels][frames] too, else NULL). 0 on success, with *out
/// (malloc'd) holding *samples floats: the audio, or the flow's latent ([*out_channels][frames]).
int piper_session_frames(piper_session *session, const float *latent, int64_t channels, const float *side, int64_t side_channels,
                         int64_t frames, int64_t speaker, float **out, size_t *samples, int64_t *out_channels, char *error,
                         size_t error_size);

// MARK: Time-stretching (piper_stretch.c)

typedef struct piper_stretch piper_stretch;
/// Whether libsonic could be loaded (on first call).
int piper_stretch_available(void);
/// Where it was loaded from, NULL if it was not.
const char *piper_stretch_path(void);
/// A stream that plays `sample_rate` Hz mono audio `speed` times as fast, its pitch times
/// `pitch`; NULL if libsonic is missing or out of memory.
piper_stretch *piper_stretch_new(int sample_rate, float speed, float pitch);
float piper_stretch_speed(const piper_stretch *stretch);
/// Feeds samples in (0: out of memory).
int piper_stretch_write(piper_stretch *stretch, const int16_t *samples, int count);
/// Takes up to `most` samples of what is ready out.
int piper_stretch_read(piper_stretch *stretch, int16_t *out, int most);
/// Makes all that was fed in ready (0: out of memory).
int piper_stretch_flush(piper_stretch *stretch);
void piper_stretch_free(piper_stretch *stretch);
#endif
