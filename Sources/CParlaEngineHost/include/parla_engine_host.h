#ifndef PARLA_ENGINE_HOST_H
#define PARLA_ENGINE_HOST_H
/// The environment variable that turns a process linking Parla's engine into its engine host
/// (set only in the environment of the child Parla starts; the host removes it at once).
#define PARLA_ENGINE_HOST_ENV "PARLA_ENGINE_HOST"
// The voice the host loads before its first utterance: Parla's voice for English, the
// catalog's default for "en" (voices/defaults.json), spelled as Parla sends it: the host
// compares names exactly (a test checks they agree).
#define PARLA_ENGINE_FIRST_VOICE "en-US"
// The directory of its file under espeak-ng-data/lang (the host loads the voice from the
// file: engine_host.c says why).
#define PARLA_ENGINE_FIRST_VOICE_FAMILY "gmw"
/// The engine host's loop: loads espeak-ng, then speaks the runs read from standard input
/// until it ends (engine_host.c). Returns the exit status.
int parla_engine_host_main(void);
/// Whether the helper role in environment variable `name` (value "1:PID", set by
/// ChildProcess) was given to this process by its parent PID. The variable is removed either
/// way, so programs this one starts never inherit it. A value inherited from further away
/// (the parent is alive but not PID) is ignored; if PID has died since it started this
/// process, the process exits, as the helper would have.
int parla_helper_role(const char *name);
/// In a child Parla started: die with the thread that started it (PR_SET_PDEATHSIG, SIGKILL).
void parla_die_with_parent(void);
/// pipe2(fds, O_CLOEXEC) (Swift does not import pipe2 without _GNU_SOURCE).
int parla_pipe_cloexec(int fds[2]);
/// Starts an engine host now, by forking this process (which must still have one thread: call
/// it from a constructor), for ``parla_take_prestarted_host`` to hand over later. The child
/// runs ``parla_engine_host_main`` with a socket from this process as its standard input and a
/// pipe to it as its standard output. Returns 1 if it did, 0 if it could not.
int parla_prestart_host(void);
/// The host ``parla_prestart_host`` started, once: returns 1 and fills in its process id,
/// the descriptor that writes to it and the one that reads from it; 0 if there is none.
int parla_take_prestarted_host(int *pid, int *input, int *output);
#include <spawn.h>
/// Makes a spawned process close every descriptor from `fd` up
/// (posix_spawn_file_actions_addclosefrom_np, glibc 2.34).
int parla_spawn_close_from(posix_spawn_file_actions_t *actions, int fd);
#endif
