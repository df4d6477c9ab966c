// The espeak-ng that phonemizes text for Piper voices. The voices were trained on espeak-ng
// 1.52's phonemes; Debian 12 has 1.51, which gives another vowel in "for", "or" and "more"
// (1.5 % of the symbols fed to joe differ from piper-tts's). So a libespeak-ng 1.52 with its
// data (scripts/setup unpacks it from the espeakng-loader wheel on PyPI) is loaded beside the
// system's, with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): its symbols and state stay its own, and
// the system's espeak-ng keeps speaking espeak-ng voices. Looked for in $PARLA_PIPER_ESPEAK
// (a directory holding libespeak-ng.so.1 and espeak-ng-data; "system" for the system's),
// PREFIX/lib/parla/espeak-ng, then ~/.cache/parla/espeak-ng; without one, the system's.
#include "piper_internal.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static piper_espeak chosen;
static int looked;

// Loads the libespeak-ng.so.1 in `dir` (with dir/espeak-ng-data); 1 if it works.
static int load_from(const char *dir) {
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
    chosen = e;
    return 1;
}

static espeak_ERROR system_synth(const void *text, size_t size, unsigned int position, espeak_POSITION_TYPE type, unsigned int end,
                                 unsigned int flags, unsigned int *identifier, void *user_data) {
    return espeak_Synth(text, size, position, type, end, flags, identifier, user_data);
}

const piper_espeak *piper_espeak_get(void) {
    if (looked) return &chosen;
    looked = 1;
    const char *asked = getenv("PARLA_PIPER_ESPEAK");
    int found = 0;
    if (asked && strcmp(asked, "system") == 0) found = 0;
    else if (asked && *asked) found = load_from(asked);
    else {
        char base[PATH_MAX], dir[PATH_MAX + 64];
        if (piper_program_directory(base, sizeof base)) {
            // Installed: PREFIX/bin/parla, or PREFIX/libexec/parla/….
            const char *places[] = { "%s/../lib/parla/espeak-ng", "%s/../../lib/parla/espeak-ng" };
            for (size_t i = 0; i < 2 && !found; i++) {
                snprintf(dir, sizeof dir, places[i], base);
                found = load_from(dir);
            }
        }
        if (!found && piper_cache_directory(base, sizeof base)) snprintf(dir, sizeof dir, "%s/espeak-ng", base), found = load_from(dir);
    }
    if (!found) chosen = (piper_espeak){ espeak_SetVoiceByName, espeak_SetSynthCallback, system_synth, espeak_TextToPhonemes, espeak_SetParameter, espeak_GetParameter, 0 };
    return &chosen;
}

espeak_ERROR piper_espeak_select(const piper_espeak *e, const char *voice) {
    // Its own espeak-ng keeps the voice last selected (selecting "en-us" by name reads the voice
    // files: some 2 ms); the system's is shared with espeak-ng voices.
    static char selected[64];
    if (e->own && strcmp(selected, voice) == 0) return EE_OK;
    espeak_ERROR status = e->set_voice(voice);
    if (e->own) snprintf(selected, sizeof selected, "%s", status == EE_OK && strlen(voice) < sizeof selected ? voice : "");
    return status;
}
