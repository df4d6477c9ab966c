// Time-stretching and pitch-shifting of a Piper voice's audio, with libsonic (the library
// espeak-ng and NVDA use for their fast rates): the speed of a rate past what the model's
// length_scale gives naturally, and the pitch the model has no control for. Sonic finds the
// voice's pitch periods and drops or repeats whole ones (PICOLA-style overlap-add), so the
// pitch of a faster voice stays the same, and resamples for a pitch change. It is loaded on first
// use with dlopen: libsonic.so.0 beside the engine host (the wheel carries it), else the
// system's (Debian's libsonic0, which libespeak-ng1 depends on). $PARLA_SONIC names the
// library, or "none" (as if it were missing: for tests).
#include "piper_internal.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *sonic_stream;

static struct {
    int looked, loaded;
    char path[PATH_MAX + 32];
    sonic_stream (*create)(int sample_rate, int channels);
    void (*destroy)(sonic_stream);
    void (*set_speed)(sonic_stream, float);
    void (*set_pitch)(sonic_stream, float);
    int (*write)(sonic_stream, short *, int);
    int (*read)(sonic_stream, short *, int);
    int (*flush)(sonic_stream);
    int (*available)(sonic_stream);
} sonic;

// RTLD_DEEPBIND: libsonic's calls to its own functions stay its own. espeak-ng 1.52 from the
// espeakng-loader wheel (the wheel's engine loads it as the system's) exports a sonic of its
// own; bound to those, libsonic 0.2.0's stream was run by another version's code (a segfault at
// 800 words a minute in check-wheel's clean root).
static int sonic_from(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) return 0;
    sonic.create = (sonic_stream (*)(int, int))dlsym(h, "sonicCreateStream");
    sonic.destroy = (void (*)(sonic_stream))dlsym(h, "sonicDestroyStream");
    sonic.set_speed = (void (*)(sonic_stream, float))dlsym(h, "sonicSetSpeed");
    sonic.set_pitch = (void (*)(sonic_stream, float))dlsym(h, "sonicSetPitch");
    sonic.write = (int (*)(sonic_stream, short *, int))dlsym(h, "sonicWriteShortToStream");
    sonic.read = (int (*)(sonic_stream, short *, int))dlsym(h, "sonicReadShortFromStream");
    sonic.flush = (int (*)(sonic_stream))dlsym(h, "sonicFlushStream");
    sonic.available = (int (*)(sonic_stream))dlsym(h, "sonicSamplesAvailable");
    if (!sonic.create || !sonic.destroy || !sonic.set_speed || !sonic.set_pitch || !sonic.write || !sonic.read || !sonic.flush || !sonic.available) {
        dlclose(h);
        return 0;
    }
    snprintf(sonic.path, sizeof sonic.path, "%s", path);
    return 1;
}

int piper_stretch_available(void) {
    if (sonic.looked) return sonic.loaded;
    sonic.looked = 1;
    const char *named = getenv("PARLA_SONIC");
    if (named && *named) return sonic.loaded = strcmp(named, "none") != 0 && sonic_from(named);
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (piper_program_directory(dir, sizeof dir)) {
        snprintf(path, sizeof path, "%s/libsonic.so.0", dir);
        if (access(path, R_OK) == 0 && sonic_from(path)) return sonic.loaded = 1;
    }
    return sonic.loaded = sonic_from("libsonic.so.0");
}

const char *piper_stretch_path(void) { return piper_stretch_available() ? sonic.path : NULL; }

int parla_piper_stretch_found(const char *program_directory) {
    const char *named = getenv("PARLA_SONIC");
    char path[PATH_MAX + 32];
    if (named && *named && strcmp(named, "none") == 0) return 0;
    if (!(named && *named) && program_directory) {
        snprintf(path, sizeof path, "%s/libsonic.so.0", program_directory);
        if (access(path, R_OK) == 0) return 1;
    }
    void *h = dlopen(named && *named ? named : "libsonic.so.0", RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) return 0;
    int complete = dlsym(h, "sonicCreateStream") && dlsym(h, "sonicSetPitch") && dlsym(h, "sonicFlushStream");
    dlclose(h);
    return complete;
}

struct piper_stretch {
    sonic_stream stream;
    float speed;
};

piper_stretch *piper_stretch_new(int sample_rate, float speed, float pitch) {
    if (!piper_stretch_available()) return NULL;
    piper_stretch *s = calloc(1, sizeof *s);
    if (!s || !(s->stream = sonic.create(sample_rate, 1))) {
        free(s);
        return NULL;
    }
    s->speed = speed;
    sonic.set_speed(s->stream, speed);
    sonic.set_pitch(s->stream, pitch);
    return s;
}

float piper_stretch_speed(const piper_stretch *s) { return s ? s->speed : 1; }

int piper_stretch_write(piper_stretch *s, const int16_t *samples, int count) {
    // Sonic copies the samples in; it takes a pointer to non-const.
    return count <= 0 || sonic.write(s->stream, (short *)samples, count) != 0;
}

int piper_stretch_read(piper_stretch *s, int16_t *out, int most) { return most > 0 ? sonic.read(s->stream, out, most) : 0; }

int piper_stretch_flush(piper_stretch *s) { return sonic.flush(s->stream) != 0; }

void piper_stretch_free(piper_stretch *s) {
    if (!s) return;
    sonic.destroy(s->stream);
    free(s);
}
