// LD_PRELOAD shim for PiperCLITests.theEnvironmentIsNeverChangedBesideAnotherThread: setenv,
// unsetenv and putenv abort the process when it has more than one thread. glibc's getenv takes
// no lock, and a setenv that grows the environment frees the array a getenv on another thread
// may be reading: the engine host set ORT_DISABLE_TELEMETRY while its espeak-ng thread read
// PARLA_PIPER_ESPEAK, XDG_CACHE_HOME and HOME, and crashed loading a Piper voice, now and then.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void check(const char *call, const char *name) {
    int n = threads();
    if (n <= 1) return;
    char line[512];
    int len = snprintf(line, sizeof line, "environment_guard: %s(%s) with %d threads\n", call, name ? name : "?", n);
    if (write(2, line, (size_t)len) < 0) {}
    abort();
}

int setenv(const char *name, const char *value, int overwrite) {
    check("setenv", name);
    int (*real)(const char *, const char *, int) = (int (*)(const char *, const char *, int))dlsym(RTLD_NEXT, "setenv");
    return real(name, value, overwrite);
}

int unsetenv(const char *name) {
    check("unsetenv", name);
    int (*real)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "unsetenv");
    return real(name);
}

int putenv(char *string) {
    check("putenv", string);
    int (*real)(char *) = (int (*)(char *))dlsym(RTLD_NEXT, "putenv");
    return real(string);
}
