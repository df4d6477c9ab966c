/*
 * parla.h: Parla from C (libparla, `pkg-config --cflags --libs parla`).
 *
 * Speaks text in the right language with espeak-ng's and Piper's voices, through PulseAudio
 * or PipeWire, and says which word is being heard now:
 *
 *     parla_synthesizer *s = parla_synthesizer_new(NULL);
 *     parla_set_event_callback(s, on_event, user_data);
 *     uint64_t id;
 *     parla_speak_text(s, "Hello world.", &id);
 *     parla_wait(s, id, -1, NULL);
 *     parla_synthesizer_free(s);
 *
 * Conventions:
 * - Every function that can fail returns a parla_status (PARLA_OK is 0). The reason, in words
 *   a user can act on, is then parla_last_error()'s, on the calling thread.
 * - Strings in are NUL-terminated UTF-8; invalid UTF-8 is refused (PARLA_ERROR_INVALID_UTF8).
 *   Strings out stay valid as long as the object they came from (an event's strings: until
 *   the callback returns).
 * - Ranges are half-open: [start, end). Byte offsets index the caller's own string; scalar
 *   offsets count Unicode scalar values (code points). Both lie on grapheme-cluster
 *   boundaries.
 * - No call aborts the process, whatever it is passed: NULL, a freed handle (every handle is
 *   a number never given out twice, so a freed one is recognised: PARLA_ERROR_INVALID_HANDLE),
 *   values out of range.
 * - Handles may be used from any thread.
 * - Times and durations are nanoseconds in an int64_t (names end in _ns); -1 where there is none.
 * - Structs that can grow begin with `size`. Set it to sizeof the struct before passing one to
 *   be filled (parla_timeline_word, parla_voice_list_get, parla_segment_list_get; a zero
 *   size is refused with PARLA_ERROR_INVALID_ARGUMENT): the library fills only the fields
 *   that fit, so a program built with this header keeps working with a later libparla whose
 *   structs have more fields at their end. A struct the library passes to a callback
 *   (parla_event, parla_chunk) holds its own size there: fields past it are absent.
 *
 * Symbols all begin with parla_; the soname is libparla.so.0.
 */
#ifndef PARLA_H
#define PARLA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MARK: Versions and errors */

/* The version of this header; parla_version() is the library's. */
#define PARLA_VERSION_MAJOR 0
#define PARLA_VERSION_MINOR 2
#define PARLA_VERSION_PATCH 0
#define PARLA_VERSION_STRING "0.2.0"

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *parla_version(void);

typedef enum {
    PARLA_OK = 0,
    PARLA_ERROR_INVALID_ARGUMENT = 1, /* NULL where a value is needed, or an unknown enum value */
    PARLA_ERROR_INVALID_HANDLE = 2,   /* NULL, freed, or of another kind */
    PARLA_ERROR_INVALID_UTF8 = 3,
    PARLA_ERROR_OUT_OF_RANGE = 4,     /* a rate, pitch, volume or timeout outside its range */
    PARLA_ERROR_UNKNOWN_VOICE = 5,
    PARLA_ERROR_UNKNOWN_LANGUAGE = 6,
    PARLA_ERROR_SSML = 7,             /* malformed SSML */
    PARLA_ERROR_AUDIO = 8,            /* no sound server, or it went away */
    PARLA_ERROR_ENGINE = 9,           /* espeak-ng or ONNX Runtime missing or failed */
    PARLA_ERROR_IO = 10,              /* a file could not be read or written */
    PARLA_ERROR_TIMEOUT = 11,         /* parla_wait: the utterance had not ended in time */
    PARLA_ERROR_FAILED = 12           /* anything else; parla_last_error() says what */
} parla_status;

/* The message of the last failed call on this thread ("" if none). Valid until the next
 * call into libparla on this thread. */
const char *parla_last_error(void);
/* The status of the last call on this thread that sets one (PARLA_OK after a success): what a
 * _new that returned NULL failed with. */
parla_status parla_last_status(void);
/* A status's name in a few words ("unknown voice"); never NULL, static. */
const char *parla_status_string(parla_status status);

/* MARK: Utterances */

typedef struct parla_utterance parla_utterance;

/* Plain text. NULL on failure (see parla_last_error()). */
parla_utterance *parla_utterance_new(const char *text);
/* SSML (<speak>, <s>, <p>, <break>, <prosody>, <mark>, <say-as>, <voice>, xml:lang, ...).
 * NULL on failure: malformed SSML gives PARLA_ERROR_SSML's message with the line and column. */
parla_utterance *parla_utterance_new_ssml(const char *ssml);
void parla_utterance_free(parla_utterance *utterance);

/* A BCP 47 tag ("en", "el", "ar-EG"); NULL: detected from the text (the default). */
parla_status parla_utterance_set_language(parla_utterance *utterance, const char *language);
/* A voice identifier from parla_voices() ("en-us", "piper.en_US-joe-medium"); NULL: the best
 * installed voice for each language. */
parla_status parla_utterance_set_voice(parla_utterance *utterance, const char *voice);
/* The voice to prefer for `language` (a BCP 47 tag; "en" covers en-GB too) where the
 * utterance's voice does not speak it: for example a Piper voice for English in text that
 * mixes languages. NULL voice: remove the preference. */
parla_status parla_utterance_prefer_voice(parla_utterance *utterance, const char *language, const char *voice);
/* Rate: a multiplier of the voice's normal speed, 0.25-6 (1 = normal; the words per minute it gives are kept within 80-1000). */
parla_status parla_utterance_set_rate(parla_utterance *utterance, double rate);
/* Pitch: a multiplier, 0-2 (1 = normal). */
parla_status parla_utterance_set_pitch(parla_utterance *utterance, double pitch);
/* Volume: a multiple of the voice's normal loudness, 0-2 (1 = normal; above 1 is louder,
 * made by the engine without clipping). The live parla_set_volume multiplies it again. */
parla_status parla_utterance_set_volume(parla_utterance *utterance, double volume);
/* After an interruption by an announcement, speak again from the sentence that was cut off
 * (0: no, the default). */
parla_status parla_utterance_set_resumes_after_interruption(parla_utterance *utterance, int resumes);

typedef enum {
    PARLA_PRIORITY_NONE = 0,    /* not an announcement: queued speech (the default) */
    PARLA_PRIORITY_LOW = 1,     /* waits until all other speech has finished */
    PARLA_PRIORITY_DEFAULT = 2, /* interrupts other speech, and can be interrupted */
    PARLA_PRIORITY_HIGH = 3     /* interrupts other speech, and is not interrupted once started */
} parla_priority;

/* Makes the utterance an announcement (like an accessibility announcement): with `queue`
 * non-zero it waits its turn instead of interrupting. */
parla_status parla_utterance_set_announcement(parla_utterance *utterance, parla_priority priority, int queue);

/* MARK: Events */

typedef enum {
    PARLA_EVENT_STARTED = 1,
    PARLA_EVENT_WORD = 2,        /* a word is about to be heard: its range */
    PARLA_EVENT_SENTENCE = 3,    /* a sentence is about to be heard: its range */
    PARLA_EVENT_MARK = 4,        /* an SSML <mark> is reached: mark */
    PARLA_EVENT_RESUMED = 5,     /* speaking again after an interruption, from the range */
    PARLA_EVENT_PAUSED = 6,
    PARLA_EVENT_CONTINUED = 7,
    PARLA_EVENT_FINISHED = 8,    /* terminal: spoken to the end */
    PARLA_EVENT_INTERRUPTED = 9, /* terminal: cut off while speaking (stop, an announcement) */
    PARLA_EVENT_DROPPED = 10,    /* terminal: removed from the queue before it started */
    PARLA_EVENT_FAILED = 11      /* terminal: error says why */
} parla_event_kind;

typedef struct {
    size_t size;             /* sizeof the struct as this library knows it */
    parla_event_kind kind;
    uint64_t utterance;      /* the id parla_speak gave */
    int64_t time_ns;         /* when it is heard, on CLOCK_MONOTONIC */
    /* For WORD, SENTENCE and RESUMED (otherwise -1): the range in the caller's string ... */
    int64_t byte_start, byte_end;     /* ... in UTF-8 bytes */
    int64_t scalar_start, scalar_end; /* ... in Unicode scalar values */
    int64_t audio_ns;        /* where its sound starts in the utterance's audio (-1: none) */
    const char *text;        /* the word or sentence as spoken, else NULL */
    const char *mark;        /* MARK: the mark's name, else NULL */
    const char *error;       /* FAILED: why, else NULL */
    int announcement_heard;  /* terminal events of announcements: 1 heard in full, 0 not; else -1 */
} parla_event;

/* Called on one thread of Parla's own, in order, for every utterance of the synthesizer. It
 * may call any parla_ function except parla_wait, parla_write_wav and
 * parla_synthesizer_free on the same synthesizer (they wait for events this thread delivers).
 * Return quickly: the next event waits for it. */
typedef void (*parla_event_callback)(const parla_event *event, void *user_data);

/* MARK: The synthesizer */

typedef struct parla_synthesizer parla_synthesizer;

/* A synthesizer playing on `device` (a PulseAudio sink name; NULL: the default sink). Its
 * voices and the engine start on first use (see parla_prepare). NULL on failure. */
parla_synthesizer *parla_synthesizer_new(const char *device);
/* Stops its speech at once, and waits for its callback to return. */
void parla_synthesizer_free(parla_synthesizer *synthesizer);

/* Events of every utterance reach `callback` (NULL: none), with `user_data`. */
parla_status parla_set_event_callback(parla_synthesizer *synthesizer, parla_event_callback callback, void *user_data);

/* Starts the engine, connects to the sound server and loads the default voices now, so that
 * the first utterance is heard sooner. Optional. */
parla_status parla_prepare(parla_synthesizer *synthesizer);

/* Queues the utterance (or, if it is an announcement, schedules it by its priority) and
 * returns at once with its id in *id (may be NULL). An utterance that cannot be spoken still
 * gets an id, and ends with PARLA_EVENT_FAILED. The utterance may be freed or reused after. */
parla_status parla_speak(parla_synthesizer *synthesizer, const parla_utterance *utterance, uint64_t *id);
/* parla_speak of plain text. */
parla_status parla_speak_text(parla_synthesizer *synthesizer, const char *text, uint64_t *id);
/* An announcement of plain text (see parla_utterance_set_announcement). */
parla_status parla_announce(parla_synthesizer *synthesizer, const char *text, parla_priority priority, int queue, uint64_t *id);

/* Waits until utterance `id` ends, at most `timeout_ns` nanoseconds (-1: no limit). *kind
 * (may be NULL) gets its terminal event: FINISHED, INTERRUPTED, DROPPED or FAILED.
 * PARLA_ERROR_TIMEOUT if it had not ended; PARLA_ERROR_INVALID_ARGUMENT for an id this
 * synthesizer never gave. */
parla_status parla_wait(parla_synthesizer *synthesizer, uint64_t id, int64_t timeout_ns, parla_event_kind *kind);

typedef enum {
    PARLA_BOUNDARY_IMMEDIATE = 0, /* at once, mid-word if need be */
    PARLA_BOUNDARY_WORD = 1       /* at the end of the word being heard */
} parla_boundary;

/* Stops what is speaking at `boundary` (it ends INTERRUPTED) and drops everything queued
 * (each ends DROPPED). *stopped (may be NULL): 0 if nothing was speaking or queued. */
parla_status parla_stop(parla_synthesizer *synthesizer, parla_boundary boundary, int *stopped);
/* Pauses at `boundary`; queued speech waits. */
parla_status parla_pause(parla_synthesizer *synthesizer, parla_boundary boundary);
/* Continues paused speech where it stopped. */
parla_status parla_continue(parla_synthesizer *synthesizer);
/* Live rate, pitch and volume, multiples of each utterance's own (rate 0.25-6, pitch 0-2,
 * volume 0-2; a volume above 1 passes a soft limiter, so nothing clips): what is speaking
 * changes at once (rate and pitch from the next word, volume from the next samples sent),
 * and later utterances follow. */
parla_status parla_set_rate(parla_synthesizer *synthesizer, double rate);
parla_status parla_set_pitch(parla_synthesizer *synthesizer, double pitch);
parla_status parla_set_volume(parla_synthesizer *synthesizer, double volume);
/* 1 while something is speaking (or paused), else 0; -1 for a bad handle. */
int parla_is_speaking(parla_synthesizer *synthesizer);

/* MARK: Files and timelines */

typedef struct parla_timeline parla_timeline;

typedef struct {
    size_t size;                      /* set to sizeof(parla_timed_range) before the call */
    int64_t byte_start, byte_end;     /* in the caller's string, UTF-8 bytes */
    int64_t scalar_start, scalar_end; /* in Unicode scalar values */
    int64_t start_ns, end_ns;         /* in the audio */
    const char *text;                 /* as spoken */
    const char *language;             /* of the part it is in ("en") */
    const char *voice;                /* the voice that speaks it ("espeak-ng.en-us") */
    int estimated;                    /* 1 if its time was interpolated */
    const char *phonemes;             /* a word's phonemes (IPA) as the voice was given them
                                         ("həlˈoʊ"), NULL for a sentence or where the engine
                                         did not say (added in 0.2: check size) */
} parla_timed_range;

/* Renders the utterance to a WAV file at `path` (16-bit mono; written whole or not at all)
 * and, if `timeline` is not NULL, gives its words and sentences with times. */
parla_status parla_write_wav(parla_synthesizer *synthesizer, const parla_utterance *utterance, const char *path,
                             parla_timeline **timeline);
size_t parla_timeline_word_count(const parla_timeline *timeline);
size_t parla_timeline_sentence_count(const parla_timeline *timeline);
/* Copies word (or sentence) `index` into *out (out->size set); PARLA_ERROR_OUT_OF_RANGE past
 * the end. */
parla_status parla_timeline_word(const parla_timeline *timeline, size_t index, parla_timed_range *out);
parla_status parla_timeline_sentence(const parla_timeline *timeline, size_t index, parla_timed_range *out);
/* The audio's length in nanoseconds, and its sample rate. */
int64_t parla_timeline_duration_ns(const parla_timeline *timeline);
int parla_timeline_sample_rate(const parla_timeline *timeline);
void parla_timeline_free(parla_timeline *timeline);

/* MARK: Streaming */

typedef enum {
    PARLA_CHUNK_AUDIO = 1,   /* samples, in order */
    PARLA_CHUNK_WORD = 2,    /* a word and the audio that speaks it */
    PARLA_CHUNK_SENTENCE = 3, /* a sentence and its audio */
    PARLA_CHUNK_MARK = 4      /* an SSML <mark>: reached at `sample`, where the first word that
                                 does not end before it starts (after the last word: where the
                                 audio ends) */
} parla_chunk_kind;

typedef struct {
    size_t size;             /* sizeof the struct as this library knows it */
    parla_chunk_kind kind;
    const int16_t *samples;  /* AUDIO: 16-bit mono samples, valid during the call */
    size_t sample_count;     /* AUDIO */
    int64_t sample;          /* AUDIO: the index of its first sample in the utterance's audio;
                                WORD, SENTENCE: where its audio starts; MARK: where it is reached */
    int64_t end_sample;      /* WORD, SENTENCE: just after its audio; AUDIO: sample + sample_count;
                                MARK: sample */
    int sample_rate;
    int64_t byte_start, byte_end;     /* WORD, SENTENCE: in the caller's string; MARK: where it
                                         sits in the markup (start == end); else -1 */
    int64_t scalar_start, scalar_end; /* WORD, SENTENCE, MARK; else -1 */
    const char *text;                 /* WORD: as spoken; MARK: the mark's name; else NULL */
} parla_chunk;

/* Returns non-zero to stop synthesis. */
typedef int (*parla_chunk_callback)(const parla_chunk *chunk, void *user_data);

/* Synthesizes the utterance without playing it, calling `callback` on the calling thread
 * with its audio as it is made and each word, sentence and mark once its timing is known (a word
 * may come shortly after the audio it describes). Returns when synthesis ends, or soon after
 * the callback returns non-zero (then PARLA_OK too). */
parla_status parla_synthesize(parla_synthesizer *synthesizer, const parla_utterance *utterance, parla_chunk_callback callback,
                              void *user_data);

/* parla_synthesize for a caller that plays the audio as it comes (a speech provider streaming
 * to its client): a Piper voice's first sound comes sooner, as with parla_speak (a long first
 * sentence is spoken as two clauses, the first from a short first chunk), so its audio is not
 * the bytes parla_write_wav writes. espeak-ng voices give the same audio either way. */
parla_status parla_synthesize_for_playback(parla_synthesizer *synthesizer, const parla_utterance *utterance,
                                           parla_chunk_callback callback, void *user_data);

/* MARK: Voices */

typedef struct parla_voice_list parla_voice_list;

typedef struct {
    size_t size;            /* set to sizeof(parla_voice) before the call */
    const char *identifier; /* what parla_utterance_set_voice takes */
    const char *name;
    const char *engine;     /* "espeak-ng" or "piper" */
    const char *languages;  /* BCP 47 tags, comma-separated, the main one first */
    const char *quality;    /* Piper's "low", "medium", "high"; else NULL */
    int sample_rate;        /* its audio's rate (espeak-ng: 22050); 0 if not known */
} parla_voice;

/* Every installed voice (espeak-ng's, and Piper's found in the voice directories). */
parla_status parla_voices(parla_voice_list **list);
size_t parla_voice_list_count(const parla_voice_list *list);
parla_status parla_voice_list_get(const parla_voice_list *list, size_t index, parla_voice *out);
void parla_voice_list_free(parla_voice_list *list);

/* MARK: Language detection */

typedef struct parla_segment_list parla_segment_list;

typedef struct {
    size_t size;          /* set to sizeof(parla_segment) before the call */
    int64_t byte_start, byte_end;
    int64_t scalar_start, scalar_end;
    const char *language; /* BCP 47, or NULL where no language could be told (digits, symbols) */
    double confidence;    /* 0-1 */
} parla_segment;

/* Splits `text` into stretches by language, as parla_speak does. */
parla_status parla_detect(const char *text, parla_segment_list **list);
size_t parla_segment_list_count(const parla_segment_list *list);
parla_status parla_segment_list_get(const parla_segment_list *list, size_t index, parla_segment *out);
void parla_segment_list_free(parla_segment_list *list);

/* MARK: Installing Piper voices */

/* Called as a voice's files arrive: the file's name, the bytes it has so far, and its size. */
typedef void (*parla_install_progress)(const char *file, int64_t bytes, int64_t total, void *user_data);

/* Installs Piper voice `name` ("en_US-joe-medium") from Piper's catalog into the user's voice
 * directory ($XDG_DATA_HOME/parla/voices, ~/.local/share/parla/voices), as `parla voices
 * install` does: each file is checked against the catalog's size and md5, a broken transfer
 * resumes where it stopped when called again, and the voice is listed only once whole.
 * `catalog`: a URL or directory with the catalog's layout (voices.json at its root); NULL:
 * $PARLA_VOICE_CATALOG, else Hugging Face's rhasspy/piper-voices. `progress` may be NULL.
 * Blocks until done; needs curl. PARLA_ERROR_UNKNOWN_VOICE: the catalog has no such voice (the
 * message names the nearest); PARLA_ERROR_IO: the catalog cannot be reached or read, a file
 * arrived damaged (it is deleted), the disk is full, another install of it is running. */
parla_status parla_install_voice(const char *name, const char *catalog, parla_install_progress progress, void *user_data);
/* Removes a voice parla_install_voice installed, and its prepared copies in Parla's cache.
 * PARLA_ERROR_UNKNOWN_VOICE if it is not in the user's voice directory. */
parla_status parla_remove_voice(const char *name);

#ifdef __cplusplus
}
#endif
#endif
