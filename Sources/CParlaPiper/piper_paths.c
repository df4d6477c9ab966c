// Where Parla keeps what Piper voices need: beside the program when installed, and in the
// user's cache when unpacked by scripts/setup or prepared by a first load.
#include "piper_internal.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int piper_program_directory(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    return snprintf(out, size, "%s", exe) < (int)size;
}

int piper_cache_directory(char *out, size_t size) {
    const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (cache && *cache) return snprintf(out, size, "%s/parla", cache) < (int)size;
    if (home && *home) return snprintf(out, size, "%s/.cache/parla", home) < (int)size;
    return 0;
}
