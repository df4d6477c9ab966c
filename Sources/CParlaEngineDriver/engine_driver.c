// Parla's one driver of espeak-ng and Piper's voices (parla_engine_driver.h): everything that
// calls libespeak-ng to speak is here, for the engine host and for render workers alike.
#define _GNU_SOURCE
#include "parla_engine_driver.h"
#include "parla_espeak_locate.h"
#include <espeak-ng/speak_lib.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

// espeak-ng 1.51 probes an audio device at initialisation, even for synchronous output: its
// pcaudiolib opens a stream on the sound server (a wake-up of a suspended sink; a hang of up
// to 30 s when the server accepts connections but plays nothing). Parla's helpers never play
// (Parla plays through its own stream), so they start with the sound servers out of reach
// (PARLA_HELPER_PULSE_SERVER, parla_process.h) and the probe fails at once. (Defining
// pcaudiolib's constructor here and exporting it from the program took a linker flag, which
// SwiftPM refuses in a package depended on by version.)
// In CESpeakNGLazy, when libespeak-ng is loaded on first use; absent from the small
// parla-engine program, which links it.
const char *parla_espeak_load_error(void) __attribute__((weak));

static int sample_rate;
// The espeak-ng voice selected, "" when unknown (Piper's phonemizer selects its own).
static char current_voice[4200];

// The run being spoken with espeak-ng, for its callback.
static const parla_run_output *active_output;
static int active_stopped;

// The phonemes of the word being spoken (espeak-ng's phoneme events, in IPA, come after its
// word event): passed on at the next word, or when the run ends.
static struct { int position; size_t length; char ipa[1024]; } word_phonemes;

static void pass_on_phonemes(const parla_run_output *out) {
    if (out && out->phonemes && word_phonemes.length)
        out->phonemes(out->context, word_phonemes.position, word_phonemes.ipa, (int)word_phonemes.length);
    word_phonemes.length = 0;
}

// Audio first, then the events of the block. Returns 1 to make espeak-ng stop.
static int synth_callback(short *wav, int count, espeak_EVENT *events) {
    const parla_run_output *out = active_output;
    if (!out) return 0;
    if (active_stopped || (out->should_stop && out->should_stop(out->context))) {
        active_stopped = 1;
        return 1;
    }
    if (wav && count > 0 && out->audio) out->audio(out->context, wav, count);
    for (espeak_EVENT *e = events; e && e->type != espeakEVENT_LIST_TERMINATED; e++) {
        if (e->type == espeakEVENT_PHONEME) {
            size_t n = strnlen(e->id.string, sizeof e->id.string);
            if (n && word_phonemes.position > 0 && word_phonemes.length + n <= sizeof word_phonemes.ipa) {
                memcpy(word_phonemes.ipa + word_phonemes.length, e->id.string, n);
                word_phonemes.length += n;
            }
            continue;
        }
        int kind = e->type == espeakEVENT_WORD ? PARLA_ENGINE_EVENT_WORD : e->type == espeakEVENT_SENTENCE ? PARLA_ENGINE_EVENT_SENTENCE : 0;
        if (kind == PARLA_ENGINE_EVENT_WORD) {
            pass_on_phonemes(out);
            word_phonemes.position = e->text_position;
        }
        if (kind && out->event) out->event(out->context, kind, e->text_position, e->length, e->sample);
    }
    return 0;
}

int parla_engine_init(char *error, size_t error_size) {
    if (sample_rate > 0) return sample_rate;
    // Phoneme events, in IPA, are what Piper's voices map their words with (piper_phonemes.c).
    // Loaded first (and the espeak-ng bundled with the program with it, if any), so that its
    // data directory is known: the bundled one's (the Python wheel's), else the library's own.
    if (parla_espeak_load_error) (void)parla_espeak_load_error();
    int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 100, parla_espeak_bundled_directory(),
                                 0x8000 /* espeakINITIALIZE_DONT_EXIT */ | espeakINITIALIZE_PHONEME_EVENTS | espeakINITIALIZE_PHONEME_IPA);
    if (rate <= 0) {
        // Set when libespeak-ng is loaded on first use (CESpeakNGLazy) and could not be.
        const char *load_error = parla_espeak_load_error ? parla_espeak_load_error() : NULL;
        if (load_error)
            snprintf(error, error_size, "libespeak-ng could not be loaded: %s", load_error);
        else
            snprintf(error, error_size, "espeak-ng could not be initialised (is the espeak-ng-data package installed? Run scripts/setup)");
        return 0;
    }
    espeak_SetSynthCallback(synth_callback);
    // "some" punctuation: the symbols that carry meaning, as speech-dispatcher reads them.
    static const wchar_t list[] = L"@#$%^&_[]{}\\~";
    espeak_SetPunctuationList(list);
    sample_rate = rate;
    return rate;
}

// espeak-ng (1.51) lower-cases a voice's name, looks for a file of that name, and only then
// reads every voice file to find the voice by its name: "en-US" (file gmw/en-US) took 2.4 ms
// and 2,300 system calls, where "gmw/en" took 0.15 ms. espeak_SetVoiceByFile lower-cases its
// path too, so the file is opened here and passed as /proc/self/fd/N, a path with nothing to
// lower-case: 0.2 ms, the same voice (the same samples and events, plain and SSML). Without
// /proc or the file, the voice is selected by name.
int parla_engine_select_first_voice(void) {
    if (sample_rate <= 0) return 0;
    const char *data = NULL;
    espeak_Info(&data);
    char path[4096];
    int selected = 0;
    if (data && snprintf(path, sizeof path, "%s/lang/%s/%s", data, PARLA_ENGINE_FIRST_VOICE_FAMILY, PARLA_ENGINE_FIRST_VOICE) < (int)sizeof path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char by_descriptor[32];
            snprintf(by_descriptor, sizeof by_descriptor, "/proc/self/fd/%d", fd);
            selected = espeak_SetVoiceByFile(by_descriptor) == EE_OK;
            close(fd);
        }
    }
    if (!selected) selected = espeak_SetVoiceByName(PARLA_ENGINE_FIRST_VOICE) == EE_OK;
    if (selected) strcpy(current_voice, PARLA_ENGINE_FIRST_VOICE);
    return selected;
}

void parla_engine_read_voice_list(void) {
    if (sample_rate > 0) espeak_ListVoices(NULL);
}

int parla_engine_voice_names(void (*each)(void *context, const char *name), void *context) {
    if (sample_rate <= 0) return 0;
    const espeak_VOICE **voices = espeak_ListVoices(NULL);  // read again at each call
    int count = 0;
    for (int i = 0; voices && voices[i]; i++) {
        const char *id = voices[i]->identifier;
        if (!id) continue;
        const char *slash = strrchr(id, '/');
        each(context, slash ? slash + 1 : id);
        count++;
    }
    return count;
}

// MARK: Piper voices

// The Piper voices loaded in this process, by model path; the newest first.
static struct { char path[4096]; parla_piper_voice *voice; } piper_voices[PARLA_ENGINE_PIPER_SLOTS];
static int last_piper_slot = -1;

static int is_piper(const char *voice) { return strncmp(voice, PARLA_PIPER_PREFIX, strlen(PARLA_PIPER_PREFIX)) == 0; }

static const char *piper_path(const char *voice) { return is_piper(voice) ? voice + strlen(PARLA_PIPER_PREFIX) : voice; }

int parla_engine_piper_slot(const char *voice) {
    const char *path = piper_path(voice);
    for (int i = 0; i < PARLA_ENGINE_PIPER_SLOTS; i++)
        if (piper_voices[i].voice && strcmp(piper_voices[i].path, path) == 0) return i;
    return -1;
}

int parla_engine_last_piper_slot(void) { return last_piper_slot; }

int parla_engine_rethread_piper_slot(int slot, int threads) {
    if (slot < 0 || slot >= PARLA_ENGINE_PIPER_SLOTS || !piper_voices[slot].voice) return 0;
    return parla_piper_rethread(piper_voices[slot].voice, threads);
}

// Piper's phonemizer drives espeak-ng with a callback and a voice of its own: put them back.
static void reclaim_espeak(void) {
    espeak_SetSynthCallback(synth_callback);
    current_voice[0] = 0;
}

// How many Piper voices this process (and the one it was forked from) has loaded.
static int piper_loads;

// The Piper voice at `path`, loaded once; NULL and why in `error`.
static parla_piper_voice *piper_voice(const char *path, int warm, char *error, size_t error_size) {
    int known = parla_engine_piper_slot(path);
    if (known >= 0) return piper_voices[known].voice;
    if (strlen(path) >= sizeof piper_voices[0].path) {
        snprintf(error, error_size, "the Piper voice's path is too long");
        return NULL;
    }
    parla_piper_voice *voice = warm ? parla_piper_load_warm(path, error, error_size) : parla_piper_load(path, error, error_size);
    reclaim_espeak();
    if (!voice) return NULL;
    // The newest goes first, and the oldest loaded goes when all places are taken (EngineHost
    // keeps the same order for the host's voices).
    int slot = PARLA_ENGINE_PIPER_SLOTS - 1;
    for (int i = 0; i < PARLA_ENGINE_PIPER_SLOTS; i++)
        if (!piper_voices[i].voice) { slot = i; break; }
    if (piper_voices[slot].voice) parla_piper_free(piper_voices[slot].voice);
    memmove(&piper_voices[1], &piper_voices[0], (size_t)slot * sizeof *piper_voices);
    if (last_piper_slot >= 0) last_piper_slot = last_piper_slot < slot ? last_piper_slot + 1 : -1;
    strcpy(piper_voices[0].path, path);
    piper_voices[0].voice = voice;
    piper_loads++;
    return voice;
}

int parla_engine_piper_loads(void) { return piper_loads; }

// Why a Piper voice did not load: ONNX Runtime is missing, or the voice itself cannot be used.
static int piper_load_failure(void) { return parla_piper_load_wanted_runtime() ? PARLA_RUN_UNAVAILABLE : PARLA_RUN_VOICE_UNUSABLE; }

static int preload(const char *voice, int warm, char *error, size_t error_size) {
    if (error_size) error[0] = 0;
    if (!voice || !is_piper(voice)) return 1;
    if (parla_engine_init(error, error_size) <= 0) return PARLA_RUN_UNAVAILABLE;
    return piper_voice(piper_path(voice), warm, error, error_size) ? 1 : piper_load_failure();
}

int parla_engine_preload(const char *voice, char *error, size_t error_size) { return preload(voice, 0, error, error_size); }

int parla_engine_preload_warm(const char *voice, char *error, size_t error_size) { return preload(voice, 1, error, error_size); }

static int speak_piper(const parla_run *run, const parla_run_output *output, char *error, size_t error_size) {
    parla_piper_voice *voice = piper_voice(piper_path(run->voice), 0, error, error_size);
    if (!voice) return piper_load_failure();
    last_piper_slot = parla_engine_piper_slot(run->voice);
    // For measuring it, PARLA_PIPER_EARLY_CLAUSE=0 turns the early first clause off, "all"
    // asks it of every run (a file rendered the way live speech is spoken), and "live" asks
    // live speech's chunks too (a file made exactly as live speech makes it).
    const char *early = getenv("PARLA_PIPER_EARLY_CLAUSE");
    int every = early && (strcmp(early, "all") == 0 || strcmp(early, "live") == 0);
    int asked = (run->flags & PARLA_RUN_EARLY_FIRST_CLAUSE) || every;
    int options = asked && !(early && strcmp(early, "0") == 0) ? PARLA_PIPER_EARLY_FIRST_CLAUSE : 0;
    if ((run->flags & PARLA_RUN_EARLY_FIRST_CLAUSE) || (early && strcmp(early, "live") == 0)) options |= PARLA_PIPER_LIVE;
    int status = parla_piper_speak(voice, run->text, run->rate, run->pitch, run->volume, options, output, error, error_size);
    reclaim_espeak();
    if (status == PARLA_PIPER_OK) {
        if (error_size) error[0] = 0;
        return PARLA_RUN_OK;
    }
    return status == PARLA_PIPER_STOPPED ? PARLA_RUN_STOPPED : PARLA_RUN_FAILED;
}

int parla_engine_speak(const parla_run *run, const parla_run_output *output, char *error, size_t error_size) {
    if (error_size) error[0] = 0;
    if (!run || !run->voice || !run->text || !output) {
        snprintf(error, error_size, "a run without a voice or text");
        return PARLA_RUN_FAILED;
    }
    if (parla_engine_init(error, error_size) <= 0) return PARLA_RUN_UNAVAILABLE;
    if (is_piper(run->voice)) return speak_piper(run, output, error, error_size);
    if (strcmp(run->voice, current_voice) != 0) {
        if (strlen(run->voice) >= sizeof current_voice || espeak_SetVoiceByName(run->voice) != EE_OK) {
            current_voice[0] = 0;
            return PARLA_RUN_UNKNOWN_VOICE;
        }
        strcpy(current_voice, run->voice);
    }
    espeak_PUNCT_TYPE punctuation = run->punctuation == PARLA_PUNCTUATION_ALL    ? espeakPUNCT_ALL
                                    : run->punctuation == PARLA_PUNCTUATION_SOME ? espeakPUNCT_SOME
                                                                                 : espeakPUNCT_NONE;
    espeak_SetParameter(espeakRATE, run->rate, 0);
    espeak_SetParameter(espeakPITCH, run->pitch, 0);
    espeak_SetParameter(espeakVOLUME, run->volume, 0);
    espeak_SetParameter(espeakPUNCTUATION, punctuation, 0);
    unsigned flags = espeakCHARS_UTF8;
    if (run->flags & PARLA_RUN_SSML) flags |= espeakSSML;
    if (run->flags & PARLA_RUN_END_PAUSE) flags |= espeakENDPAUSE;
    active_output = output;
    word_phonemes.position = 0;
    word_phonemes.length = 0;
    active_stopped = 0;
    espeak_ERROR status = espeak_Synth(run->text, run->text_length + 1, 0, POS_CHARACTER, 0, flags, NULL, NULL);
    if (!active_stopped) pass_on_phonemes(output);
    active_output = NULL;
    if (active_stopped || (output->should_stop && output->should_stop(output->context))) return PARLA_RUN_STOPPED;
    if (status != EE_OK) {
        snprintf(error, error_size, "espeak_Synth returned error %d", (int)status);
        return PARLA_RUN_FAILED;
    }
    return PARLA_RUN_OK;
}
