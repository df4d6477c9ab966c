// ONNX Runtime, opened with dlopen the first time a Piper voice loads, and reached through its
// C API: a versioned table of function pointers (OrtGetApiBase). The table only ever grows at
// its end, so the slots used here, all present since API version 13, stay where they are; no
// header is needed (the PyPI wheel that carries the library has none).
#define _GNU_SOURCE
#include "piper_internal.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct OrtStatus OrtStatus;
typedef struct OrtEnv OrtEnv;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtValue OrtValue;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtAllocator OrtAllocator;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;

// Slots of the OrtApi table (0-based), and what they are.
enum {
    ORT_GET_ERROR_MESSAGE = 2, ORT_CREATE_ENV = 3, ORT_CREATE_SESSION_FROM_ARRAY = 8, ORT_RUN = 9,
    ORT_CREATE_SESSION_OPTIONS = 10, ORT_SET_EXECUTION_MODE = 13, ORT_DISABLE_MEM_PATTERN = 17, ORT_CREATE_RUN_OPTIONS = 39, ORT_RELEASE_RUN_OPTIONS = 97, ORT_ADD_RUN_CONFIG = 165, ORT_SET_OPTIMIZATION_LEVEL = 23,
    ORT_SET_OPTIMIZED_MODEL_PATH = 11, ORT_SET_INTRA_OP_THREADS = 24, ORT_SET_INTER_OP_THREADS = 25, ORT_SESSION_INPUT_COUNT = 30, ORT_SESSION_OUTPUT_COUNT = 31, ORT_SESSION_OUTPUT_NAME = 37,
    ORT_SESSION_INPUT_NAME = 36, ORT_CREATE_TENSOR_WITH_DATA = 49, ORT_GET_TENSOR_DATA = 51,
    ORT_GET_ELEMENT_TYPE = 60, ORT_GET_ELEMENT_COUNT = 64, ORT_GET_DIMENSIONS_COUNT = 61, ORT_GET_DIMENSIONS = 62, ORT_GET_TYPE_AND_SHAPE = 65, ORT_CREATE_CPU_MEMORY_INFO = 69,
    ORT_ALLOCATOR_FREE = 76, ORT_DEFAULT_ALLOCATOR = 78, ORT_RELEASE_ENV = 92, ORT_RELEASE_STATUS = 93,
    ORT_RELEASE_MEMORY_INFO = 94, ORT_RELEASE_SESSION = 95, ORT_RELEASE_VALUE = 96,
    ORT_RELEASE_TYPE_AND_SHAPE = 99, ORT_RELEASE_SESSION_OPTIONS = 100, ORT_ADD_SESSION_CONFIG = 130,
};
enum { ORT_API_VERSION_USED = 13, ORT_FLOAT = 1, ORT_INT64 = 7, ORT_LOG_ERROR = 3, ORT_OPTIMIZE_ALL = 99, ORT_ARENA = 1 };

typedef struct {
    void *(*get_api)(uint32_t version);
    const char *(*get_version)(void);
} ort_api_base;

static void *const *api;
static OrtEnv *env;
static OrtMemoryInfo *cpu_memory;
static char loaded_from[PATH_MAX];
static char runtime_version[64];
static char load_error[2048];
static int load_tried;

#define ORT(slot, type) ((type)api[slot])

const char *parla_piper_runtime_path(void) { return api ? loaded_from : NULL; }

// The status's message (into `error`), released; 1 if there was an error.
static int failed(OrtStatus *status, const char *doing, char *error, size_t error_size) {
    if (!status) return 0;
    const char *message = ORT(ORT_GET_ERROR_MESSAGE, const char *(*)(const OrtStatus *))(status);
    snprintf(error, error_size, "%s: %s", doing, message ? message : "unknown error");
    ORT(ORT_RELEASE_STATUS, void (*)(OrtStatus *))(status);
    return 1;
}

static void *try_open(const char *path, char *tried, size_t tried_size) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    size_t n = strlen(tried);
    if (!h && n + strlen(path) + 3 < tried_size) snprintf(tried + n, tried_size - n, "%s%s", n ? ", " : "", path);
    if (h) snprintf(loaded_from, sizeof loaded_from, "%s", path);
    return h;
}

int piper_runtime_load(char *error, size_t error_size) {
    if (api) return 1;
    if (load_tried) {
        snprintf(error, error_size, "%s", load_error);
        return 0;
    }
    load_tried = 1;
    // No setenv here (ORT_DISABLE_TELEMETRY): this runs beside the voice's espeak-ng thread,
    // whose getenv would read an environment array a growing setenv frees (it crashed the
    // engine host). The helper processes set it while they have one thread
    // (parla_helper_prepare_environment).
    char tried[1536] = { 0 };
    void *library = NULL;
    const char *explicit = getenv("PARLA_ONNXRUNTIME");
    if (explicit && *explicit) library = try_open(explicit, tried, sizeof tried);
    char exe[PATH_MAX], path[PATH_MAX + 64];
    if (!library && piper_program_directory(exe, sizeof exe)) {
        // Installed: PREFIX/bin/parla → PREFIX/lib/parla; PREFIX/libexec/parla/… → PREFIX/lib/parla.
        const char *places[] = { "%s/../lib/parla/libonnxruntime.so.1", "%s/../../lib/parla/libonnxruntime.so.1", "%s/libonnxruntime.so.1" };
        for (size_t i = 0; i < 3 && !library; i++) {
            snprintf(path, sizeof path, places[i], exe);
            if (access(path, R_OK) == 0) library = try_open(path, tried, sizeof tried);
        }
    }
    if (!library) library = try_open("libonnxruntime.so.1", tried, sizeof tried);
    if (!library) {
        // Where Parla's scripts/setup unpacks it.
        if (piper_cache_directory(exe, sizeof exe)) {
            snprintf(path, sizeof path, "%s/onnxruntime/libonnxruntime.so.1", exe);
            library = try_open(path, tried, sizeof tried);
        }
    }
    if (!library) {
        snprintf(load_error, sizeof load_error,
                 "Piper voices need ONNX Runtime (libonnxruntime.so.1), which was not found (tried %s). Install it: run "
                 "scripts/setup in Parla's source, which unpacks it from the onnxruntime wheel on PyPI; or install Parla's "
                 ".deb; or point PARLA_ONNXRUNTIME at a libonnxruntime.so.1",
                 tried);
        snprintf(error, error_size, "%s", load_error);
        return 0;
    }
    const ort_api_base *(*get_base)(void) = (const ort_api_base *(*)(void))dlsym(library, "OrtGetApiBase");
    const ort_api_base *base = get_base ? get_base() : NULL;
    void *const *table = base && base->get_api ? (void *const *)base->get_api(ORT_API_VERSION_USED) : NULL;
    if (!table) {
        snprintf(load_error, sizeof load_error, "%s is not an ONNX Runtime Parla can use (it needs version 1.13 or later)", loaded_from);
        snprintf(error, error_size, "%s", load_error);
        dlclose(library);
        return 0;
    }
    api = table;
    snprintf(runtime_version, sizeof runtime_version, "%s", base->get_version ? base->get_version() : "unknown");
    if (failed(ORT(ORT_CREATE_ENV, OrtStatus *(*)(int, const char *, OrtEnv **))(ORT_LOG_ERROR, "parla", &env), "ONNX Runtime could not start",
               load_error, sizeof load_error) ||
        failed(ORT(ORT_CREATE_CPU_MEMORY_INFO, OrtStatus *(*)(int, int, OrtMemoryInfo **))(ORT_ARENA, 0, &cpu_memory),
               "ONNX Runtime could not start", load_error, sizeof load_error)) {
        api = NULL;
        snprintf(error, error_size, "%s", load_error);
        return 0;
    }
    return 1;
}

/// Sentences of more phoneme ids than this (some 4 s of speech) give their buffers back.
#define SHRINK_AFTER_IDS 160

struct piper_session {
    OrtSession *session;
    OrtRunOptions *run_options;
    int kind;
    int has_speaker;
    int has_durations;
    char first_output[512];  // "output" (whole), the latent (encoder) or the flow's first input (encoder with its flow apart)
    char durations[512];
    char side_output[512];   // the encoder's third output: the flow's second input ("" if none)
    char latent[512];        // the decoder's or flow's (first) input
    char side[512];          // the flow's second input ("" if none)
};

// The session's input and output names: its kind, and what to feed and read.
static int read_names(piper_session *s, char *error, size_t error_size) {
    size_t inputs = 0, outputs = 0;
    OrtAllocator *allocator = NULL;
    if (failed(ORT(ORT_SESSION_INPUT_COUNT, OrtStatus *(*)(OrtSession *, size_t *))(s->session, &inputs), "ONNX Runtime", error, error_size) ||
        failed(ORT(ORT_SESSION_OUTPUT_COUNT, OrtStatus *(*)(OrtSession *, size_t *))(s->session, &outputs), "ONNX Runtime", error, error_size) ||
        failed(ORT(ORT_DEFAULT_ALLOCATOR, OrtStatus *(*)(OrtAllocator **))(&allocator), "ONNX Runtime", error, error_size))
        return 0;
    int text_inputs = 0, others = 0;
    for (size_t i = 0; i < inputs; i++) {
        char *name = NULL;
        if (failed(ORT(ORT_SESSION_INPUT_NAME, OrtStatus *(*)(OrtSession *, size_t, OrtAllocator *, char **))(s->session, i, allocator, &name),
                   "ONNX Runtime", error, error_size))
            return 0;
        if (strcmp(name, "sid") == 0) s->has_speaker = 1;
        else if (strcmp(name, "input") == 0 || strcmp(name, "input_lengths") == 0 || strcmp(name, "scales") == 0) text_inputs++;
        else if (others++ == 0) snprintf(s->latent, sizeof s->latent, "%s", name);
        else snprintf(s->side, sizeof s->side, "%s", name);
        ORT(ORT_ALLOCATOR_FREE, OrtStatus *(*)(OrtAllocator *, void *))(allocator, name);
    }
    for (size_t i = 0; i < outputs && i < 3; i++) {
        char *name = NULL;
        if (failed(ORT(ORT_SESSION_OUTPUT_NAME, OrtStatus *(*)(OrtSession *, size_t, OrtAllocator *, char **))(s->session, i, allocator, &name),
                   "ONNX Runtime", error, error_size))
            return 0;
        snprintf(i == 0 ? s->first_output : i == 1 ? s->durations : s->side_output, sizeof s->durations, "%s", name);
        ORT(ORT_ALLOCATOR_FREE, OrtStatus *(*)(OrtAllocator *, void *))(allocator, name);
    }
    s->has_durations = outputs >= 2;
    int whole = strcmp(s->first_output, "output") == 0;
    if (text_inputs == 3 && others == 0 && outputs >= 1 && outputs <= (whole ? 2u : 3u)) {
        s->kind = whole ? PIPER_WHOLE : PIPER_ENCODER;
        return 1;
    }
    if (text_inputs == 0 && others == 1 && outputs == 1 && whole) {
        s->kind = PIPER_DECODER;
        return 1;
    }
    if (text_inputs == 0 && (others == 1 || others == 2) && outputs == 1 && !whole) {
        s->kind = PIPER_FLOW;
        return 1;
    }
    if (!error[0]) snprintf(error, error_size, "the model does not take Piper's inputs (input, input_lengths, scales): it is not a Piper voice");
    return 0;
}

piper_session *piper_session_create(const void *model, size_t length, int threads, int ort_format, const char *save_to,
                                    char *error, size_t error_size) {
    if (!piper_runtime_load(error, error_size)) return NULL;
    OrtSessionOptions *options = NULL;
    if (failed(ORT(ORT_CREATE_SESSION_OPTIONS, OrtStatus *(*)(OrtSessionOptions **))(&options), "ONNX Runtime", error, error_size)) return NULL;
    OrtStatus *st = ORT(ORT_SET_INTRA_OP_THREADS, OrtStatus *(*)(OrtSessionOptions *, int))(options, threads);
    if (!st) st = ORT(ORT_SET_INTER_OP_THREADS, OrtStatus *(*)(OrtSessionOptions *, int))(options, 1);
    if (!st) st = ORT(ORT_SET_EXECUTION_MODE, OrtStatus *(*)(OrtSessionOptions *, int))(options, 0);
    if (!st) st = ORT(ORT_SET_OPTIMIZATION_LEVEL, OrtStatus *(*)(OrtSessionOptions *, int))(options, ORT_OPTIMIZE_ALL);
    // No memory pattern: with one, each run of a shape seen before takes one block for all its
    // tensors on top of what the arena already holds (a render worker of joe, 30 quotations in
    // 96-frame chunks: 173 MB with it, 152 without, and the same CPU).
    if (!st) st = ORT(ORT_DISABLE_MEM_PATTERN, OrtStatus *(*)(OrtSessionOptions *))(options);
    // Threads that spin between runs would take a core from the rest of the program.
    if (!st) st = ORT(ORT_ADD_SESSION_CONFIG, OrtStatus *(*)(OrtSessionOptions *, const char *, const char *))(options, "session.intra_op.allow_spinning", "0");
    typedef OrtStatus *(*config_fn)(OrtSessionOptions *, const char *, const char *);
    config_fn config = ORT(ORT_ADD_SESSION_CONFIG, config_fn);
    if (!st && ort_format) {
        // The weights stay in the caller's buffer (a mapped file): nothing is copied or parsed.
        st = config(options, "session.load_model_format", "ORT");
        if (!st) st = config(options, "session.use_ort_model_bytes_directly", "1");
        if (!st) st = config(options, "session.use_ort_model_bytes_for_initializers", "1");
    }
    if (!st && save_to) {
        st = ORT(ORT_SET_OPTIMIZED_MODEL_PATH, OrtStatus *(*)(OrtSessionOptions *, const char *))(options, save_to);
        if (!st) st = config(options, "session.save_model_format", "ORT");
    }
    const char *extra = getenv("PARLA_PIPER_CONFIG");  // key=value, for measuring ONNX Runtime's options
    if (!st && extra && strchr(extra, '=')) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(extra, '=') - extra), extra);
        st = ORT(ORT_ADD_SESSION_CONFIG, OrtStatus *(*)(OrtSessionOptions *, const char *, const char *))(options, key, strchr(extra, '=') + 1);
    }
    piper_session *s = NULL;
    if (!failed(st, "ONNX Runtime's options", error, error_size)) {
        s = calloc(1, sizeof *s);
        if (!s) snprintf(error, error_size, "out of memory");
        else if (failed(ORT(ORT_CREATE_SESSION_FROM_ARRAY, OrtStatus *(*)(OrtEnv *, const void *, size_t, OrtSessionOptions *, OrtSession **))(
                            env, model, length, options, &s->session),
                        "ONNX Runtime could not load the model", error, error_size)) {
            free(s);
            s = NULL;
        }
    }
    ORT(ORT_RELEASE_SESSION_OPTIONS, void (*)(OrtSessionOptions *))(options);
    if (!s) return NULL;
    // The arena keeps the buffers of the longest sentence so far (456 MB after three long
    // sentences, against 144 MB once loaded): shrunk at the end of each long sentence's run
    // (SHRINK_AFTER_IDS), the memory goes back near the model's size, and short sentences keep
    // the arena's speed (no arena: 20 % slower; shrinking after every run: 14 %). A decoder
    // runs on chunks of bounded length, and needs none of this.
    if (!getenv("PARLA_PIPER_KEEP_ARENA") &&
        !ORT(ORT_CREATE_RUN_OPTIONS, OrtStatus *(*)(OrtRunOptions **))(&s->run_options)) {
        OrtStatus *shrink = ORT(ORT_ADD_RUN_CONFIG, OrtStatus *(*)(OrtRunOptions *, const char *, const char *))(
            s->run_options, "memory.enable_memory_arena_shrinkage", "cpu:0");
        if (shrink) ORT(ORT_RELEASE_STATUS, void (*)(OrtStatus *))(shrink);
    }
    if (read_names(s, error, error_size)) return s;
    piper_session_free(s);
    return NULL;
}

void piper_session_free(piper_session *s) {
    if (!s) return;
    if (s->session) ORT(ORT_RELEASE_SESSION, void (*)(OrtSession *))(s->session);
    if (s->run_options) ORT(ORT_RELEASE_RUN_OPTIONS, void (*)(OrtRunOptions *))(s->run_options);
    free(s);
}

int piper_session_kind(const piper_session *s) { return s->kind; }
int piper_session_has_speaker(const piper_session *s) { return s->has_speaker; }
int piper_session_has_durations(const piper_session *s) { return s->has_durations; }
const char *piper_session_input(const piper_session *s) { return s->kind == PIPER_DECODER || s->kind == PIPER_FLOW ? s->latent : "input"; }
const char *piper_session_output(const piper_session *s) { return s->first_output; }

const char *piper_runtime_version(void) { return runtime_version; }

// The elements of `value` as floats (malloc'd), converting int64 if need be, and its shape (up
// to 4 dimensions, in `dims`, if not NULL); NULL on error.
static float *copy_floats(OrtValue *value, size_t *count, int64_t *dims, size_t *dim_count, char *error, size_t error_size) {
    OrtTensorTypeAndShapeInfo *info = NULL;
    if (failed(ORT(ORT_GET_TYPE_AND_SHAPE, OrtStatus *(*)(OrtValue *, OrtTensorTypeAndShapeInfo **))(value, &info), "ONNX Runtime", error, error_size))
        return NULL;
    int type = 0;
    size_t n = 0, d = 0;
    OrtStatus *st = ORT(ORT_GET_ELEMENT_TYPE, OrtStatus *(*)(OrtTensorTypeAndShapeInfo *, int *))(info, &type);
    if (!st) st = ORT(ORT_GET_ELEMENT_COUNT, OrtStatus *(*)(OrtTensorTypeAndShapeInfo *, size_t *))(info, &n);
    if (!st && dims) st = ORT(ORT_GET_DIMENSIONS_COUNT, OrtStatus *(*)(OrtTensorTypeAndShapeInfo *, size_t *))(info, &d);
    if (!st && dims && d <= 4) st = ORT(ORT_GET_DIMENSIONS, OrtStatus *(*)(OrtTensorTypeAndShapeInfo *, int64_t *, size_t))(info, dims, d);
    ORT(ORT_RELEASE_TYPE_AND_SHAPE, void (*)(OrtTensorTypeAndShapeInfo *))(info);
    void *data = NULL;
    if (!st) st = ORT(ORT_GET_TENSOR_DATA, OrtStatus *(*)(OrtValue *, void **))(value, &data);
    if (failed(st, "ONNX Runtime", error, error_size)) return NULL;
    if (dims && (d > 4 || d == 0)) {
        snprintf(error, error_size, "the model gave a tensor of %zu dimensions where Parla expects 1 to 4", d);
        return NULL;
    }
    if (dim_count) *dim_count = d;
    if (type != ORT_FLOAT && type != ORT_INT64) {
        snprintf(error, error_size, "the model gave a tensor of type %d where Parla expects floats", type);
        return NULL;
    }
    float *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) { snprintf(error, error_size, "out of memory"); return NULL; }
    for (size_t i = 0; i < n; i++) out[i] = type == ORT_FLOAT ? ((const float *)data)[i] : (float)((const int64_t *)data)[i];
    *count = n;
    return out;
}

int piper_session_run(piper_session *s, const int64_t *ids, size_t count, const float scales[3], int64_t speaker, float **audio,
                      size_t *samples, int64_t *channels, float **durations, float **side, int64_t *side_channels, char *error,
                      size_t error_size) {
    *audio = NULL;
    *durations = NULL;
    if (side) *side = NULL;
    if (channels) *channels = 1;
    if (s->kind != PIPER_WHOLE && s->kind != PIPER_ENCODER) {
        snprintf(error, error_size, "a decoder does not take phoneme ids");
        return -1;
    }
    int64_t id_shape[2] = { 1, (int64_t)count }, one = 1, length = (int64_t)count, three = 3;
    float scale_copy[3] = { scales[0], scales[1], scales[2] };
    int64_t sid = speaker;
    OrtValue *inputs[4] = { NULL, NULL, NULL, NULL };
    typedef OrtStatus *(*create_fn)(const OrtMemoryInfo *, void *, size_t, const int64_t *, size_t, int, OrtValue **);
    create_fn create = ORT(ORT_CREATE_TENSOR_WITH_DATA, create_fn);
    OrtStatus *st = create(cpu_memory, (void *)ids, count * sizeof *ids, id_shape, 2, ORT_INT64, &inputs[0]);
    if (!st) st = create(cpu_memory, &length, sizeof length, &one, 1, ORT_INT64, &inputs[1]);
    if (!st) st = create(cpu_memory, scale_copy, sizeof scale_copy, &three, 1, ORT_FLOAT, &inputs[2]);
    if (!st && s->has_speaker) st = create(cpu_memory, &sid, sizeof sid, &one, 1, ORT_INT64, &inputs[3]);
    int result = -1;
    if (!failed(st, "ONNX Runtime", error, error_size)) {
        const char *input_names[4] = { "input", "input_lengths", "scales", "sid" };
        const char *output_names[3] = { s->first_output, s->durations, s->side_output };
        OrtValue *outputs[3] = { NULL, NULL, NULL };
        size_t output_count = s->side_output[0] ? 3 : s->has_durations ? 2 : 1;
        st = ORT(ORT_RUN, OrtStatus *(*)(OrtSession *, const void *, const char *const *, const OrtValue *const *, size_t, const char *const *, size_t,
                                         OrtValue **))(s->session, count > SHRINK_AFTER_IDS ? s->run_options : NULL, input_names, (const OrtValue *const *)inputs, s->has_speaker ? 4 : 3,
                                                       output_names, output_count, outputs);
        if (!failed(st, "the model could not speak this text", error, error_size)) {
            size_t frames = 0, d = 0;
            int64_t dims[4] = { 0, 0, 0, 0 };
            *audio = copy_floats(outputs[0], samples, s->kind == PIPER_ENCODER ? dims : NULL, &d, error, error_size);
            if (*audio && s->kind == PIPER_ENCODER) {
                // The latent: [1, C, T].
                if (d != 3 || dims[0] != 1 || dims[1] < 1 || dims[2] < 0 || (size_t)(dims[1] * dims[2]) != *samples) {
                    snprintf(error, error_size, "the voice's encoder gave a latent of an unexpected shape");
                    free(*audio);
                    *audio = NULL;
                } else if (channels) *channels = dims[1];
            }
            if (*audio && s->has_durations) {
                *durations = copy_floats(outputs[1], &frames, NULL, NULL, error, error_size);
                if (*durations && frames != count) {
                    snprintf(error, error_size, "the model gave %zu durations for %zu phoneme ids", frames, count);
                    free(*durations);
                    *durations = NULL;
                }
            }
            if (*audio && output_count == 3) {
                // The flow's second input (the frames' mask): [1, C, T] with the latent's T.
                float *extra = NULL;
                size_t n = 0, d3 = 0;
                int64_t dims3[4] = { 0, 0, 0, 0 };
                if (side && (extra = copy_floats(outputs[2], &n, dims3, &d3, error, error_size)) &&
                    (d3 != 3 || dims3[0] != 1 || dims3[1] < 1 || dims3[2] != dims[2] || (size_t)(dims3[1] * dims3[2]) != n)) {
                    snprintf(error, error_size, "the voice's encoder gave a second flow input of an unexpected shape");
                    free(extra);
                    extra = NULL;
                }
                if (side && extra) *side = extra, *side_channels = dims3[1];
                else free(*audio), *audio = NULL;
            }
            if (*audio && (!s->has_durations || *durations)) result = 0;
            else { free(*audio); *audio = NULL; if (side) free(*side), *side = NULL; }
        }
        for (size_t i = 0; i < 3; i++)
            if (outputs[i]) ORT(ORT_RELEASE_VALUE, void (*)(OrtValue *))(outputs[i]);
    }
    for (size_t i = 0; i < 4; i++)
        if (inputs[i]) ORT(ORT_RELEASE_VALUE, void (*)(OrtValue *))(inputs[i]);
    return result;
}

int piper_session_frames(piper_session *s, const float *latent, int64_t channels, const float *side, int64_t side_channels, int64_t frames,
                         int64_t speaker, float **out, size_t *samples, int64_t *out_channels, char *error, size_t error_size) {
    *out = NULL;
    if (out_channels) *out_channels = 1;
    if (s->kind != PIPER_DECODER && s->kind != PIPER_FLOW) {
        snprintf(error, error_size, "the session is not a decoder or a flow");
        return -1;
    }
    if ((s->side[0] != 0) != (side != NULL)) {
        snprintf(error, error_size, "the voice's flow takes %s", s->side[0] ? "two inputs" : "one input");
        return -1;
    }
    int64_t shape[3] = { 1, channels, frames }, side_shape[3] = { 1, side_channels, frames }, one = 1, sid = speaker;
    OrtValue *inputs[3] = { NULL, NULL, NULL };
    const char *input_names[3] = { s->latent, NULL, NULL };
    size_t count = 1;
    typedef OrtStatus *(*create_fn)(const OrtMemoryInfo *, void *, size_t, const int64_t *, size_t, int, OrtValue **);
    create_fn create = ORT(ORT_CREATE_TENSOR_WITH_DATA, create_fn);
    OrtStatus *st = create(cpu_memory, (void *)latent, (size_t)(channels * frames) * sizeof *latent, shape, 3, ORT_FLOAT, &inputs[0]);
    if (!st && side) {
        input_names[count] = s->side;
        st = create(cpu_memory, (void *)side, (size_t)(side_channels * frames) * sizeof *side, side_shape, 3, ORT_FLOAT, &inputs[count++]);
    }
    if (!st && s->has_speaker) {
        input_names[count] = "sid";
        st = create(cpu_memory, &sid, sizeof sid, &one, 1, ORT_INT64, &inputs[count++]);
    }
    int result = -1;
    if (!failed(st, "ONNX Runtime", error, error_size)) {
        const char *output_names[1] = { s->first_output };
        OrtValue *output = NULL;
        st = ORT(ORT_RUN, OrtStatus *(*)(OrtSession *, const void *, const char *const *, const OrtValue *const *, size_t, const char *const *, size_t,
                                         OrtValue **))(s->session, NULL, input_names, (const OrtValue *const *)inputs, count, output_names, 1, &output);
        if (!failed(st, s->kind == PIPER_FLOW ? "the voice's flow failed" : "the voice's decoder failed", error, error_size)) {
            size_t d = 0;
            int64_t dims[4] = { 0, 0, 0, 0 };
            *out = copy_floats(output, samples, s->kind == PIPER_FLOW ? dims : NULL, &d, error, error_size);
            if (*out && s->kind == PIPER_FLOW && (d != 3 || dims[0] != 1 || dims[1] < 1 || dims[2] != frames)) {
                snprintf(error, error_size, "the voice's flow gave a latent of an unexpected shape");
                free(*out);
                *out = NULL;
            } else if (*out && s->kind == PIPER_FLOW && out_channels) {
                *out_channels = dims[1];
            }
            if (*out) result = 0;
        }
        if (output) ORT(ORT_RELEASE_VALUE, void (*)(OrtValue *))(output);
    }
    for (size_t i = 0; i < 3; i++)
        if (inputs[i]) ORT(ORT_RELEASE_VALUE, void (*)(OrtValue *))(inputs[i]);
    return result;
}
