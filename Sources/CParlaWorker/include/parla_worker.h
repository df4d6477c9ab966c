#ifndef PARLA_WORKER_H
#define PARLA_WORKER_H
#include <sys/types.h>
/// The environment variable that turns a process linking Parla into a render worker.
#define PARLA_RENDER_WORKER_ENV "PARLA_RENDER_WORKER"
/// fork(2), for the render worker (Swift does not import it on every platform).
pid_t parla_fork(void);
/// syncfs(2): flush the file system holding fd.
int parla_syncfs(int fd);
/// In a worker's child (one per chunk of items): die with the worker (PR_SET_PDEATHSIG), stdin from /dev/null, stdout to stderr.
void parla_item_child_setup(void);
/// The number of CPUs this process may run on (sched_getaffinity), at least 1.
int parla_allowed_cpus(void);
/// Restricts process `pid` (and the processes it forks later) to the `index`-th CPU this
/// process may run on; 0 on success, -1 with errno.
int parla_pin_to_allowed_cpu(pid_t pid, int index);
#endif
