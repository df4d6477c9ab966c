// Every program that links Parla's engine can serve as its own engine host, for when the small
// `parla-engine` program is not installed beside it: EngineHost starts /proc/self/exe with
// PARLA_ENGINE_HOST=1, and this constructor runs the host's loop (engine_host.c) before
// main(), so the program's own main never runs there. espeak-ng lives in that process
// because it can crash on some texts; see EngineHost.swift.
#define _GNU_SOURCE
#include "parla_engine_host.h"
#include "parla_process.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

// The espeak-ng bundled with the program, if any: its directory (holding libespeak-ng.so.1
// and espeak-ng-data), "" if the system's is used.
static char bundled_espeak[4200];

const char *parla_espeak_bundled_directory(void) { return bundled_espeak[0] ? bundled_espeak : NULL; }

// Called before libespeak-ng is loaded (CESpeakNGLazy), in the engine host:
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

static int prestarted_pid, prestarted_input = -1, prestarted_output = -1;

int parla_prestart_host(void) {
    int to_child[2], from_child[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, to_child) != 0) return 0;
    if (pipe2(from_child, O_CLOEXEC) != 0) {
        close(to_child[0]);
        close(to_child[1]);
        return 0;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        // The child: nothing of Swift runs here, only engine_host.c. Standard input and output
        // become the channel to Parla; nothing else of the parent's stays open.
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        if (getenv("PARLA_ENGINE_DEBUG") == NULL) {
            int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
            if (null >= 0) dup2(null, 2);
        }
        closefrom(3);
        // Crashes of espeak-ng must kill this process (the host's zygote reports its children's
        // deaths); the Swift runtime's crash handler may already be installed.
        const int defaults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS,
                                SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGCHLD};
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) signal(defaults[i], SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_NAME, "parla-engine");
        setenv("PULSE_SERVER", PARLA_HELPER_PULSE_SERVER, 1);
        setenv("ALSA_CONFIG_PATH", PARLA_HELPER_ALSA_CONFIG_PATH, 1);
        parla_die_with_parent();
        if (getppid() != parent) _exit(0);
        _exit(parla_engine_host_main());
    }
    close(to_child[0]);
    close(from_child[1]);
    if (pid < 0) {
        close(to_child[1]);
        close(from_child[0]);
        return 0;
    }
    prestarted_pid = pid;
    prestarted_input = to_child[1];
    prestarted_output = from_child[0];
    return 1;
}

int parla_take_prestarted_host(int *pid, int *input, int *output) {
    // One engine thread takes it, once; the constructor that set it ran before any thread.
    static int taken;
    if (prestarted_pid <= 0 || __atomic_exchange_n(&taken, 1, __ATOMIC_ACQ_REL)) return 0;
    *pid = prestarted_pid;
    *input = prestarted_input;
    *output = prestarted_output;
    return 1;
}

__attribute__((constructor)) static void parla_engine_host_hook(void) {
    if (!parla_helper_role(PARLA_ENGINE_HOST_ENV)) return;
    parla_die_with_parent();
    // The parent may have exited between the check and the line above.
    if (getppid() == 1) _exit(0);
    _exit(parla_engine_host_main());
}
