// A Piper voice: its config, its model (with the phoneme durations made an output and the
// noise seeded), and speaking a run of text with it.
#include "piper_internal.h"
#include <espeak-ng/speak_lib.h>
#include <malloc.h>
#include <math.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/// The rate runs are delivered at: espeak-ng's, so that one utterance mixing both engines is
/// one stream with one timeline. A voice at another rate is resampled.
#define OUTPUT_RATE 22050
/// The most of a fast rate's speed that the model's length_scale gives (1.5: 262 words a
/// minute); the time-stretch gives the rest. Past it the model no longer follows its scale:
/// on joe, a sentence at 1.5 times the voice's speed is 1.35 times as fast, at 2 times 1.53, at
/// 2.57 times 1.70 (ids bottom out at one frame), and the words run together. See DESIGN.md.
#define MODEL_MOST 1.5

// A voice's parts: the whole voice or its encoder; its flow (none: the flow is in the encoder);
// its decoder (none: the voice is spoken a whole sentence at a time). See piper_model.c.
enum { ENCODER, FLOW, DECODER, PARTS };
// The file of each part in the cache: the encoder's name, then these.
static const char *const part_suffix[PARTS] = { "", ".flow", ".dec" };

typedef struct {
    piper_session *session;
    void *mapped;  // its cached copy in ONNX Runtime's format, used in place
    size_t mapped_length;
} voice_part;

struct parla_piper_voice {
    voice_part part[PARTS];
    piper_id_map *map;
    char espeak_voice[64];
    int espeak_kind;  // the espeak-ng it was trained with (PIPER_ESPEAK_TRAINED, _CURRENT)
    int sample_rate;
    float noise_scale, length_scale, noise_w;
    int exact_timing;
    int warmed;       // its sessions have made their first run (see warm_up)
    float reference;  // the peak of the warm-up sentence: the voice's level (see warm_up)
    int context_known, context_back, context_ahead;  // the decoder's reach, in frames (see decoder_context)
    const char *loading;  // the model's path while it loads (for load_espeak's thread)
    char prepared_path[PATH_MAX + 300];  // where the encoder's prepared copy is ("" if none)
};

// What the encoder makes of the warm-up sentence: the flow's (or the decoder's) input.
typedef struct warm_input {
    float *first, *side;
    size_t samples;  // floats in first
    int64_t channels, side_channels;
    int made;
} warm_input;

// Frees the voice's sessions and unmaps their copies.
static void release_parts(parla_piper_voice *v) {
    for (int p = 0; p < PARTS; p++) {
        piper_session_free(v->part[p].session);
        if (v->part[p].mapped) munmap(v->part[p].mapped, v->part[p].mapped_length);
        v->part[p] = (voice_part){ NULL, NULL, 0 };
    }
}

// Whether sessions (ENCODER, FLOW, DECODER; NULL where there is none) make a voice: a whole
// one alone, or an encoder whose outputs its flow or decoder reads, and so on to the audio.
static int parts_fit(piper_session *const s[PARTS]) {
    if (!s[ENCODER]) return 0;
    int kind = piper_session_kind(s[ENCODER]);
    if (kind == PIPER_WHOLE) return !s[FLOW] && !s[DECODER];
    if (kind != PIPER_ENCODER || !s[DECODER] || piper_session_kind(s[DECODER]) != PIPER_DECODER) return 0;
    if (!s[FLOW]) return strcmp(piper_session_input(s[DECODER]), piper_session_output(s[ENCODER])) == 0;
    return piper_session_kind(s[FLOW]) == PIPER_FLOW && strcmp(piper_session_input(s[FLOW]), piper_session_output(s[ENCODER])) == 0 &&
           strcmp(piper_session_input(s[DECODER]), piper_session_output(s[FLOW])) == 0;
}

// MARK: The cache of prepared models

// A prepared model (the durations an output, the noise seeded, ONNX Runtime's optimizations
// applied) is kept in ONNX Runtime's own format in ~/.cache/parla/piper-models: the next load
// maps it and uses its weights in place, instead of reading, rewriting, parsing and optimizing
// 63 MB (joe: 0.45 s), and processes that map it share its pages. A voice split at its decoder
// (piper_model.c) has a file per part: the encoder in NAME.ort, the flow in NAME.ort.flow, the
// decoder in NAME.ort.dec. Its name holds the model's size and time and the runtime's version,
// so a changed model or runtime makes a new one.
// PARLA_PIPER_CACHE=DIR puts it elsewhere; PARLA_PIPER_CACHE=0 turns it off.
#define PREPARED_VERSION "r4"

// What else the prepared copy depends on, in its name: the decoder's form (planar, as it was,
// or the voice whole: PARLA_PIPER_PLANAR=0 and PARLA_PIPER_WHOLE=1 make other copies), and the
// layout ONNX Runtime's optimizations write into it: its blocked convolutions (NCHWc) hold 16
// channels a block with AVX-512 and 8 with AVX2, so machines sharing a cache (a home directory
// on a cluster) do not read each other's.
static void prepared_variant(char *out, size_t size) {
    const char *whole = getenv("PARLA_PIPER_WHOLE"), *planar = getenv("PARLA_PIPER_PLANAR");
    char form = whole && strcmp(whole, "1") == 0 ? 'w' : planar && strcmp(planar, "0") == 0 ? 'l' : 'p';
    const char *layout = "o";
#if defined(__x86_64__)
    __builtin_cpu_init();
    layout = __builtin_cpu_supports("avx512f") ? "x16" : __builtin_cpu_supports("avx2") ? "x8" : "x1";
#elif defined(__aarch64__)
    layout = "a64";
#endif
    snprintf(out, size, "%s%c%s", PREPARED_VERSION, form, layout);
}

static int cache_path(const char *model_path, const struct stat *st, char *out, size_t size) {
    const char *explicit = getenv("PARLA_PIPER_CACHE");
    if (explicit && strcmp(explicit, "0") == 0) return 0;
    char dir[PATH_MAX], cache[PATH_MAX - 16];
    if (explicit && *explicit) snprintf(dir, sizeof dir, "%s", explicit);
    else if (piper_cache_directory(cache, sizeof cache)) snprintf(dir, sizeof dir, "%s/piper-models", cache);
    else return 0;
    const char *slash = strrchr(model_path, '/');
    const char *name = slash ? slash + 1 : model_path;
    size_t stem = strlen(name) > 5 && strcmp(name + strlen(name) - 5, ".onnx") == 0 ? strlen(name) - 5 : strlen(name);
    if (stem > 200) stem = 200;
    char variant[32];
    prepared_variant(variant, sizeof variant);
    int n = snprintf(out, size, "%s/%.*s-%lld-%lld-%s-ort%s.ort", dir, (int)stem, name, (long long)st->st_size, (long long)st->st_mtime,
                     variant, piper_runtime_version());
    return n > 0 && (size_t)n < size;
}

static void make_directories(const char *file) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", file);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(path, 0700);
        *p = '/';
    }
}

// Removes the other prepared copies of the model whose copy is `path` (an older version of the
// model or of the runtime): one copy per model name is kept.
static void remove_older_copies(const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = 0;
    const char *name = slash + 1;
    // The model's name is what comes before "-SIZE-TIME-rN-ortVERSION.ort": four dashes from the end.
    const char *size = NULL;
    int dashes = 0;
    for (const char *p = name + strlen(name); p > name; p--) {
        if (*p == '-' && ++dashes == 4) { size = p; break; }
    }
    if (!size) return;
    size_t stem = (size_t)(size - name) + 1;  // with the dash
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name), own = strlen(name);
        // A part of a prepared copy (NAME.ort, .ort.flow, .ort.dec), and not one of this copy's.
        int part = 0, its_own = 0;
        for (int p = 0; p < PARTS; p++) {
            size_t k = strlen(part_suffix[p]);
            part |= n >= 4 + k && memcmp(e->d_name + n - 4 - k, ".ort", 4) == 0 && strcmp(e->d_name + n - k, part_suffix[p]) == 0;
            its_own |= n == own + k && strncmp(e->d_name, name, own) == 0 && strcmp(e->d_name + own, part_suffix[p]) == 0;
        }
        // And the warm-up's input kept beside a copy (NAME.ort.warm).
        part |= n >= 9 && strcmp(e->d_name + n - 9, ".ort.warm") == 0;
        its_own |= n == own + 5 && strncmp(e->d_name, name, own) == 0 && strcmp(e->d_name + own, ".warm") == 0;
        if (!part || its_own) continue;
        if (strncmp(e->d_name, name, stem) != 0) continue;
        char old[PATH_MAX + 256];
        snprintf(old, sizeof old, "%s/%s", dir, e->d_name);
        unlink(old);
    }
    closedir(d);
}

// Maps the file at `path` read-only; NULL if it cannot be (or is empty).
static void *map_file(const char *path, size_t *length) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0) map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return NULL;
    *length = (size_t)st.st_size;
    return map;
}

// The parts `first` to `last` of a prepared model, mapped and made into sessions: one thread's
// share of load_prepared.
typedef struct {
    parla_piper_voice *v;
    const char *path;
    int first, last, threads, made;
    const warm_input *warm;  // the warm-up's cached encoder output, to decode once made
    float peak;              // the peak of that decoding
    int decoded;             // whether it was made
    char error[1500];
} part_loading;

static float warm_up_decode(piper_session *const sessions[PARTS], const warm_input *in);

static void *load_parts(void *context) {
    part_loading *l = context;
    l->made = 1;
    for (int p = l->first; p <= l->last; p++) {
        voice_part *vp = &l->v->part[p];
        char part_path[PATH_MAX + 310];
        snprintf(part_path, sizeof part_path, "%s%s", l->path, part_suffix[p]);
        if (!(vp->mapped = map_file(part_path, &vp->mapped_length))) continue;
        vp->session = piper_session_create(vp->mapped, vp->mapped_length, l->threads, 1, NULL, l->error, sizeof l->error);
        l->made &= vp->session != NULL;
    }
    if (l->warm && l->made && l->v->part[DECODER].session) {
        piper_session *sessions[PARTS] = { NULL, l->v->part[FLOW].session, l->v->part[DECODER].session };
        l->peak = warm_up_decode(sessions, l->warm);
        l->decoded = 1;
    }
    return NULL;
}

// Maps the cached model at `path` (and its flow and decoder at PATH.flow and PATH.dec, if it
// has them) and makes sessions of them; 0 if there is none or it fails (a damaged one is removed).
// The flow's and the decoder's sessions are made on a thread of their own while this one makes
// the encoder's, the slowest (joe: 53 ms against 6 and 5): the thread is joined before this
// returns, so a process that forks afterwards (the engine host, a render worker) forks with one.
static int load_prepared(parla_piper_voice *v, const char *path, int threads, const warm_input *warm, float *warm_peak, int *warm_decoded) {
    part_loading encoder = { .v = v, .path = path, .first = ENCODER, .last = ENCODER, .threads = threads };
    part_loading rest = { .v = v, .path = path, .first = FLOW, .last = DECODER, .threads = threads, .warm = warm };
    pthread_t thread;
    int apart = pthread_create(&thread, NULL, load_parts, &rest) == 0;
    load_parts(&encoder);
    if (apart) pthread_join(thread, NULL);
    else load_parts(&rest);
    piper_session *sessions[PARTS] = { v->part[ENCODER].session, v->part[FLOW].session, v->part[DECODER].session };
    if (!v->part[ENCODER].mapped) { release_parts(v); return 0; }
    if (!encoder.made || !rest.made || !parts_fit(sessions)) {
        release_parts(v);
        for (int p = 0; p < PARTS; p++) {
            char part_path[PATH_MAX + 310];
            snprintf(part_path, sizeof part_path, "%s%s", path, part_suffix[p]);
            unlink(part_path);
        }
        return 0;
    }
    v->exact_timing = piper_session_has_durations(v->part[ENCODER].session);
    *warm_peak = rest.peak;
    *warm_decoded = rest.decoded;
    return 1;
}

// The frames of context a chunk of the decoder needs either side (piper_decoder_context), read
// from the model's graph on every load, as the prepared copy does not keep it: joe, 6 ms, on
// load_espeak's thread while this one loads ONNX Runtime. Unknown, chunks take PADDING.
static void decoder_context(parla_piper_voice *v, const char *model_path) {
    size_t length = 0;
    unsigned char *model = map_file(model_path, &length);
    if (!model) return;
    int back = 0, ahead = 0;
    if (piper_decoder_context(model, length, &back, &ahead) && back <= 256 && ahead <= 256)
        v->context_known = 1, v->context_back = back, v->context_ahead = ahead;
    munmap(model, length);
}

static unsigned char *read_file(const char *path, size_t *length, size_t limit, char *error, size_t error_size, const char *what) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(error, error_size, "%s %s cannot be read", what, path);
        return NULL;
    }
    unsigned char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 1 << 20) {
            size_t grown = cap ? cap * 2 : 1 << 20;
            if (grown > limit + (1 << 20)) grown = limit + (1 << 20);
            unsigned char *d = realloc(data, grown);
            if (!d) { free(data); fclose(f); snprintf(error, error_size, "out of memory reading %s", path); return NULL; }
            data = d;
            cap = grown;
        }
        size_t r = fread(data + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
        if (n > limit) { free(data); fclose(f); snprintf(error, error_size, "%s %s is too large", what, path); return NULL; }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(data); snprintf(error, error_size, "%s %s cannot be read", what, path); return NULL; }
    *length = n;
    return data;
}

int parla_piper_model_streams(const char *model_path, char *why, size_t why_size) {
    why[0] = 0;
    size_t length = 0;
    unsigned char *model = map_file(model_path, &length);
    if (!model) {
        snprintf(why, why_size, "the voice's model %s cannot be read", model_path);
        return -1;
    }
    int found = piper_split_model(model, length, NULL, 0, NULL, why, why_size);
    munmap(model, length);
    if (found < 0) snprintf(why, why_size, "the voice's model %s is damaged or not an ONNX model", model_path);
    return found;
}

static int last_load_wanted_runtime;

int parla_piper_load_wanted_runtime(void) { return last_load_wanted_runtime; }

// Loads the espeak-ng that phonemizes for `context`, a voice, and selects its espeak-ng voice.
// And reads the decoder's reach from the model (decoder_context).
static void *load_espeak(void *context) {
    parla_piper_voice *v = context;
    const piper_espeak *espeak = piper_espeak_get(v->espeak_kind);
    piper_espeak_probe(espeak);
    if (espeak->own) piper_espeak_select(espeak, v->espeak_voice);
    if (v->loading) decoder_context(v, v->loading);
    return NULL;
}

static void warm_up_loaded(parla_piper_voice *v, const warm_input *cached, float cached_peak);
static warm_input warm_input_read(const parla_piper_voice *v);
static void warm_input_free(warm_input *in);

int parla_piper_phonemizer(const char *model_path, const char *program_directory, int *trained, char *used, size_t used_size) {
    if (used_size) used[0] = 0;
    *trained = PIPER_ESPEAK_TRAINED;
    char config_path[4200], error[300];
    if (!model_path || snprintf(config_path, sizeof config_path, "%s.json", model_path) >= (int)sizeof config_path) return -1;
    size_t length = 0;
    unsigned char *text = read_file(config_path, &length, 16u << 20, error, sizeof error, "the voice's config");
    if (!text) return -1;
    pj_value *config = pj_parse((const char *)text, length, error, sizeof error);
    free(text);
    if (!config) return -1;
    *trained = piper_espeak_kind(pj_string(pj_get(config, "piper_version")));
    pj_free(config);
    int speaking = piper_espeak_where(*trained, program_directory, used, used_size);
    return speaking == *trained ? 1 : 0;
}

static parla_piper_voice *load_voice(const char *model_path, int warm, char *error, size_t error_size) {
    error[0] = 0;
    last_load_wanted_runtime = 0;
    char config_path[4200];
    if (snprintf(config_path, sizeof config_path, "%s.json", model_path) >= (int)sizeof config_path) {
        snprintf(error, error_size, "the voice's path is too long");
        return NULL;
    }
    size_t config_length = 0;
    unsigned char *config_text = read_file(config_path, &config_length, 16u << 20, error, error_size, "the voice's config");
    if (!config_text) return NULL;
    char why[300];
    pj_value *config = pj_parse((const char *)config_text, config_length, why, sizeof why);
    free(config_text);
    if (!config) {
        snprintf(error, error_size, "the voice's config %s is not valid JSON (%s)", config_path, why);
        return NULL;
    }
    parla_piper_voice *v = calloc(1, sizeof *v);
    if (!v) { pj_free(config); snprintf(error, error_size, "out of memory"); return NULL; }
    const char *espeak_voice = pj_string(pj_get(pj_get(config, "espeak"), "voice"));
    double rate = pj_number(pj_get(pj_get(config, "audio"), "sample_rate"), 0);
    const pj_value *inference = pj_get(config, "inference");
    v->noise_scale = (float)pj_number(pj_get(inference, "noise_scale"), 0.667);
    v->length_scale = (float)pj_number(pj_get(inference, "length_scale"), 1.0);
    v->noise_w = (float)pj_number(pj_get(inference, "noise_w"), 0.8);
    int speakers = (int)pj_number(pj_get(config, "num_speakers"), 1);
    if (!espeak_voice || !*espeak_voice || strlen(espeak_voice) >= sizeof v->espeak_voice) {
        snprintf(error, error_size, "the voice's config %s names no espeak-ng voice (espeak.voice)", config_path);
    } else if (!(rate >= 8000 && rate <= 96000)) {
        snprintf(error, error_size, "the voice's config %s has no usable sample rate (audio.sample_rate)", config_path);
    } else if (!(v->length_scale > 0.05f && v->length_scale < 20) || !(v->noise_scale >= 0 && v->noise_scale < 10) || !(v->noise_w >= 0 && v->noise_w < 10)) {
        snprintf(error, error_size, "the voice's config %s has inference scales out of range", config_path);
    } else {
        strcpy(v->espeak_voice, espeak_voice);
        v->espeak_kind = piper_espeak_kind(pj_string(pj_get(config, "piper_version")));
        v->sample_rate = (int)rate;
        char map_error[300];
        v->map = piper_id_map_create(pj_get(config, "phoneme_id_map"), map_error, sizeof map_error);
        if (!v->map) snprintf(error, error_size, "the voice's config %s: %s", config_path, map_error);
    }
    pj_free(config);
    if (error[0]) { parla_piper_free(v); return NULL; }

    // The espeak-ng that phonemizes is loaded, and (its own: the system's is the engine's to
    // select) its voice selected, on a thread of its own while this one loads ONNX Runtime
    // (2–3 ms beside 17), and the decoder's reach is read (6 ms). A process that forks children
    // to speak (the engine host, render workers) gives them both; the thread is joined before
    // anything else touches espeak-ng.
    pthread_t espeak_thread;
    v->loading = model_path;
    int espeak_apart = pthread_create(&espeak_thread, NULL, load_espeak, v) == 0;
    if (!espeak_apart) load_espeak(v);
    const char *threads_text = getenv("PARLA_PIPER_THREADS");
    int threads = threads_text && atoi(threads_text) > 0 ? atoi(threads_text) : 1;
    struct stat model_stat;
    int readable = stat(model_path, &model_stat) == 0;
    if (!readable) snprintf(error, error_size, "the voice's model %s cannot be read (%s)", model_path, strerror(errno));
    int ok_rt = readable && piper_runtime_load(error, error_size);
    if (espeak_apart) pthread_join(espeak_thread, NULL);
    v->loading = NULL;
    if (!readable) {
        parla_piper_free(v);
        return NULL;
    }
    if (!ok_rt) {
        last_load_wanted_runtime = 1;
        parla_piper_free(v);
        return NULL;
    }
    char prepared_path[PATH_MAX + 300];
    int cacheable = cache_path(model_path, &model_stat, prepared_path, sizeof prepared_path);
    if (cacheable) snprintf(v->prepared_path, sizeof v->prepared_path, "%s", prepared_path);
    warm_input cached = warm && cacheable ? warm_input_read(v) : (warm_input){ 0 };
    float cached_peak = 0;
    int decoded = 0;
    if (cacheable && load_prepared(v, prepared_path, threads, cached.made ? &cached : NULL, &cached_peak, &decoded)) {
        if (warm) warm_up_loaded(v, decoded ? &cached : NULL, cached_peak);
        warm_input_free(&cached);
        malloc_trim(0);
        return v;
    }
    warm_input_free(&cached);
    size_t model_length = 0;
    unsigned char *model = read_file(model_path, &model_length, 2u << 30, error, error_size, "the voice's model");
    if (!model) { parla_piper_free(v); return NULL; }
    char ceil[512];
    int found = piper_find_ceil_output(model, model_length, ceil, sizeof ceil);
    if (found < 0) {
        free(model);
        snprintf(error, error_size, "the voice's model %s is damaged or not an ONNX model", model_path);
        parla_piper_free(v);
        return NULL;
    }
    v->exact_timing = found == 1;
    // Split at the decoder (and the flow), to be decoded a chunk at a time; or, if the graph
    // does not split, the whole voice, spoken a sentence at a time. PARLA_PIPER_WHOLE=1 asks for
    // the whole voice (for measuring the one against the other).
    piper_split split;
    char why_whole[300];  // parla voices says why (parla_piper_model_streams)
    const char *whole_asked = getenv("PARLA_PIPER_WHOLE");
    int splits = whole_asked && strcmp(whole_asked, "1") == 0
                     ? 0
                     : piper_split_model(model, model_length, found == 1 ? ceil : NULL, 0x5EED, &split, why_whole, sizeof why_whole);
    unsigned char *prepared[PARTS] = { NULL, NULL, NULL }, *linear_decoder = NULL;
    size_t prepared_length[PARTS] = { 0, 0, 0 }, linear_length = 0;
    if (splits == 1) {
        prepared[ENCODER] = split.encoder, prepared_length[ENCODER] = split.encoder_length;
        prepared[FLOW] = split.flow, prepared_length[FLOW] = split.flow_length;
        prepared[DECODER] = split.decoder, prepared_length[DECODER] = split.decoder_length;
        // Its convolutions on planes (piper_model.c), unless PARLA_PIPER_PLANAR=0 (for measuring);
        // the decoder as it was is kept in case ONNX Runtime will not take the rewrite.
        const char *planar_asked = getenv("PARLA_PIPER_PLANAR");
        size_t planar_length = 0;
        unsigned char *planar = planar_asked && strcmp(planar_asked, "0") == 0
                                    ? NULL
                                    : piper_planar_decoder(split.decoder, split.decoder_length, &planar_length);
        if (planar) {
            linear_decoder = split.decoder, linear_length = split.decoder_length;
            prepared[DECODER] = planar, prepared_length[DECODER] = planar_length;
        }
    } else {
        prepared[ENCODER] = piper_rewrite_model(model, model_length, found == 1 ? ceil : NULL, 0x5EED, &prepared_length[ENCODER]);
    }
    free(model);
    if (!prepared[ENCODER]) {
        for (int p = 0; p < PARTS; p++) free(prepared[p]);
        free(linear_decoder);
        snprintf(error, error_size, "the voice's model %s is damaged (its graph cannot be read)", model_path);
        parla_piper_free(v);
        return NULL;
    }
    char session_error[1500];
    session_error[0] = 0;
    // Saved, in ONNX Runtime's format, for the next load: under temporary names, renamed once
    // whole (the encoder last: an encoder is found with its parts, or not at all).
    char saving[PARTS][PATH_MAX + 350], saved[PARTS][PATH_MAX + 310];
    int save = cacheable;
    for (int p = 0; p < PARTS; p++) {
        save &= snprintf(saving[p], sizeof saving[p], "%s%s.%d.tmp", prepared_path, part_suffix[p], (int)getpid()) < (int)sizeof saving[p];
        snprintf(saved[p], sizeof saved[p], "%s%s", prepared_path, part_suffix[p]);
    }
    piper_session *sessions[PARTS] = { NULL, NULL, NULL };
    for (int attempt = 0; attempt < 2 && !sessions[ENCODER]; attempt++) {
        if (attempt == 1) {
            if (!save) break;
            // Perhaps the cache cannot be written: without it.
            for (int p = 0; p < PARTS; p++) unlink(saving[p]);
            save = 0;
            session_error[0] = 0;
        }
        if (save) make_directories(saving[ENCODER]);
        int made = 1;
        for (int p = 0; p < PARTS && made; p++) {
            if (!prepared[p]) continue;
            sessions[p] = piper_session_create(prepared[p], prepared_length[p], threads, 0, save ? saving[p] : NULL, session_error, sizeof session_error);
            if (!sessions[p] && p == DECODER && linear_decoder) {
                // ONNX Runtime did not take the planar decoder: the decoder as it was.
                free(prepared[DECODER]);
                prepared[DECODER] = linear_decoder, prepared_length[DECODER] = linear_length, linear_decoder = NULL;
                session_error[0] = 0;
                sessions[p] = piper_session_create(prepared[p], prepared_length[p], threads, 0, save ? saving[p] : NULL, session_error, sizeof session_error);
            }
            made = sessions[p] != NULL;
        }
        // PARLA_PIPER_FAIL_SPLIT=1 takes split parts for parts that do not fit (for the tests).
        const char *misfit = getenv("PARLA_PIPER_FAIL_SPLIT");
        if (!made || !parts_fit(sessions) || (splits == 1 && misfit && strcmp(misfit, "1") == 0)) {
            for (int p = 0; p < PARTS; p++) piper_session_free(sessions[p]), sessions[p] = NULL;
            if (!session_error[0]) snprintf(session_error, sizeof session_error, "its split parts do not take the inputs expected");
        }
    }
    if (!sessions[ENCODER] && splits == 1 && !strstr(session_error, "ONNX Runtime (libonnxruntime") && !strstr(session_error, "is not an ONNX Runtime")) {
        // The split parts are not what ONNX Runtime takes, or do not fit together (a graph of
        // an unexpected shape): the voice whole, spoken a sentence at a time, not kept.
        for (int p = 0; p < PARTS; p++) free(prepared[p]), prepared[p] = NULL;
        free(linear_decoder), linear_decoder = NULL;
        char whole_error[300];
        unsigned char *again = read_file(model_path, &model_length, 2u << 30, whole_error, sizeof whole_error, "the voice's model");
        if (again) {
            prepared[ENCODER] = piper_rewrite_model(again, model_length, found == 1 ? ceil : NULL, 0x5EED, &prepared_length[ENCODER]);
            free(again);
        }
        if (prepared[ENCODER]) {
            char split_error[sizeof session_error];
            snprintf(split_error, sizeof split_error, "%s", session_error);
            sessions[ENCODER] = piper_session_create(prepared[ENCODER], prepared_length[ENCODER], threads, 0, NULL, session_error, sizeof session_error);
            if (sessions[ENCODER] && !parts_fit(sessions)) piper_session_free(sessions[ENCODER]), sessions[ENCODER] = NULL;
            if (!sessions[ENCODER] && !session_error[0]) snprintf(session_error, sizeof session_error, "%s", split_error);
        }
        save = 0;
    }
    for (int p = 0; p < PARTS; p++) v->part[p].session = sessions[p];
    if (save && sessions[ENCODER]) {
        int renamed = 1;
        for (int p = PARTS - 1; p >= 0 && renamed; p--)
            if (sessions[p]) renamed = rename(saving[p], saved[p]) == 0;
        if (renamed) remove_older_copies(prepared_path);
        else for (int p = 0; p < PARTS; p++) unlink(saving[p]);
    }
    for (int p = 0; p < PARTS; p++) free(prepared[p]);
    free(linear_decoder);
    if (!sessions[ENCODER]) {
        if (strstr(session_error, "ONNX Runtime (libonnxruntime") || strstr(session_error, "is not an ONNX Runtime"))
            snprintf(error, error_size, "%s", session_error);
        else
            snprintf(error, error_size, "the voice's model %s cannot be loaded: %s", model_path, session_error);
        parla_piper_free(v);
        return NULL;
    }
    // The file's bytes, the rewritten copy and ONNX Runtime's parse were all in the heap at
    // once: give back what is free (29 MB of the 144 MB resident after loading joe).
    malloc_trim(0);
    if (speakers > 1 && !piper_session_has_speaker(v->part[ENCODER].session)) {
        snprintf(error, error_size, "the voice's config %s says it has %d speakers, but its model takes no speaker id: the config is not this model's", config_path, speakers);
        parla_piper_free(v);
        return NULL;
    }
    if (warm) warm_up_loaded(v, NULL, 0);
    return v;
}

parla_piper_voice *parla_piper_load(const char *model_path, char *error, size_t error_size) { return load_voice(model_path, 0, error, error_size); }

parla_piper_voice *parla_piper_load_warm(const char *model_path, char *error, size_t error_size) {
    return load_voice(model_path, 1, error, error_size);
}

// How a sentence's latent is cut into chunks. Live speech starts with a short chunk (some 0.19
// s of audio) so that the first sound comes soon, then doubles each chunk up to LIVE_MOST,
// which keeps the work per chunk ahead of the audio it gives (joe, 2 cores, one thread: the
// second chunk's flow and decoder take some 37 ms while the first one's 186 ms play). The
// first chunk is most of the first sound's wait: an Orca focus message ("Bravo push button.")
// through speech-dispatcher was first heard 67.0 ms after SPEAK with 32 frames, 60.6 with 16
// (medians; the encoder's 14 ms and the voice's own 22 ms of quiet lead-in stay). Smaller
// first chunks make the first word's mark late: a word is timed once the next one starts, and
// that takes more chunks (8 frames, then 8, 16, ...: first heard at 56.2 ms, but the first
// mark 78 ms after its word against 32 ms with 32 frames and 2.3 ms for the others; with 16,
// the marks' p95 is 34.9 ms). Rendering decodes RENDER_CHUNK frames at a time, which bounds a
// render worker's memory whatever the sentences' length. Render CPU
// and worker peak for 30 quotations with joe (63 MB; planar decoder, padding 12, no memory
// pattern): 256 frames 68.3 ms per second of audio, 196 MB; 128 frames 68.9, 161 MB; 96
// frames 71.9, 152 MB; 64 frames 74.9, 144 MB. PARLA_PIPER_RENDER_CHUNK=N trades the one for
// the other. Each chunk is decoded with the frames of the latent that its samples depend on
// either side, whose audio is dropped, so a chunk's samples are those of the whole sentence
// decoded at once, within float rounding: that reach is read from the decoder's graph when the
// voice loads (piper_decoder_context; joe: 11 frames either side), or is PADDING where the
// graph is not one that can be followed. A tail shorter than SMALLEST_TAIL joins the chunk
// before it. The flow, where it is apart, is run on the frames each chunk needs with
// FLOW_PADDING frames of context either side: its four coupling layers of four convolutions of
// width 5 see 32 frames either side (joe: the same floats as the whole sentence's flow at 32,
// 2e-4 apart at 24); rendering runs it on the whole sentence at once.
enum { LIVE_FIRST = 16, LIVE_MOST = 256, RENDER_CHUNK = 96, PADDING = 14, SMALLEST_TAIL = 24, FLOW_PADDING = 32 };

// ONNX Runtime's first run of a session is slow: "Hello there," (27 ids) took 80 to 100 ms of
// inference as a session's first run and 45 to 60 ms after one run of a 45-id sentence (joe,
// 2 threads, inside the live benchmark; the live onset went from 101-107 to 66-71 ms). What
// that run saves grows with its length: a run of 3 or 5 ids saved nothing, 17 ids some 15 ms.
// A run on another session of the same model, or memory touched in advance, saved nothing.
// So every session makes one run of a short sentence (31 ids) before its first real one: the
// threaded spare child of the engine host while it waits for an utterance, any other process
// (a render worker's child) just before it first speaks. The model's noise is seeded when the
// session is made and goes on from run to run, so every session starting with the same run
// keeps the same text giving the same samples on every path. (A render worker does not warm
// the voice it loads for its children: its arena would then hold the run's buffers, 35 MB
// more per worker.)
static const char warm_up_phonemes[] = "ðə sˈʌn ɪz ʌp.";  // "The sun is up."

// The level of the voice: Piper brought each sentence to full scale, which needs the whole
// sentence before its first sample, and left samples at full scale. A streamed sentence is
// scaled by one gain per voice instead: the warm-up sentence's peak is brought to LEVEL, and a
// soft limiter above KNEE keeps louder peaks below full scale, sample by sample (so the same in
// any chunking).
#define LEVEL 0.5f
#define KNEE 0.8f

static float limit(float x) {
    float a = fabsf(x);
    if (!(a > KNEE)) return isfinite(x) ? x : 0;
    float y = KNEE + (1 - KNEE) * tanhf((a - KNEE) / (1 - KNEE));
    if (y > 0.9995f) y = 0.9995f;
    return x < 0 ? -y : y;
}

static void warm_input_free(warm_input *in) {
    free(in->first);
    free(in->side);
    *in = (warm_input){ 0 };
}

// Runs the warm-up sentence through the encoder `encoder`; made is 0 if it failed (the real
// run meets the failure again, and reports it).
static warm_input warm_up_encode(parla_piper_voice *v, piper_session *encoder) {
    int64_t ids[64];
    size_t count = piper_id_map_ids(v->map, warm_up_phonemes, ids, sizeof ids / sizeof ids[0]);
    float scales[3] = { v->noise_scale, v->length_scale, v->noise_w };
    float *durations = NULL;
    char error[300];
    warm_input in = { .channels = 1 };
    in.made = piper_session_run(encoder, ids, count, scales, 0, &in.first, &in.samples, &in.channels, &durations, &in.side, &in.side_channels,
                                error, sizeof error) == 0;
    free(durations);
    if (!in.made) warm_input_free(&in);
    return in;
}

// Runs the encoder's output `in` through the flow and the decoder of `sessions`, where it has
// them (a whole voice has neither: its encoder's output is the audio); returns the peak of the
// audio (0 if a part failed). Neither part draws noise: the same input gives the same audio,
// whenever it is run.
static float warm_up_decode(piper_session *const sessions[PARTS], const warm_input *in) {
    if (!in->made) return 0;
    float *latent = NULL, *audio = NULL;
    size_t samples = in->samples;
    int64_t channels = in->channels;
    const float *input = in->first;
    char error[300];
    if (sessions[FLOW]) {
        size_t n = 0;
        if (in->channels <= 0 ||
            piper_session_frames(sessions[FLOW], in->first, in->channels, in->side, in->side_channels, (int64_t)in->samples / in->channels, 0,
                                 &latent, &n, &channels, error, sizeof error) != 0)
            return 0;
        input = latent, samples = n;
    }
    if (sessions[DECODER] && samples && channels > 0) {
        size_t decoded = 0;
        if (piper_session_frames(sessions[DECODER], input, channels, NULL, 0, (int64_t)samples / channels, 0, &audio, &decoded, NULL, error,
                                 sizeof error) != 0)
            decoded = 0;
        input = audio, samples = decoded;
    }
    float peak = 0;
    for (size_t i = 0; input && i < samples; i++)
        if (fabsf(input[i]) > peak && isfinite(input[i])) peak = fabsf(input[i]);
    free(latent);
    free(audio);
    return peak;
}

// Runs the warm-up sentence through `sessions` (the voice's parts, or new sessions of them);
// returns the peak of its audio (0 if a part failed: the real run meets the failure again,
// and reports it).
static float warm_up_run(parla_piper_voice *v, piper_session *const sessions[PARTS]) {
    warm_input in = warm_up_encode(v, sessions[ENCODER]);
    float peak = warm_up_decode(sessions, &in);
    warm_input_free(&in);
    return peak;
}

static void warm_up(parla_piper_voice *v) {
    if (v->warmed) return;
    v->warmed = 1;
    piper_session *sessions[PARTS] = { v->part[ENCODER].session, v->part[FLOW].session, v->part[DECODER].session };
    float peak = warm_up_run(v, sessions);
    v->reference = peak > 0.01f ? peak : 1;
}

// The encoder's output for the warm-up sentence, kept beside the prepared copy (PATH.warm) so
// that a later load can run the warm-up's flow and decoder (which draw no noise) on the second
// thread while the encoder's session is made (joe: their runs took 13 and 40 ms of the
// warm-up's 64, beside the encoder session's 51). The encoder's own run still comes first of
// the voice's runs, as its noise must, and its output is checked against the file: the level
// taken from the file's run is used only where they are the same to the bit.
static const char warm_magic[8] = { 'P', 'A', 'R', 'L', 'A', 'W', 'U', '1' };

static int warm_path(const parla_piper_voice *v, char *out, size_t size) {
    return v->prepared_path[0] && snprintf(out, size, "%s.warm", v->prepared_path) < (int)size;
}

static size_t side_floats(const warm_input *in) {
    return in->channels > 0 && in->side ? (size_t)(in->samples / (size_t)in->channels) * (size_t)(in->side_channels > 0 ? in->side_channels : 0) : 0;
}

static warm_input warm_input_read(const parla_piper_voice *v) {
    warm_input in = { 0 };
    char path[PATH_MAX + 320];
    if (!warm_path(v, path, sizeof path)) return in;
    size_t length = 0;
    unsigned char *bytes = map_file(path, &length);
    if (!bytes) return in;
    int64_t header[4];  // channels, samples, side channels, side floats
    if (length >= sizeof warm_magic + sizeof header && memcmp(bytes, warm_magic, sizeof warm_magic) == 0) {
        memcpy(header, bytes + sizeof warm_magic, sizeof header);
        size_t first_bytes = (size_t)header[1] * sizeof(float), side_bytes = (size_t)header[3] * sizeof(float);
        if (header[0] > 0 && header[0] < 4096 && header[1] > 0 && header[1] < (1 << 24) && header[2] >= 0 && header[2] < 4096 && header[3] >= 0 &&
            header[3] < (1 << 24) && length == sizeof warm_magic + sizeof header + first_bytes + side_bytes) {
            in.channels = header[0], in.samples = (size_t)header[1], in.side_channels = header[2];
            in.first = malloc(first_bytes);
            in.side = side_bytes ? malloc(side_bytes) : NULL;
            if (in.first && (in.side || !side_bytes)) {
                memcpy(in.first, bytes + sizeof warm_magic + sizeof header, first_bytes);
                if (side_bytes) memcpy(in.side, bytes + sizeof warm_magic + sizeof header + first_bytes, side_bytes);
                in.made = side_floats(&in) == (size_t)header[3];
            }
            if (!in.made) warm_input_free(&in);
        }
    }
    munmap(bytes, length);
    return in;
}

static void warm_input_write(const parla_piper_voice *v, const warm_input *in) {
    char path[PATH_MAX + 320], temporary[PATH_MAX + 340];
    if (!in->made || !warm_path(v, path, sizeof path)) return;
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(temporary, "wb");
    if (!f) return;
    int64_t header[4] = { in->channels, (int64_t)in->samples, in->side_channels, (int64_t)side_floats(in) };
    int ok = fwrite(warm_magic, 1, sizeof warm_magic, f) == sizeof warm_magic && fwrite(header, sizeof header, 1, f) == 1 &&
             fwrite(in->first, sizeof(float), in->samples, f) == in->samples &&
             (!header[3] || fwrite(in->side, sizeof(float), (size_t)header[3], f) == (size_t)header[3]);
    ok &= fclose(f) == 0;
    if (!ok || rename(temporary, path) != 0) unlink(temporary);
}

static int warm_input_same(const warm_input *a, const warm_input *b) {
    return a->made && b->made && a->channels == b->channels && a->samples == b->samples && a->side_channels == b->side_channels &&
           memcmp(a->first, b->first, a->samples * sizeof(float)) == 0 &&
           (side_floats(a) == 0 || memcmp(a->side, b->side, side_floats(a) * sizeof(float)) == 0);
}

// Warms a voice just loaded: the encoder's run here; the flow's and decoder's, where
// load_prepared ran them on `cached` beside the encoder's session (`cached_peak`), are taken
// from there if the encoder gives `cached` again, else run now. The file is written, for a
// voice with a decoder, when there was none or it differs.
static void warm_up_loaded(parla_piper_voice *v, const warm_input *cached, float cached_peak) {
    if (v->warmed) return;
    v->warmed = 1;
    piper_session *sessions[PARTS] = { v->part[ENCODER].session, v->part[FLOW].session, v->part[DECODER].session };
    warm_input in = warm_up_encode(v, sessions[ENCODER]);
    int same = cached && warm_input_same(&in, cached);
    float peak = same ? cached_peak : warm_up_decode(sessions, &in);
    v->reference = peak > 0.01f ? peak : 1;
    if (!same && sessions[DECODER]) warm_input_write(v, &in);
    warm_input_free(&in);
}

void parla_piper_warm_up(parla_piper_voice *v) {
    if (v) warm_up(v);
}

int parla_piper_rethread(parla_piper_voice *v, int threads) {
    if (!v || threads < 1 || !v->prepared_path[0]) return 0;
    piper_session *sessions[PARTS] = { NULL, NULL, NULL };
    int made = 1;
    for (int p = 0; p < PARTS && made; p++) {
        voice_part *vp = &v->part[p];
        if (!vp->session) continue;
        if (!vp->mapped) {
            // Loaded from the model itself: its prepared copy was saved then.
            char path[PATH_MAX + 310];
            snprintf(path, sizeof path, "%s%s", v->prepared_path, part_suffix[p]);
            if (!(vp->mapped = map_file(path, &vp->mapped_length))) { made = 0; break; }
        }
        char error[1500];
        error[0] = 0;
        made = (sessions[p] = piper_session_create(vp->mapped, vp->mapped_length, threads, 1, NULL, error, sizeof error)) != NULL;
    }
    // A session's first run is slow: the new ones make theirs before they replace the old ones
    // (the encoder's noise then goes on as the old one's did after its own).
    if (!made || !parts_fit(sessions) || piper_session_has_durations(sessions[ENCODER]) != piper_session_has_durations(v->part[ENCODER].session)) {
        for (int p = 0; p < PARTS; p++) piper_session_free(sessions[p]);
        return 0;
    }
    float peak = warm_up_run(v, sessions);
    if (!v->warmed) v->reference = peak > 0.01f ? peak : 1;
    v->warmed = 1;
    for (int p = 0; p < PARTS; p++) {
        piper_session_free(v->part[p].session);
        v->part[p].session = sessions[p];
    }
    return 1;
}

void parla_piper_free(parla_piper_voice *v) {
    if (!v) return;
    release_parts(v);
    piper_id_map_free(v->map);
    free(v);
}

int parla_piper_sample_rate(const parla_piper_voice *v) { return v->sample_rate; }
int parla_piper_exact_timing(const parla_piper_voice *v) { return v->exact_timing; }

// MARK: Speaking


static size_t env_size(const char *name, size_t fallback) {
    const char *text = getenv(name);
    long n = text ? atol(text) : 0;
    return n > 0 && n < 100000 ? (size_t)n : fallback;
}

typedef struct {
    parla_piper_voice *voice;
    const parla_piper_output *out;
    float scales[3];       // the model's scales: its length_scale gives `model` of the speed
    float natural_scale;   // the voice's own length_scale
    double asked;          // the speed asked for: the rate / 175
    double model;          // the part of it the model's length_scale gives (see MODEL_MOST)
    float pitch;           // the pitch asked for (a multiplier; 1: the voice's)
    piper_stretch *stretch;  // the sentence's time-stretch and pitch shift (NULL: none)
    int stretch_failed;
    float gain;
    int live;
    size_t first_chunk, most_chunk, pad_back, pad_ahead, flow_padding;
    size_t fail_chunk;  // PARLA_PIPER_FAIL_CHUNK=N: the Nth chunk of a sentence fails (for tests)
    long long samples;  // delivered so far, at OUTPUT_RATE
    char *error;
    size_t error_size;
} speaking;

// A sentence on its way out: its audio at the voice's rate as it is decoded, turned into
// OUTPUT_RATE samples and handed out in blocks, each followed by the events that fall in it.
typedef struct {
    speaking *sp;
    const piper_sentence *s;
    float *audio;          // the sentence, at the voice's rate
    size_t length;         // its samples
    size_t available;      // decoded so far
    double ratio;          // OUTPUT_RATE / the voice's rate
    size_t out_count;      // the sentence's samples at OUTPUT_RATE
    size_t next;           // the next OUTPUT_RATE sample to hand out
    size_t skip, end;      // what is handed out: [skip, end)
    int *event_samples;    // from skip
    int *order;            // the word of each event (-1: the sentence)
    size_t events, next_event;
    float scale;
    long long delivered;   // the sentence's samples handed to the output (after any stretch)
} outgoing;

// Works out where the sentence's events fall, once its length is known.
static int plan_events(outgoing *o, const float *durations) {
    const piper_sentence *s = o->s;
    o->out_count = o->ratio == 1 ? o->length : (size_t)((double)o->length * o->ratio);
    o->event_samples = malloc((s->word_count + 1) * sizeof *o->event_samples);
    o->order = malloc((s->word_count + 1) * sizeof *o->order);
    long double *starts = malloc((s->id_count + 1) * sizeof *starts);
    if (!o->event_samples || !o->order || !starts) { free(starts); return 0; }
    // Each id's start, in output samples: the frames before it, scaled to the audio's length.
    long double total = 0;
    for (size_t i = 0; i < s->id_count; i++) {
        starts[i] = total;
        float d = durations ? durations[i] : 1;
        total += d > 0 && isfinite(d) ? d : 0;
    }
    long double per_frame = total > 0 ? (long double)o->out_count / total : 0;
    int sentence_sample = -1;
    for (size_t w = 0; w < s->word_count; w++) {
        if (s->words[w].first_id < 0 || (size_t)s->words[w].first_id >= s->id_count) continue;
        int sample = (int)(starts[s->words[w].first_id] * per_frame);
        if (sentence_sample < 0) {
            sentence_sample = sample;
            if (s->sentence_position > 0 && !s->continues) {
                o->event_samples[o->events] = sample;
                o->order[o->events++] = -1;
            }
        }
        o->event_samples[o->events] = sample;
        o->order[o->events++] = (int)w;
    }
    // The rest of a sentence whose first clause went ahead alone starts where its first phoneme
    // does: the model's lead-in silence there would lengthen the clause's pause (by some 45 ms).
    // Likewise the clause itself ends before the model's closing silence (its last id, EOS).
    o->end = o->out_count;
    if (s->continues && s->id_count > 2) o->skip = (size_t)(starts[2] * per_frame);
    if (s->goes_on && s->id_count > 1) {
        size_t end = (size_t)(starts[s->id_count - 1] * per_frame);
        if (end < o->end) o->end = end;
    }
    if (o->skip > o->end) o->skip = o->end;
    for (size_t e = 0; e < o->events; e++) o->event_samples[e] = o->event_samples[e] > (int)o->skip ? o->event_samples[e] - (int)o->skip : 0;
    free(starts);
    return 1;
}

// Passes on the events that the audio handed out so far has reached (all of them with `all`).
// Through a stretch, an event's sample is mapped by its speed.
static void pass_events(outgoing *o, int all) {
    speaking *sp = o->sp;
    int estimated = o->s->estimated || !sp->voice->exact_timing ? PARLA_PIPER_ESTIMATED : 0;
    double speed = sp->stretch ? piper_stretch_speed(sp->stretch) : 1;
    while (o->next_event < o->events) {
        long long at = o->event_samples[o->next_event];
        if (sp->stretch) at = llround((double)at / speed);
        if (at >= o->delivered && !all) break;
        if (sp->stretch && at > o->delivered) at = o->delivered;
        int w = o->order[o->next_event];
        int sample = (int)(sp->samples + at);
        if (w < 0) sp->out->event(sp->out->context, 2 | estimated, o->s->sentence_position, 0, sample);
        else {
            const struct piper_word *word = &o->s->words[w];
            sp->out->event(sp->out->context, 1 | estimated, word->position, word->length, sample);
            if (sp->out->phonemes && word->ipa_length > 0) sp->out->phonemes(sp->out->context, word->position, word->ipa, word->ipa_length);
        }
        o->next_event++;
    }
}

// Hands `n` samples to the output, through the sentence's stretch if it has one (`flush`: the
// sentence's last, after which all it holds comes out).
static void deliver(outgoing *o, int16_t *block, size_t n, int flush) {
    speaking *sp = o->sp;
    if (!sp->stretch) {
        if (n) sp->out->audio(sp->out->context, block, (int)n);
        o->delivered += (long long)n;
        return;
    }
    if ((n && !piper_stretch_write(sp->stretch, block, (int)n)) || (flush && !piper_stretch_flush(sp->stretch))) {
        sp->stretch_failed = 1;
        return;
    }
    int16_t out[2048];
    for (int got; (got = piper_stretch_read(sp->stretch, out, (int)(sizeof out / sizeof out[0]))) > 0;) {
        sp->out->audio(sp->out->context, out, got);
        o->delivered += got;
    }
}

// Hands out what the audio decoded so far allows (all of it when `last`).
static void hand_out(outgoing *o, int last) {
    speaking *sp = o->sp;
    // Output sample i reads the voice's samples i / ratio and the one after it.
    size_t ready = o->end;
    if (!last) {
        if (o->available < 2) return;
        ready = o->ratio == 1 ? o->available : (size_t)((double)(o->available - 1) * o->ratio);
        if (ready > o->end) ready = o->end;
    }
    if (o->next < o->skip) o->next = o->skip < ready ? o->skip : ready;
    int16_t block[2048];
    for (;;) {
        size_t n = 0;
        for (; n < sizeof block / sizeof block[0] && o->next < ready; n++, o->next++) {
            size_t i = o->next;
            double t = o->ratio == 1 ? (double)i : (double)i / o->ratio;
            size_t k = (size_t)t;
            double f = t - (double)k;
            float a = k < o->available ? o->audio[k] : 0, b = k + 1 < o->available ? o->audio[k + 1] : a;
            block[n] = (int16_t)lrintf(limit((float)((a + (b - a) * f) * o->scale)) * 32767.0f);
        }
        int done = o->next >= ready;
        deliver(o, block, n, last && done);
        pass_events(o, last && done);
        if (done || sp->stretch_failed) break;
    }
}

static int fail(speaking *sp, const char *what) {
    size_t n = strlen(sp->error);
    if (strstr(sp->error, "indices") || strstr(sp->error, "out of bounds") || strstr(sp->error, "Gather"))
        snprintf(sp->error + n, sp->error_size - n, " (the voice's .onnx.json may not belong to its model)");
    else if (what && !n) snprintf(sp->error, sp->error_size, "%s", what);
    return -1;
}

// Frames [from, to) of `tensor` ([channels][frames]), malloc'd; NULL if out of memory.
static float *frames_of(const float *tensor, int64_t channels, size_t frames, size_t from, size_t to) {
    float *out = malloc((size_t)channels * (to - from) * sizeof *out + 1);
    for (int64_t c = 0; out && c < channels; c++) memcpy(out + (size_t)c * (to - from), tensor + (size_t)c * frames + from, (to - from) * sizeof *out);
    return out;
}

// The flow's part of the latent: frames [*done, to) of `latent` ([*channels][frames], allocated
// on the first call), from the encoder's `first` and `side`, each frame with FLOW_PADDING frames of
// context either side (the flow then gives the frames the whole sentence's flow gives).
static int flow_frames(speaking *sp, const float *first, int64_t channels, const float *side, int64_t side_channels, size_t frames, size_t to,
                       float **latent, int64_t *latent_channels, size_t *done) {
    if (*done >= to) return 0;
    size_t from = *done > sp->flow_padding ? *done - sp->flow_padding : 0, end = to + sp->flow_padding < frames ? to + sp->flow_padding : frames;
    float *in = frames_of(first, channels, frames, from, end), *in_side = side ? frames_of(side, side_channels, frames, from, end) : NULL, *out = NULL;
    size_t count = 0;
    int64_t out_channels = 0;
    int rc = in && (in_side || !side) ? piper_session_frames(sp->voice->part[FLOW].session, in, channels, in_side, side_channels, (int64_t)(end - from), 0,
                                                             &out, &count, &out_channels, sp->error, sp->error_size)
                                      : (snprintf(sp->error, sp->error_size, "out of memory"), -1);
    free(in);
    free(in_side);
    if (rc == 0 && *latent && out_channels != *latent_channels) {
        snprintf(sp->error, sp->error_size, "the voice's flow gave %lld channels, then %lld", (long long)*latent_channels, (long long)out_channels);
        rc = -1;
    }
    if (rc == 0 && !*latent) {
        *latent_channels = out_channels;
        if (!(*latent = malloc((size_t)out_channels * frames * sizeof **latent + 1))) snprintf(sp->error, sp->error_size, "out of memory"), rc = -1;
    }
    for (int64_t c = 0; rc == 0 && c < out_channels; c++)
        memcpy(*latent + (size_t)c * frames + *done, out + (size_t)c * (end - from) + (*done - from), (to - *done) * sizeof **latent);
    free(out);
    if (rc == 0) *done = to;
    return rc;
}

static int speak_sentence(void *context, piper_sentence *s) {
    speaking *sp = context;
    parla_piper_voice *v = sp->voice;
    if (sp->out->should_stop(sp->out->context)) return PARLA_PIPER_STOPPED;
    float *first = NULL, *durations = NULL, *side = NULL, *latent = NULL;
    size_t count = 0;
    int64_t channels = 1, side_channels = 0, latent_channels = 0;
    // A length_scale other than the voice's does not change the sentence's length in
    // proportion (each id lasts a whole number of frames, and the short ones stay at one), so
    // the stretch makes up the rest, measured on this sentence: its frames at the voice's own
    // scale (one more run of the encoder, a small part of the cost) against those at the model's.
    double natural_frames = 0;
    if (sp->model != 1 && v->part[DECODER].session && piper_session_has_durations(v->part[ENCODER].session)) {
        float natural[3] = { sp->scales[0], sp->natural_scale, sp->scales[2] };
        float *f0 = NULL, *d0 = NULL, *s0 = NULL;
        size_t c0 = 0;
        int64_t ch0 = 1, sc0 = 0;
        int rc = piper_session_run(v->part[ENCODER].session, s->ids, s->id_count, natural, 0, &f0, &c0, &ch0, &d0, &s0, &sc0, sp->error, sp->error_size);
        for (size_t i = 0; rc == 0 && d0 && i < s->id_count; i++) natural_frames += d0[i] > 0 && isfinite(d0[i]) ? d0[i] : 0;
        free(f0); free(d0); free(s0);
        if (rc != 0) return fail(sp, NULL);
    }
    if (piper_session_run(v->part[ENCODER].session, s->ids, s->id_count, sp->scales, 0, &first, &count, &channels, &durations, &side,
                          &side_channels, sp->error, sp->error_size) != 0)
        return fail(sp, NULL);
    double speed = sp->asked / sp->model;
    if (natural_frames > 0 && durations) {
        double frames_now = 0;
        for (size_t i = 0; i < s->id_count; i++) frames_now += durations[i] > 0 && isfinite(durations[i]) ? durations[i] : 0;
        if (frames_now > 0) speed = frames_now * sp->asked / natural_frames;
    }
    if (!(speed > 0.1 && speed < 20)) speed = sp->asked / sp->model;
    if ((fabs(speed - 1) > 0.005 || sp->pitch != 1) && piper_stretch_available()) {
        if (!(sp->stretch = piper_stretch_new(OUTPUT_RATE, (float)speed, sp->pitch))) {
            free(first); free(durations); free(side);
            return fail(sp, "out of memory");
        }
    }
    outgoing o = { .sp = sp, .s = s, .ratio = (double)OUTPUT_RATE / v->sample_rate, .scale = sp->gain * LEVEL / v->reference };
    int status = 0;
    if (!v->part[DECODER].session) {
        // The whole voice: the sentence's audio at once.
        o.audio = first;
        o.length = o.available = count;
        first = NULL;
        if (!plan_events(&o, durations)) status = fail(sp, "out of memory");
        else hand_out(&o, 1);
    } else {
        // The latent, decoded a chunk at a time, each handed out as soon as it is decoded; with
        // the flow apart, the latent is made a chunk ahead of the decoder.
        size_t frames = (size_t)(count / (size_t)channels), hop = 0, flowed = 0;
        int flow = v->part[FLOW].session != NULL;
        if (!flow) latent = first, first = NULL, latent_channels = channels;
        float *part = NULL;
        for (size_t a = 0, chunk = 0; a < frames && status == 0; chunk++) {
            size_t size = sp->live ? sp->first_chunk << (chunk < 12 ? chunk : 12) : sp->most_chunk;
            if (size > sp->most_chunk) size = sp->most_chunk;
            size_t b = a + size < frames ? a + size : frames;
            if (frames - b < SMALLEST_TAIL) b = frames;
            size_t from = a > sp->pad_back ? a - sp->pad_back : 0, to = b + sp->pad_ahead < frames ? b + sp->pad_ahead : frames;
            // Live speech makes the latent a chunk ahead (the first sound waits for no more);
            // rendering makes it all at once, which spares the flow's context on every chunk.
            if (flow && flow_frames(sp, first, channels, side, side_channels, frames, sp->live ? to : frames, &latent, &latent_channels, &flowed) != 0) {
                status = fail(sp, NULL);
                break;
            }
            float *input = frames_of(latent, latent_channels, frames, from, to);
            if (!input) { status = fail(sp, "out of memory"); break; }
            size_t decoded = 0;
            int rc = sp->fail_chunk == chunk + 1
                         ? (snprintf(sp->error, sp->error_size, "the voice's decoder failed on chunk %zu (PARLA_PIPER_FAIL_CHUNK)", chunk + 1), -1)
                         : piper_session_frames(v->part[DECODER].session, input, latent_channels, NULL, 0, (int64_t)(to - from), 0, &part,
                                                &decoded, NULL, sp->error, sp->error_size);
            free(input);
            if (rc != 0) { status = fail(sp, NULL); break; }
            if (chunk == 0) {  // the first chunk says how many samples a frame gives
                hop = decoded / (to - from);
                o.length = frames * hop;
                o.audio = malloc((o.length ? o.length : 1) * sizeof *o.audio);
                if (!o.audio || !plan_events(&o, durations)) status = fail(sp, "out of memory");
            }
            if (status == 0 && (!hop || decoded != (to - from) * hop)) {
                snprintf(sp->error, sp->error_size, "the voice's decoder gave %zu samples for %zu frames", decoded, to - from);
                status = -1;
            }
            if (status == 0) {
                memcpy(o.audio + a * hop, part + (a - from) * hop, (b - a) * hop * sizeof *o.audio);
                o.available = b * hop;
                hand_out(&o, b == frames);
            }
            free(part);
            part = NULL;
            a = b;
            if (status == 0 && a < frames && sp->out->should_stop(sp->out->context)) status = PARLA_PIPER_STOPPED;
        }
        if (status == 0 && frames == 0 && plan_events(&o, durations)) hand_out(&o, 1);
    }
    if (status == 0 && sp->stretch_failed) status = fail(sp, "out of memory (time-stretching)");
    if (status == 0) sp->samples += o.delivered;
    piper_stretch_free(sp->stretch);
    sp->stretch = NULL;
    free(o.audio); free(o.event_samples); free(o.order); free(first); free(durations); free(side); free(latent);
    return status;
}

int parla_piper_can_stretch(void) { return piper_stretch_available(); }

const char *parla_piper_stretch_path(void) { return piper_stretch_path(); }

int parla_piper_speak(parla_piper_voice *voice, const char *text, int rate, int pitch, int volume, int options,
                      const parla_piper_output *output, char *error, size_t error_size) {
    error[0] = 0;
    if (rate < PARLA_PIPER_RATE_MIN) rate = PARLA_PIPER_RATE_MIN;
    if (rate > PARLA_PIPER_RATE_MAX) rate = PARLA_PIPER_RATE_MAX;
    if (pitch < 0) pitch = 0;
    if (pitch > 100) pitch = 100;
    if (volume < 0) volume = 0;
    if (volume > 200) volume = 200;
    warm_up(voice);
    int live = (options & PARLA_PIPER_LIVE) != 0;
    // The speed: the model's length_scale gives up to MODEL_MOST of it (PARLA_PIPER_MODEL_SPEED),
    // the stretch the rest. A voice spoken a whole sentence at a time leaves it all to the
    // stretch (measuring the model's share would take a second run of the whole voice). Without
    // libsonic, the model gives it all, up to 450 words a minute, at the voice's pitch.
    double asked = rate / 175.0, model = asked, most = MODEL_MOST;
    const char *most_text = getenv("PARLA_PIPER_MODEL_SPEED");
    if (most_text && atof(most_text) >= 1 && atof(most_text) <= 10) most = atof(most_text);
    int stretch = piper_stretch_available();
    if (!stretch) {
        if (model > 450 / 175.0) model = 450 / 175.0;
    } else if (!voice->part[DECODER].session) {
        model = 1;
    } else if (model > most) {
        model = most;
    }
    speaking sp = {
        .voice = voice, .out = output,
        .scales = { voice->noise_scale, (float)(voice->length_scale / model), voice->noise_w },
        .natural_scale = voice->length_scale, .asked = stretch ? asked : model, .model = model,
        .pitch = stretch ? (float)pow(2.0, (pitch - 50) / 50.0) : 1,
        .gain = (float)volume / 100.0f, .live = live, .samples = 0, .error = error, .error_size = error_size,
        .first_chunk = env_size("PARLA_PIPER_FIRST_CHUNK", LIVE_FIRST),
        .most_chunk = env_size(live ? "PARLA_PIPER_MOST_CHUNK" : "PARLA_PIPER_RENDER_CHUNK", live ? LIVE_MOST : RENDER_CHUNK),
        .pad_back = env_size("PARLA_PIPER_PADDING", voice->context_known ? (size_t)voice->context_back : PADDING),
        .pad_ahead = env_size("PARLA_PIPER_PADDING", voice->context_known ? (size_t)voice->context_ahead : PADDING),
        .fail_chunk = env_size("PARLA_PIPER_FAIL_CHUNK", 0),
        .flow_padding = env_size("PARLA_PIPER_FLOW_PADDING", FLOW_PADDING),
    };
    int status = piper_phonemize(text, voice->espeak_kind, voice->espeak_voice, voice->map, options & PARLA_PIPER_EARLY_FIRST_CLAUSE, speak_sentence, &sp,
                                 error, error_size);
    if (status == PARLA_PIPER_STOPPED) return PARLA_PIPER_STOPPED;
    if (status != 0) {
        if (!error[0]) snprintf(error, error_size, "the Piper voice could not speak this text");
        return PARLA_PIPER_FAILED;
    }
    return output->should_stop(output->context) ? PARLA_PIPER_STOPPED : PARLA_PIPER_OK;
}
