// Where libespeak-ng comes from: what lazy_espeak.c does before it loads the library, and the
// data directory of an espeak-ng bundled with the program. Below the engine driver and host
// (which ask parla_espeak_bundled_directory), so nothing here calls up into them.
#define _GNU_SOURCE
#include "parla_espeak_locate.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// The espeak-ng bundled with the program, if any: its directory (holding libespeak-ng.so.1
// and espeak-ng-data), "" if the system's is used.
static char bundled_espeak[4200];

const char *parla_espeak_bundled_directory(void) { return bundled_espeak[0] ? bundled_espeak : NULL; }

// Called by lazy_espeak.c before it loads libespeak-ng (in engine hosts and render workers):
// - Parla's stand-in for pcaudiolib (CParlaAudioNull, whose soname is libpcaudio.so.0) is
//   loaded if it is installed with this program, so that the system's libespeak-ng's need for
//   libpcaudio.so.0 is met by it and the loader maps neither the real library nor libpulse and
//   the ~25 libraries behind it. Looked for in ../libexec/parla/ (installed), then beside the
//   program (the installed engine host, the wheel, or a build directory). Without it, the real
//   library is loaded, and never used.
// - The Python wheel carries an espeak-ng (1.52, with its data) in espeak-ng/ beside the engine
//   program, for machines that have none: where the system's libespeak-ng.so.1 cannot be
//   loaded, that one is (RTLD_GLOBAL: the lazy binding then finds it by its soname), and
//   engine_driver.c gives espeak-ng its data directory. Where the system has one, the system's
//   speaks, as it does for the other programs.
void parla_espeak_before_load(void) {
    char directory[4096];
    ssize_t n = readlink("/proc/self/exe", directory, sizeof directory - 1);
    if (n <= 0) return;
    directory[n] = 0;
    char *slash = strrchr(directory, '/');
    if (!slash) return;
    *slash = 0;
    char path[4200];
    static const char *const places[] = {"/../libexec/parla/libpcaudio.so.0", "/libpcaudio.so.0", "/libpcaudio.so"};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        snprintf(path, sizeof path, "%s%s", directory, places[i]);
        if (access(path, R_OK) == 0 && dlopen(path, RTLD_NOW | RTLD_GLOBAL)) break;
    }
    snprintf(path, sizeof path, "%s/espeak-ng/libespeak-ng.so.1", directory);
    if (access(path, R_OK) != 0 || dlopen("libespeak-ng.so.1", RTLD_NOW | RTLD_LOCAL)) return;
    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL)) snprintf(bundled_espeak, sizeof bundled_espeak, "%s/espeak-ng", directory);
}
