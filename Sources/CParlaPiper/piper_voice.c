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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/// The rate runs are delivered at: espeak-ng's, so that one utterance mixing both engines is
/// one stream with one timeline. A voice at another rate is resampled.
#define OUTPUT_RATE 22050

struct parla_piper_voice {
    piper_session *session;
    piper_id_map *map;
    char espeak_voice[64];
    int sample_rate;
    float noise_scale, length_scale, noise_w;
    int exact_timing;
    int warmed;    // its session has made its first run (see warm_up)
    void *mapped;  // the cached model in ONNX Runtime's format, used in place
    size_t mapped_length;
    char prepared_path[PATH_MAX + 300];  // where that copy is ("" if none)
};

// MARK: The cache of prepared models

// A prepared model (the durations an output, the noise seeded, ONNX Runtime's optimizations
// applied) is kept in ONNX Runtime's own format in ~/.cache/parla/piper-models: the next load
// maps it and uses its weights in place, instead of reading, rewriting, parsing and optimizing
// 63 MB (joe: 0.45 s), and processes that map it share its pages. Its name holds the model's
// size and time and the runtime's version, so a changed model or runtime makes a new one.
// PARLA_PIPER_CACHE=DIR puts it elsewhere; PARLA_PIPER_CACHE=0 turns it off.
#define PREPARED_VERSION "r1"

static int cache_path(const char *model_path, const struct stat *st, char *out, size_t size) {
    const char *explicit = getenv("PARLA_PIPER_CACHE");
    if (explicit && strcmp(explicit, "0") == 0) return 0;
    char dir[PATH_MAX];
    const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (explicit && *explicit) snprintf(dir, sizeof dir, "%s", explicit);
    else if (cache && *cache) snprintf(dir, sizeof dir, "%s/parla/piper-models", cache);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache/parla/piper-models", home);
    else return 0;
    const char *slash = strrchr(model_path, '/');
    const char *name = slash ? slash + 1 : model_path;
    size_t stem = strlen(name) > 5 && strcmp(name + strlen(name) - 5, ".onnx") == 0 ? strlen(name) - 5 : strlen(name);
    if (stem > 200) stem = 200;
    int n = snprintf(out, size, "%s/%.*s-%lld-%lld-%s-ort%s.ort", dir, (int)stem, name, (long long)st->st_size, (long long)st->st_mtime,
                     PREPARED_VERSION, piper_runtime_version());
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
        size_t n = strlen(e->d_name);
        if (strcmp(e->d_name, name) == 0 || n < 5 || strcmp(e->d_name + n - 4, ".ort") != 0) continue;
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

// Maps the cached model at `path` and makes a session of it; 0 if there is none or it fails
// (a damaged one is removed).
static int load_prepared(parla_piper_voice *v, const char *path, int threads) {
    size_t length = 0;
    void *map = map_file(path, &length);
    if (!map) return 0;
    char error[1500];
    error[0] = 0;
    v->session = piper_session_create(map, length, threads, NULL, 1, NULL, error, sizeof error);
    if (!v->session) {
        munmap(map, length);
        unlink(path);
        return 0;
    }
    v->mapped = map;
    v->mapped_length = length;
    v->exact_timing = piper_session_has_durations(v->session);
    return 1;
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

parla_piper_voice *parla_piper_load(const char *model_path, char *error, size_t error_size) {
    error[0] = 0;
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
        v->sample_rate = (int)rate;
        char map_error[300];
        v->map = piper_id_map_create(pj_get(config, "phoneme_id_map"), map_error, sizeof map_error);
        if (!v->map) snprintf(error, error_size, "the voice's config %s: %s", config_path, map_error);
    }
    pj_free(config);
    if (error[0]) { parla_piper_free(v); return NULL; }

    const char *threads_text = getenv("PARLA_PIPER_THREADS");
    int threads = threads_text && atoi(threads_text) > 0 ? atoi(threads_text) : 1;
    struct stat model_stat;
    if (stat(model_path, &model_stat) != 0) {
        snprintf(error, error_size, "the voice's model %s cannot be read (%s)", model_path, strerror(errno));
        parla_piper_free(v);
        return NULL;
    }
    if (!piper_runtime_load(error, error_size)) {
        parla_piper_free(v);
        return NULL;
    }
    char prepared_path[PATH_MAX + 300];
    int cacheable = cache_path(model_path, &model_stat, prepared_path, sizeof prepared_path);
    if (cacheable) snprintf(v->prepared_path, sizeof v->prepared_path, "%s", prepared_path);
    if (cacheable && load_prepared(v, prepared_path, threads)) {
        malloc_trim(0);
        return v;
    }
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
    size_t prepared_length = 0;
    unsigned char *prepared = piper_rewrite_model(model, model_length, found == 1 ? ceil : NULL, 0x5EED, &prepared_length);
    free(model);
    if (!prepared) {
        snprintf(error, error_size, "the voice's model %s is damaged (its graph cannot be read)", model_path);
        parla_piper_free(v);
        return NULL;
    }
    char session_error[1500];
    session_error[0] = 0;
    // Saved, in ONNX Runtime's format, for the next load: under a temporary name, renamed once whole.
    char saving[PATH_MAX + 340];
    int save = cacheable && snprintf(saving, sizeof saving, "%s.%d.tmp", prepared_path, (int)getpid()) < (int)sizeof saving;
    if (save) make_directories(saving);
    v->session = piper_session_create(prepared, prepared_length, threads, v->exact_timing ? ceil : NULL, 0, save ? saving : NULL,
                                      session_error, sizeof session_error);
    if (!v->session && save) {
        // Perhaps the cache cannot be written: without it.
        unlink(saving);
        save = 0;
        session_error[0] = 0;
        v->session = piper_session_create(prepared, prepared_length, threads, v->exact_timing ? ceil : NULL, 0, NULL, session_error,
                                          sizeof session_error);
    }
    if (save && v->session) {
        if (rename(saving, prepared_path) == 0) remove_older_copies(prepared_path);
        else unlink(saving);
    }
    free(prepared);
    if (!v->session) {
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
    if (speakers > 1 && !piper_session_has_speaker(v->session)) {
        snprintf(error, error_size, "the voice's config %s says it has %d speakers, but its model takes no speaker id: the config is not this model's", config_path, speakers);
        parla_piper_free(v);
        return NULL;
    }
    return v;
}

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

static void warm_up(parla_piper_voice *v) {
    if (v->warmed) return;
    v->warmed = 1;
    int64_t ids[64];
    size_t count = piper_id_map_ids(v->map, warm_up_phonemes, ids, sizeof ids / sizeof ids[0]);
    float scales[3] = { v->noise_scale, v->length_scale, v->noise_w };
    float *audio = NULL, *durations = NULL;
    size_t samples = 0;
    char error[300];
    // A failure here is met again, and reported, by the real run.
    (void)piper_session_run(v->session, ids, count, scales, 0, &audio, &samples, &durations, error, sizeof error);
    free(audio);
    free(durations);
}

int parla_piper_rethread(parla_piper_voice *v, int threads) {
    if (!v || threads < 1) return 0;
    if (!v->mapped) {
        // Loaded from the model itself: its prepared copy was saved then.
        if (!v->prepared_path[0] || !(v->mapped = map_file(v->prepared_path, &v->mapped_length))) return 0;
    }
    char error[1500];
    error[0] = 0;
    piper_session *session = piper_session_create(v->mapped, v->mapped_length, threads, NULL, 1, NULL, error, sizeof error);
    if (!session) return 0;
    if (piper_session_has_durations(session) != piper_session_has_durations(v->session)) {
        piper_session_free(session);
        return 0;
    }
    piper_session_free(v->session);
    v->session = session;
    v->warmed = 0;
    warm_up(v);
    return 1;
}

void parla_piper_free(parla_piper_voice *v) {
    if (!v) return;
    piper_session_free(v->session);
    if (v->mapped) munmap(v->mapped, v->mapped_length);
    piper_id_map_free(v->map);
    free(v);
}

int parla_piper_sample_rate(const parla_piper_voice *v) { return v->sample_rate; }
int parla_piper_exact_timing(const parla_piper_voice *v) { return v->exact_timing; }

// MARK: Speaking

typedef struct {
    parla_piper_voice *voice;
    const parla_piper_output *out;
    float scales[3];
    float gain;
    long long samples;  // delivered so far, at OUTPUT_RATE
    char *error;
    size_t error_size;
} speaking;

static void emit_audio(speaking *sp, const int16_t *pcm, size_t count, const int *event_samples, const piper_sentence *s,
                       const int *word_order, size_t events) {
    // Blocks of audio, each followed by the events that fall in it (as espeak-ng reports them).
    const size_t block = 2048;
    size_t next_event = 0;
    for (size_t at = 0; at < count || next_event < events; at += block) {
        size_t n = at < count ? (count - at < block ? count - at : block) : 0;
        if (n) sp->out->audio(sp->out->context, pcm + at, (int)n);
        while (next_event < events && (event_samples[next_event] < (long long)(at + n) || at + n >= count)) {
            int w = word_order[next_event];
            int sample = (int)(sp->samples + event_samples[next_event]);
            int estimated = s->estimated || !sp->voice->exact_timing ? PARLA_PIPER_ESTIMATED : 0;
            if (w < 0) sp->out->event(sp->out->context, 2 | estimated, s->sentence_position, 0, sample);
            else sp->out->event(sp->out->context, 1 | estimated, s->words[w].position, s->words[w].length, sample);
            next_event++;
        }
        if (at >= count) break;
    }
}

static int speak_sentence(void *context, piper_sentence *s) {
    speaking *sp = context;
    if (sp->out->should_stop(sp->out->context)) return PARLA_PIPER_STOPPED;
    float *audio = NULL, *durations = NULL;
    size_t samples = 0;
    if (piper_session_run(sp->voice->session, s->ids, s->id_count, sp->scales, 0, &audio, &samples, &durations, sp->error, sp->error_size) != 0) {
        size_t n = strlen(sp->error);
        if (strstr(sp->error, "indices") || strstr(sp->error, "out of bounds") || strstr(sp->error, "Gather"))
            snprintf(sp->error + n, sp->error_size - n, " (the voice's .onnx.json may not belong to its model)");
        return -1;
    }
    // Loudness as Piper makes it: each sentence brought to full scale, then the run's volume.
    float peak = 0;
    for (size_t i = 0; i < samples; i++) {
        float a = fabsf(audio[i]);
        if (a > peak && isfinite(a)) peak = a;
    }
    float scale = peak > 1e-8f ? sp->gain / peak : 0;
    double ratio = (double)OUTPUT_RATE / sp->voice->sample_rate;
    size_t out_count = ratio == 1 ? samples : (size_t)((double)samples * ratio);
    int16_t *pcm = malloc((out_count ? out_count : 1) * sizeof *pcm);
    // Where each event falls: the sentence where its first word starts, each word at its first
    // phoneme id, from the frames the model gave the ids before it.
    int *event_samples = malloc((s->word_count + 1) * sizeof *event_samples);
    int *order = malloc((s->word_count + 1) * sizeof *order);
    long double *starts = malloc((s->id_count + 1) * sizeof *starts);
    if (!pcm || !event_samples || !order || !starts) {
        free(pcm); free(event_samples); free(order); free(starts); free(audio); free(durations);
        snprintf(sp->error, sp->error_size, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < out_count; i++) {
        double t = ratio == 1 ? (double)i : (double)i / ratio;
        size_t k = (size_t)t;
        double f = t - (double)k;
        float a = k < samples ? audio[k] : 0, b = k + 1 < samples ? audio[k + 1] : a;
        float x = (float)((a + (b - a) * f) * scale);
        if (!isfinite(x)) x = 0;
        if (x > 1) x = 1;
        if (x < -1) x = -1;
        pcm[i] = (int16_t)(x * 32767);
    }
    // Each id's start, in output samples: the frames before it, scaled to the audio's length.
    long double total = 0;
    for (size_t i = 0; i < s->id_count; i++) {
        starts[i] = total;
        float d = durations ? durations[i] : 1;
        total += d > 0 && isfinite(d) ? d : 0;
    }
    long double per_frame = total > 0 ? (long double)out_count / total : 0;
    size_t events = 0;
    int sentence_sample = -1;
    for (size_t w = 0; w < s->word_count; w++) {
        if (s->words[w].first_id < 0 || (size_t)s->words[w].first_id >= s->id_count) continue;
        int sample = (int)(starts[s->words[w].first_id] * per_frame);
        if (sentence_sample < 0) {
            sentence_sample = sample;
            if (s->sentence_position > 0 && !s->continues) {
                event_samples[events] = sample;
                order[events++] = -1;
            }
        }
        event_samples[events] = sample;
        order[events++] = (int)w;
    }
    // The rest of a sentence whose first clause went ahead alone starts where its first phoneme
    // does: the model's lead-in silence there would lengthen the clause's pause (by some 45 ms).
    // Likewise the clause itself ends before the model's closing silence (its last id, EOS).
    size_t skip = 0;
    if (s->continues && s->id_count > 2) skip = (size_t)(starts[2] * per_frame);
    if (s->goes_on && s->id_count > 1) {
        size_t end = (size_t)(starts[s->id_count - 1] * per_frame);
        if (end < out_count) out_count = end;
    }
    if (skip > out_count) skip = out_count;
    for (size_t e = 0; e < events; e++) event_samples[e] = event_samples[e] > (int)skip ? event_samples[e] - (int)skip : 0;
    emit_audio(sp, pcm + skip, out_count - skip, event_samples, s, order, events);
    sp->samples += (long long)(out_count - skip);
    free(pcm); free(event_samples); free(order); free(starts); free(audio); free(durations);
    return 0;
}

int parla_piper_speak(parla_piper_voice *voice, const char *text, int rate, int volume, int options,
                      const parla_piper_output *output, char *error, size_t error_size) {
    error[0] = 0;
    if (rate < 80) rate = 80;
    if (rate > 450) rate = 450;
    if (volume < 0) volume = 0;
    if (volume > 200) volume = 200;
    warm_up(voice);
    speaking sp = {
        .voice = voice, .out = output,
        .scales = { voice->noise_scale, voice->length_scale * 175.0f / (float)rate, voice->noise_w },
        .gain = (float)volume / 100.0f, .samples = 0, .error = error, .error_size = error_size,
    };
    int status = piper_phonemize(text, voice->espeak_voice, voice->map, options & PARLA_PIPER_EARLY_FIRST_CLAUSE, speak_sentence, &sp,
                                 error, error_size);
    if (status == PARLA_PIPER_STOPPED) return PARLA_PIPER_STOPPED;
    if (status != 0) {
        if (!error[0]) snprintf(error, error_size, "the Piper voice could not speak this text");
        return PARLA_PIPER_FAILED;
    }
    return output->should_stop(output->context) ? PARLA_PIPER_STOPPED : PARLA_PIPER_OK;
}
