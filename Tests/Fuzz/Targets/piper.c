// libFuzzer target: what a Piper voice's files can hold, against the C that reads them
// (Sources/CParlaPiper): the first byte picks the reader, the rest is the file.
//   0 (even): MODEL.onnx.json: the JSON reader, the config's fields and the phoneme id map;
//   1 (odd):  MODEL.onnx: the protobuf walker that finds the Ceil node, and the rewrite that
//             adds its output and seeds the random nodes, whose result must read back the same;
//             and the split at the decoder (and the flow), whose parts must read back as
//             models, the decoder and flow not splitting again, the decoder's planar rewrite
//             reading back too (and not applying twice), and the check alone agreeing with the split.
// Built by scripts/fuzz with the sanitizers; no ONNX Runtime, no espeak-ng call.
#include "piper_internal.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *body = data + 1;
    size_t length = size - 1;
    char error[300];
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
    return 0;
}
