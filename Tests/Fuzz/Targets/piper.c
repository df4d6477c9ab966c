// libFuzzer target: what a Piper voice's files can hold, against the C that reads them
// (Sources/CParlaPiper): the first byte picks the reader, the rest is the file.
//   0 (mod 4): MODEL.onnx.json: the JSON reader, the config's fields and the phoneme id map;
//   1 (odd):  MODEL.onnx: the protobuf walker that finds the Ceil node, and the rewrite that
//             adds its output and seeds the random nodes, whose result must read back the same;
//             and the split at the decoder (and the flow), whose parts must read back as
//             models, the decoder and flow not splitting again, the decoder's planar rewrite
//             reading back too (and not applying twice), and the check alone agreeing with the split.
//   2 (mod 4): text, phonemized as for a Piper voice by the system's espeak-ng (en-us, a map of
//             espeak-ng's IPA symbols; bit 2 asks for the early first clause): the walk of its
//             events and phonemes, and the split of words spoken joined to the one before. Every
//             sentence's words must keep their order, their first ids inside the sentence.
// Built by scripts/fuzz with the sanitizers; no ONNX Runtime.
// Built with PARLA_FUZZ_FORK (scripts/fuzz's piper-fork target), every input is text (mode 2),
// phonemized by piper-phonemize's espeak-ng as users get it: rhasspy's fork, loaded from
// $PARLA_FUZZ_FORK with dlopen(RTLD_DEEPBIND) beside the system's, whose phoneme events keep 4
// bytes of a name (the cut names the walk mends). AddressSanitizer refuses RTLD_DEEPBIND, so that
// build has UndefinedBehaviorSanitizer and libFuzzer's own checks, and checks that the fork is
// what speaks (loaded as its own, 4-byte events) before the first input.
#include "piper_internal.h"
#include <espeak-ng/speak_lib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The walk's sentences: their words in order of their first ids, each id's word a real one.
static int check_sentence(void *context, piper_sentence *s) {
    (void)context;
    int previous = -1;
    for (size_t w = 0; w < s->word_count; w++) {
        int first = s->words[w].first_id;
        if (first >= (int)s->id_count || s->words[w].ipa_length < 0 || s->words[w].ipa_length > (int)sizeof s->words[w].ipa) abort();
        if (s->words[w].length < 1) abort();
        if (first < 0) continue;
        if (first <= previous) abort();
        previous = first;
    }
    for (size_t i = 0; i < s->id_count; i++)
        if (s->word_of_id[i] < -1 || s->word_of_id[i] >= (int)s->word_count) abort();
    return 0;
}

// A phoneme id map with espeak-ng's IPA symbols and Piper's punctuation.
static piper_id_map *ipa_map(void) {
    static const char *symbols[] = {
        "_", "^", "$", " ", "!", "'", "(", ")", ",", "-", ".", ":", ";", "?", "a", "b", "c", "d", "e", "f", "h", "i", "j", "k", "l",
        "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z", "æ", "ç", "ð", "ø", "ħ", "ŋ", "œ", "ɐ", "ɑ", "ɒ", "ɔ",
        "ɕ", "ɖ", "ə", "ɚ", "ɛ", "ɜ", "ɟ", "ɡ", "ɣ", "ɪ", "ɫ", "ɬ", "ɭ", "ɯ", "ɲ", "ɳ", "ɹ", "ɾ", "ʁ", "ʂ", "ʃ", "ʈ", "ʊ", "ʋ",
        "ʌ", "ʎ", "ʏ", "ʒ", "ʔ", "ʲ", "ˈ", "ˌ", "ː", "β", "θ", "χ", "ᵻ",
    };
    char json[4096];
    size_t n = (size_t)snprintf(json, sizeof json, "{");
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++)
        n += (size_t)snprintf(json + n, sizeof json - n, "%s\"%s\": [%zu]", i ? ", " : "", symbols[i], i);
    snprintf(json + n, sizeof json - n, "}");
    char error[300];
    pj_value *doc = pj_parse(json, strlen(json), error, sizeof error);
    if (!doc) abort();
    piper_id_map *map = piper_id_map_create(doc, error, sizeof error);
    pj_free(doc);
    if (!map) abort();
    return map;
}

static void phonemize(const uint8_t *body, size_t length, int early) {
    static piper_id_map *map;
    if (!map) {
#ifdef PARLA_FUZZ_FORK
        const char *fork = getenv("PARLA_FUZZ_FORK");
        if (!fork || !*fork) {
            fprintf(stderr, "set PARLA_FUZZ_FORK to the directory of piper-phonemize's libespeak-ng.so.1 and espeak-ng-data\n");
            abort();
        }
        setenv("PARLA_PIPER_ESPEAK", fork, 1);
        const piper_espeak *e = piper_espeak_get(PIPER_ESPEAK_TRAINED);
        piper_espeak_probe(e);
        if (!e->own || e->state->event_bytes != 4) {
            fprintf(stderr, "the fork at %s did not load as its own with 4-byte phoneme events (own %d, %d bytes)\n", fork, e->own,
                    e->own ? e->state->event_bytes : 0);
            abort();
        }
        fprintf(stderr, "phonemizing with the fork at %s: its own, %d-byte phoneme events\n", fork, e->state->event_bytes);
#else
        // The system's espeak-ng: a private one is loaded with RTLD_DEEPBIND, which the
        // sanitizers' runtime refuses.
        setenv("PARLA_PIPER_ESPEAK", "system", 1);
        if (espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, NULL, 0x8000 | espeakINITIALIZE_PHONEME_EVENTS | espeakINITIALIZE_PHONEME_IPA) <= 0) abort();
#endif
        map = ipa_map();
    }
    char *text = malloc(length + 1);
    if (!text) return;
    memcpy(text, body, length);
    text[length] = 0;
    char error[300];
    (void)piper_phonemize(text, PIPER_ESPEAK_TRAINED, "en-us", map, early, check_sentence, NULL, error, sizeof error);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *body = data + 1;
    size_t length = size - 1;
    char error[300];
#ifdef PARLA_FUZZ_FORK
    phonemize(body, length, data[0] & 4);
    return 0;
#endif
    if ((data[0] & 3) == 2) {
        phonemize(body, length, data[0] & 4);
        return 0;
    }
    if ((data[0] & 1) == 0) {
        pj_value *doc = pj_parse((const char *)body, length, error, sizeof error);
        if (!doc) return 0;
        (void)pj_string(pj_get(pj_get(doc, "espeak"), "voice"));
        (void)pj_number(pj_get(pj_get(doc, "audio"), "sample_rate"), 0);
        piper_id_map *map = piper_id_map_create(pj_get(doc, "phoneme_id_map"), error, sizeof error);
        piper_id_map_free(map);
        pj_free(doc);
        return 0;
    }
    char name[512];
    int found = piper_find_ceil_output(body, length, name, sizeof name);
    size_t rewritten_length = 0;
    unsigned char *rewritten = piper_rewrite_model(body, length, found == 1 ? name : "extra", 1.0f, &rewritten_length);
    if (found >= 0 && rewritten) {
        // The rewrite keeps the model readable and its Ceil node where it was.
        char again[512];
        int found_again = piper_find_ceil_output(rewritten, rewritten_length, again, sizeof again);
        if (found_again != found || (found == 1 && strcmp(again, name) != 0)) abort();
    }
    free(rewritten);
    piper_split split;
    char why[300];
    int splits = piper_split_model(body, length, found == 1 ? name : NULL, 1.0f, &split, why, sizeof why);
    if (splits == 1) {
        char part[512];
        if (piper_find_ceil_output(split.encoder, split.encoder_length, part, sizeof part) < 0) abort();
        if (piper_find_ceil_output(split.decoder, split.decoder_length, part, sizeof part) < 0) abort();
        // In the decoder, the latent is an input that no node makes.
        if (piper_split_model(split.decoder, split.decoder_length, NULL, 1.0f, NULL, why, sizeof why) != 0) abort();
        // Its planar form, where there is one, reads back as a model, and is not rewritten again
        // (its convolutions are two-dimensional already).
        size_t planar_length = 0, again_length = 0;
        unsigned char *planar = piper_planar_decoder(split.decoder, split.decoder_length, &planar_length);
        if (planar && piper_find_ceil_output(planar, planar_length, part, sizeof part) < 0) abort();
        unsigned char *twice = planar ? piper_planar_decoder(planar, planar_length, &again_length) : NULL;
        if (twice) abort();
        free(planar);
        // The flow, split off only with the durations, reads back as a model that does not split again.
        if (split.flow && found != 1) abort();
        if (split.flow && piper_find_ceil_output(split.flow, split.flow_length, part, sizeof part) < 0) abort();
        if (split.flow && piper_split_model(split.flow, split.flow_length, NULL, 1.0f, NULL, why, sizeof why) != 0) abort();
        free(split.encoder);
        free(split.decoder);
        free(split.flow);
    }
    if (piper_split_model(body, length, NULL, 1.0f, NULL, why, sizeof why) != splits) abort();
    // The decoder's reach, where it can be followed, is a distance.
    int back = -1, ahead = -1;
    if (piper_decoder_context(body, length, &back, &ahead) && (back < 0 || ahead < 0 || back > 4096 || ahead > 4096)) abort();
    return 0;
}
