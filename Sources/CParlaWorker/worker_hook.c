// The render worker's processes: every program that links Parla can serve as its own render
// worker (BatchRenderer starts /proc/self/exe with PARLA_RENDER_WORKER set, and
// CParlaBeforeMain's constructor runs the worker loop, RenderWorker.swift's
// parla_render_worker_main, before main(), while the process still has a single thread, which
// the worker's fork-per-chunk design needs); here, the setup of each chunk's child.
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

void parla_item_child_setup(void) {
    // The item's process dies with its worker, and never reads the worker's requests or
    // writes into its answers: standard output goes to standard error.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) { dup2(null, 0); close(null); }
    dup2(2, 1);
}
