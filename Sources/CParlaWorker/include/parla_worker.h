#ifndef PARLA_WORKER_H
#define PARLA_WORKER_H
/// The environment variable that turns a process linking Parla into a render worker.
#define PARLA_RENDER_WORKER_ENV "PARLA_RENDER_WORKER"
/// In a worker's child (one per chunk of items): die with the worker (PR_SET_PDEATHSIG), stdin from /dev/null, stdout to stderr.
void parla_item_child_setup(void);
#endif
