// Every program that links Parla can serve as its own render worker: BatchRenderer starts
// /proc/self/exe with PARLA_RENDER_WORKER set, and this constructor runs the worker loop
// before main(), while the process still has a single thread, which the worker's
// fork-per-chunk design needs. Other programs see no difference.
#define _GNU_SOURCE
#include "parla_worker.h"
#include "parla_process.h"
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <unistd.h>

extern int parla_render_worker_main(void);

void parla_item_child_setup(void) {
    // The item's process dies with its worker, and never reads the worker's requests or
    // writes into its answers: standard output goes to standard error.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) { dup2(null, 0); close(null); }
    dup2(2, 1);
}

__attribute__((constructor)) static void parla_render_worker_hook(void) {
    // Only when the parent that set the variable started this process (parla_helper_role):
    // a program that merely inherits it runs as itself.
    if (parla_helper_role(PARLA_RENDER_WORKER_ENV)) _exit(parla_render_worker_main());
}
