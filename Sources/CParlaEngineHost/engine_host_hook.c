// Every program that links Parla's engine can serve as its own engine host, for when the small
// `parla-engine` program is not installed beside it: EngineHost starts /proc/self/exe with
// PARLA_ENGINE_HOST=1, and this constructor runs the host's loop (engine_host.c) before
// main(), so the program's own main never runs there. espeak-ng lives in that process
// because it can crash on some texts; see EngineHost.swift.
#define _GNU_SOURCE
#include "parla_engine_host.h"
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

void parla_die_with_parent(void) { prctl(PR_SET_PDEATHSIG, SIGKILL); }

int parla_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int parla_spawn_close_from(posix_spawn_file_actions_t *actions, int fd) {
    return posix_spawn_file_actions_addclosefrom_np(actions, fd);
}

__attribute__((constructor)) static void parla_engine_host_hook(void) {
    const char *value = getenv(PARLA_ENGINE_HOST_ENV);
    if (value != NULL && value[0] == '1' && value[1] == 0) {
        // Programs the host might start must not become hosts themselves.
        unsetenv(PARLA_ENGINE_HOST_ENV);
        parla_die_with_parent();
        // The parent may have exited between starting this process and the line above.
        if (getppid() == 1) _exit(0);
        _exit(parla_engine_host_main());
    }
}
