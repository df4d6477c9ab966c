// The system calls of Parla's helper processes (parla_process.h).
#define _GNU_SOURCE
#include "parla_process.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void parla_die_with_parent(void) { prctl(PR_SET_PDEATHSIG, SIGKILL); }

int parla_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int parla_spawn_close_from(void *actions, int fd) {
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, fd);
}

int parla_fork(void) { return fork(); }

int parla_syncfs(int fd) { return syncfs(fd); }

static long elapsed_ms(const struct timespec *since) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

int parla_reap_within(int pid, int milliseconds, int *status) {
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int pidfd = -1;
#ifdef SYS_pidfd_open
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
    for (;;) {
        int reaped = waitpid(pid, status, WNOHANG);
        if (reaped == pid || (reaped < 0 && errno != EINTR)) {
            int saved = errno;
            if (pidfd >= 0) close(pidfd);
            errno = saved;
            return reaped == pid ? 1 : -1;
        }
        long left = milliseconds - elapsed_ms(&start);
        if (left <= 0) break;
        if (pidfd >= 0) {
            struct pollfd exited = { .fd = pidfd, .events = POLLIN };
            poll(&exited, 1, (int)left);  // readable once the child has exited; EINTR: look again
        } else {
            usleep(100);
        }
    }
    if (pidfd >= 0) close(pidfd);
    return 0;
}

int parla_allowed_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

int parla_pin_to_allowed_cpu(int pid, int index) {
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen++ == index) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return sched_setaffinity(pid, sizeof one, &one);
        }
    }
    errno = EINVAL;
    return -1;
}

int parla_helper_role(const char *name) {
    const char *value = getenv(name);
    if (value == NULL) return 0;
    char *end = NULL;
    long pid = (value[0] == '1' && value[1] == ':') ? strtol(value + 2, &end, 10) : 0;
    int valid = pid > 0 && end != NULL && *end == 0;
    unsetenv(name);
    if (!valid) return 0;
    if (getppid() == (pid_t)pid) return 1;
    // Not started by `pid`: inherited from elsewhere, unless `pid` has died (then this process
    // was orphaned and must not run the program's own main).
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) _exit(0);
    return 0;
}

// The pipe SIGINT and SIGTERM are written to (parla_catch_interrupts). A handler in place at
// once, rather than a signal ignored until a dispatch source has been registered (which
// libdispatch does later, on a thread of its own): a signal in between was lost.
static int interrupt_pipe[2] = { -1, -1 };
static pthread_once_t interrupts_once = PTHREAD_ONCE_INIT;

static void on_interrupt(int sig) {
    int saved = errno;
    unsigned char byte = (unsigned char)sig;
    if (write(interrupt_pipe[1], &byte, 1) < 0) {}  // a full pipe already says it
    errno = saved;
}

static void catch_interrupts_once(void) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
    interrupt_pipe[0] = fds[0];
    interrupt_pipe[1] = fds[1];
    struct sigaction action = { 0 };
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
}

int parla_catch_interrupts(void) {
    pthread_once(&interrupts_once, catch_interrupts_once);
    return interrupt_pipe[0];
}
