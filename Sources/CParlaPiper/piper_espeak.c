// The espeak-ng that phonemizes text for Piper voices: the one each voice was trained with.
// - Voices trained with Piper 1.x (their config's piper_version below 1.3: every voice of
//   rhasspy/piper-voices, joe too) learned the phonemes of piper-phonemize, whose libespeak-ng
//   is rhasspy's fork of espeak-ng as of 2023-11-27. It has not the horse-hoarse merger of
//   2024-04-30 ("more" is mˈoːɹ, where 1.52 says mˈɔːɹ) nor the ʲ that piper-tts 1.8's
//   espeak-ng adds after an i before a vowel. scripts/setup unpacks it from the
//   piper-phonemize wheel on PyPI (piper-phonemize/).
// - Voices trained with piper1-gpl (1.3 and later) learned an espeak-ng past 1.52: 1.52, from
//   the espeakng-loader wheel (espeak-ng/).
// Debian 12's 1.51 differs from both ("for", "or" and "more" all oːɹ). Each is loaded beside
// the system's with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): its symbols and state stay its own,
// and the system's espeak-ng keeps speaking espeak-ng voices. Each is looked for in
// PREFIX/lib/parla/NAME (NAME beside the program, in the wheel), then ~/.cache/parla/NAME; a
// voice whose own is missing takes the other, then the system's. $PARLA_PIPER_ESPEAK (a
// directory holding libespeak-ng.so.1 and espeak-ng-data; "system" for the system's) names
// one for every voice.
#include "piper_internal.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static piper_espeak chosen[PIPER_ESPEAK_KINDS];
static int looked[PIPER_ESPEAK_KINDS];
static piper_espeak_state state[PIPER_ESPEAK_KINDS];
static const char *const kind_directory[PIPER_ESPEAK_KINDS] = { "piper-phonemize", "espeak-ng" };

// Loads the libespeak-ng.so.1 in `dir` (with dir/espeak-ng-data); 1 if it works.
static int load_from(const char *dir, piper_espeak *into, int kind) {
    char library[PATH_MAX + 32], data[PATH_MAX + 32];
    snprintf(library, sizeof library, "%s/libespeak-ng.so.1", dir);
    snprintf(data, sizeof data, "%s/espeak-ng-data", dir);
    if (access(library, R_OK) != 0 || access(data, R_OK) != 0) return 0;
    void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) return 0;
    int (*initialize)(espeak_AUDIO_OUTPUT, int, const char *, int) = (int (*)(espeak_AUDIO_OUTPUT, int, const char *, int))dlsym(h, "espeak_Initialize");
    piper_espeak e = {
        .set_voice = (espeak_ERROR (*)(const char *))dlsym(h, "espeak_SetVoiceByName"),
        .set_callback = (void (*)(t_espeak_callback *))dlsym(h, "espeak_SetSynthCallback"),
        .synth = (espeak_ERROR (*)(const void *, size_t, unsigned int, espeak_POSITION_TYPE, unsigned int, unsigned int, unsigned int *, void *))dlsym(
            h, "espeak_Synth"),
        .text_to_phonemes = (const char *(*)(const void **, int, int))dlsym(h, "espeak_TextToPhonemes"),
        .set_parameter = (espeak_ERROR (*)(espeak_PARAMETER, int, int))dlsym(h, "espeak_SetParameter"),
        .get_parameter = (int (*)(espeak_PARAMETER, int))dlsym(h, "espeak_GetParameter"),
    };
    // 0x8000: espeakINITIALIZE_DONT_EXIT (a missing file is an error, not an exit).
    if (!initialize || !e.set_voice || !e.set_callback || !e.synth || !e.text_to_phonemes || !e.set_parameter || !e.get_parameter ||
        initialize(AUDIO_OUTPUT_SYNCHRONOUS, 100, data, 0x8000 | espeakINITIALIZE_PHONEME_EVENTS | espeakINITIALIZE_PHONEME_IPA) <= 0) {
        dlclose(h);
        return 0;
    }
    e.own = 1;
    e.state = &state[kind];
    *e.state = (piper_espeak_state){ 0 };
    *into = e;
    return 1;
}

static espeak_ERROR system_synth(const void *text, size_t size, unsigned int position, espeak_POSITION_TYPE type, unsigned int end,
                                 unsigned int flags, unsigned int *identifier, void *user_data) {
    return espeak_Synth(text, size, position, type, end, flags, identifier, user_data);
}

// Calls `try` on each directory where the espeak-ng of `kind` is looked for, in order, until it
// returns 1: installed, PREFIX/bin/parla or PREFIX/libexec/parla/… (`program_directory`: the
// engine host's, NULL: this program's); in the wheel, beside it (where espeak-ng/ is the
// engine's own, when the system has none: not loaded twice); then the user's cache.
static int each_place(int kind, const char *program_directory, int (*try)(const char *dir, int kind, void *context), void *context) {
    char base[PATH_MAX], dir[PATH_MAX + 64];
    if (program_directory ? snprintf(base, sizeof base, "%s", program_directory) < (int)sizeof base : piper_program_directory(base, sizeof base)) {
        const char *places[] = { "%s/../lib/parla/%s", "%s/../../lib/parla/%s", "%s/%s" };
        size_t count = kind == PIPER_ESPEAK_TRAINED ? 3 : 2;
        for (size_t i = 0; i < count; i++) {
            snprintf(dir, sizeof dir, places[i], base, kind_directory[kind]);
            if (try(dir, kind, context)) return 1;
        }
    }
    if (piper_cache_directory(base, sizeof base)) {
        snprintf(dir, sizeof dir, "%s/%s", base, kind_directory[kind]);
        if (try(dir, kind, context)) return 1;
    }
    return 0;
}

static int try_load(const char *dir, int kind, void *into) { return load_from(dir, into, kind); }

// Loads the espeak-ng of `kind` from where it is installed or cached; 1 if found.
static int load_kind(int kind, piper_espeak *into) { return each_place(kind, NULL, try_load, into); }

typedef struct {
    char *out;
    size_t size;
} found_place;

static int try_find(const char *dir, int kind, void *context) {
    (void)kind;
    char library[PATH_MAX + 32], data[PATH_MAX + 32];
    snprintf(library, sizeof library, "%s/libespeak-ng.so.1", dir);
    snprintf(data, sizeof data, "%s/espeak-ng-data", dir);
    if (access(library, R_OK) != 0 || access(data, R_OK) != 0) return 0;
    found_place *found = context;
    char resolved[PATH_MAX];
    snprintf(found->out, found->size, "%s", realpath(dir, resolved) ? resolved : dir);
    return 1;
}

int piper_espeak_where(int kind, const char *program_directory, char *dir, size_t size) {
    if (size) dir[0] = 0;
    if (kind < 0 || kind >= PIPER_ESPEAK_KINDS) kind = PIPER_ESPEAK_CURRENT;
    found_place found = { dir, size };
    const char *asked = getenv("PARLA_PIPER_ESPEAK");
    if (asked && *asked) return strcmp(asked, "system") != 0 && try_find(asked, kind, &found) ? -1 : -2;
    if (each_place(kind, program_directory, try_find, &found)) return kind;
    if (each_place(1 - kind, program_directory, try_find, &found)) return 1 - kind;
    return -2;
}

int piper_espeak_kind(const char *piper_version) {
    // piper1-gpl's training writes 1.3 and later; Piper 1.x's, 1.0.0.
    int major = 0, minor = 0;
    if (!piper_version || sscanf(piper_version, "%d.%d", &major, &minor) < 1) return PIPER_ESPEAK_TRAINED;
    return major > 1 || (major == 1 && minor >= 3) ? PIPER_ESPEAK_CURRENT : PIPER_ESPEAK_TRAINED;
}

const piper_espeak *piper_espeak_get(int kind) {
    if (kind < 0 || kind >= PIPER_ESPEAK_KINDS) kind = PIPER_ESPEAK_CURRENT;
    if (looked[kind]) return &chosen[kind];
    looked[kind] = 1;
    chosen[kind] = (piper_espeak){ espeak_SetVoiceByName, espeak_SetSynthCallback, system_synth, espeak_TextToPhonemes, espeak_SetParameter, espeak_GetParameter, 0, NULL };
    const char *asked = getenv("PARLA_PIPER_ESPEAK");
    if (asked && *asked) {
        // One for every voice, loaded once (a library initialised twice would have one voice
        // selected under two names).
        if (looked[1 - kind]) chosen[kind] = chosen[1 - kind];
        else if (strcmp(asked, "system") != 0) load_from(asked, &chosen[kind], kind);
        return &chosen[kind];
    }
    if (!load_kind(kind, &chosen[kind])) {
        // The other kind's (whose own lookup finds this one the system's: it ends there).
        const piper_espeak *other = piper_espeak_get(1 - kind);
        if (other->own) chosen[kind] = *other;
    }
    return &chosen[kind];
}

espeak_ERROR piper_espeak_select(const piper_espeak *e, const char *voice) {
    // Its own espeak-ng keeps the voice last selected (selecting "en-us" by name reads the voice
    // files: some 2 ms); the system's is shared with espeak-ng voices.
    if (e->own && strcmp(e->state->selected, voice) == 0) return EE_OK;
    espeak_ERROR status = e->set_voice(voice);
    if (e->own) snprintf(e->state->selected, sizeof e->state->selected, "%s", status == EE_OK && strlen(voice) < sizeof e->state->selected ? voice : "");
    return status;
}
