#ifndef PARLA_DUCK_GUARD_H
#define PARLA_DUCK_GUARD_H
#include <stdint.h>
/// The environment variable that turns a process linking Parla into its ducking guard (value:
/// the pid of the process that started it; set only in that child's environment).
#define PARLA_DUCK_GUARD_ENV "PARLA_DUCK_GUARD"
/// Whether this process was started as a ducking guard (by parla_duck_guard_start; it removes
/// the variable): then CParlaBeforeMain's constructor runs parla_duck_guard_main.
int parla_duck_guard_role(void);
/// The guard's loop: restores what the process that started it leaves ducked. Returns the exit
/// status.
int parla_duck_guard_main(void);
/// Starts the ducking guard: this program again (/proc/self/exe), in a session of its own so
/// that Ctrl-C at a terminal does not reach it, with a socket from this process as its
/// standard input. `server` is the sound server to restore volumes on (NULL: the default).
/// Returns the descriptor to write the guard's lines to (close-on-exec), or -1; the guard's
/// pid in `*pid`.
int parla_duck_guard_start(const char *server, int *pid);
/// Ends the guard: closes `fd` (the guard restores what is still lowered, then exits) and
/// waits for the guard `pid` on a thread of its own, so that a program that outlives it is
/// not left with a zombie.
void parla_duck_guard_end(int fd, int pid);
/// Tells the guard that sink input `index` was lowered from `original` to `ducked` (one value
/// per channel, `channels` of them): if this process ends before ``parla_duck_guard_forget``
/// is sent for it, the guard sets it back to `original`, unless its volume is no longer
/// `ducked` (someone changed it since). Returns 0, or -1 if the guard is gone.
int parla_duck_guard_remember(int fd, uint32_t index, unsigned channels, const uint32_t *original,
                              const uint32_t *ducked);
/// Tells the guard that sink input `index` needs nothing more from it. Returns 0 or -1.
int parla_duck_guard_forget(int fd, uint32_t index);
#endif
