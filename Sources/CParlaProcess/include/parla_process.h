#ifndef PARLA_PROCESS_H
#define PARLA_PROCESS_H
// The system calls of Parla's helper processes (engine hosts, render workers) that Swift does
// not import, or not on every platform.
// No system header is included here: a type it declared (sigset_t, pid_t) would then belong to
// this module for Swift, and every Swift file using it would have to import this module.
/// Whether the helper role in environment variable `name` (value "1:PID", set by
/// ChildProcess) was given to this process by its parent PID. The variable is removed either
/// way, so programs this one starts never inherit it. A value inherited from further away
/// (the parent is alive but not PID) is ignored; if PID has died since it started this
/// process, the process exits, as the helper would have.
int parla_helper_role(const char *name);
/// What Parla's helpers (engine hosts, render workers) find in PULSE_SERVER and
/// ALSA_CONFIG_PATH: no sound server and no ALSA device. They never play, and espeak-ng's
/// audio probe at initialisation (engine_driver.c) then fails at once instead of opening a
/// stream. Set by ChildProcess and by the engine host forked before main.
#define PARLA_HELPER_PULSE_SERVER "unix:/dev/null"
#define PARLA_HELPER_ALSA_CONFIG_PATH "/dev/null"
/// In a child Parla started: die with the thread that started it (PR_SET_PDEATHSIG, SIGKILL).
void parla_die_with_parent(void);
/// pipe2(fds, O_CLOEXEC) (Swift does not import pipe2 without _GNU_SOURCE).
int parla_pipe_cloexec(int fds[2]);
/// Makes a spawned process close every descriptor from `fd` up
/// (posix_spawn_file_actions_addclosefrom_np, glibc 2.34).
int parla_spawn_close_from(void *actions, int fd);
/// fork(2) (Swift does not import it on every platform).
int parla_fork(void);
/// syncfs(2): flush the file system holding fd.
int parla_syncfs(int fd);
/// Waits at most `milliseconds` for child `pid` to exit, and reaps it: 1 with its wait status in
/// *status, 0 if it still runs (it is not reaped), -1 with errno on an error. It returns as the
/// child exits (a pidfd's poll), not at the next step of a sleep; a kernel without pidfds (before
/// Linux 5.3) is asked every 100 µs.
int parla_reap_within(int pid, int milliseconds, int *status);
/// The number of CPUs this process may run on (sched_getaffinity), at least 1.
int parla_allowed_cpus(void);
/// Restricts process `pid` (and the processes it forks later) to the `index`-th CPU this
/// process may run on; 0 on success, -1 with errno.
int parla_pin_to_allowed_cpu(int pid, int index);
/// Catches SIGINT and SIGTERM process-wide, from the moment it returns: each becomes a byte
/// (the signal's number) on a pipe, whose read end (non-blocking, close-on-exec) it returns;
/// -1 if the pipe cannot be made (the signals then keep their actions). Made once: every call
/// returns the same descriptor. A program run from this one gets the default actions back.
int parla_catch_interrupts(void);
#endif
