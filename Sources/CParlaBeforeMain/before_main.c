// Everything Parla runs before main(), in one place: the only ELF constructor of Parla's own.
//
// It runs in every process that links Parla's engine (ParlaEngine depends on this target),
// before the Swift runtime and the program's main, while the process has one thread. Three
// helper roles are this same program started again (/proc/self/exe) with a variable in its
// environment, set only in that child by the process that starts it (parla_helper_role and
// parla_duck_guard_role check that, so a program that merely inherits one runs as itself):
//
// - PARLA_ENGINE_HOST: the engine host (engine_host.c), for when no `parla-engine` program is
//   installed beside the program (EngineHost.swift);
// - PARLA_RENDER_WORKER: a render worker (RenderWorker.swift), whose fork-per-chunk design
//   needs a process with one thread;
// - PARLA_DUCK_GUARD: the ducking guard (duck_guard.c), which restores other programs' volumes
//   if this one dies while they are lowered.
//
// A helper runs its loop and exits here: the program's main never runs in it. Otherwise, in the
// `parla` and `speak-selection` programs (which link CParlaPrestart), a command line that is
// going to speak forks its engine host now (prestart.c), so espeak-ng loads on the other core
// while the Swift runtime starts. Anything else returns at once, and main runs as usual.
#define _GNU_SOURCE
#include "parla_before_main.h"
#include "parla_duck_guard.h"
#include "parla_engine_host.h"
#include "parla_process.h"
#include "parla_worker.h"
#include <stdlib.h>
#include <unistd.h>

// Defined only where their targets are linked: the worker's loop with ParlaBatch, the prestart
// with the two programs.
extern int parla_render_worker_main(void) __attribute__((weak));
extern void parla_prestart_if_speaking(int argc, char **argv) __attribute__((weak));

__attribute__((constructor)) static void parla_before_main(int argc, char **argv) {
    if (parla_helper_role(PARLA_ENGINE_HOST_ENV)) {
        parla_die_with_parent();
        // The parent may have exited between the check and the line above.
        if (getppid() == 1) _exit(0);
        _exit(parla_engine_host_main());
    }
    if (parla_render_worker_main && parla_helper_role(PARLA_RENDER_WORKER_ENV)) {
        parla_helper_prepare_environment();
        _exit(parla_render_worker_main());
    }
    if (parla_duck_guard_role()) _exit(parla_duck_guard_main());
    if (parla_prestart_if_speaking) parla_prestart_if_speaking(argc, argv);
}
