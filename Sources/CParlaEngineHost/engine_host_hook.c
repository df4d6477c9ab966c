// Starting engine hosts: forked before main by `parla say` (parla_prestart_host, called from
// CParlaBeforeMain's constructor) and handed to EngineHost. Every program that links Parla's
// engine can also serve as its own engine host, for when the small `parla-engine` program is
// not installed beside it: EngineHost starts /proc/self/exe with PARLA_ENGINE_HOST=1, and
// CParlaBeforeMain's constructor runs the host's loop (engine_host.c) before main(), so the
// program's own main never runs there. espeak-ng lives in that process because it can crash
// on some texts; see EngineHost.swift.
#define _GNU_SOURCE
#include "parla_engine_host.h"
#include "parla_process.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int prestarted_pid, prestarted_input = -1, prestarted_output = -1;

int parla_prestart_host(void) {
    int to_child[2], from_child[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, to_child) != 0) return 0;
    if (pipe2(from_child, O_CLOEXEC) != 0) {
        close(to_child[0]);
        close(to_child[1]);
        return 0;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        // The child: nothing of Swift runs here, only engine_host.c. Standard input and output
        // become the channel to Parla; nothing else of the parent's stays open.
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        if (getenv("PARLA_ENGINE_DEBUG") == NULL) {
            int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
            if (null >= 0) dup2(null, 2);
        }
        closefrom(3);
        // Crashes of espeak-ng must kill this process (the host's zygote reports its children's
        // deaths); the Swift runtime's crash handler may already be installed.
        const int defaults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS,
                                SIGTERM, SIGHUP, SIGPIPE, SIGCHLD};
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) signal(defaults[i], SIG_DFL);
        // The terminal's Ctrl-C and Ctrl-\ are the program's to act on (parla_engine_host_main).
        signal(SIGINT, SIG_IGN);
        signal(SIGQUIT, SIG_IGN);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_NAME, "parla-engine");
        setenv("PULSE_SERVER", PARLA_HELPER_PULSE_SERVER, 1);
        setenv("ALSA_CONFIG_PATH", PARLA_HELPER_ALSA_CONFIG_PATH, 1);
        parla_die_with_parent();
        if (getppid() != parent) _exit(0);
        _exit(parla_engine_host_main());
    }
    close(to_child[0]);
    close(from_child[1]);
    if (pid < 0) {
        close(to_child[1]);
        close(from_child[0]);
        return 0;
    }
    prestarted_pid = pid;
    prestarted_input = to_child[1];
    prestarted_output = from_child[0];
    return 1;
}

int parla_take_prestarted_host(int *pid, int *input, int *output) {
    // One engine thread takes it, once; the constructor that set it ran before any thread.
    static int taken;
    if (prestarted_pid <= 0 || __atomic_exchange_n(&taken, 1, __ATOMIC_ACQ_REL)) return 0;
    *pid = prestarted_pid;
    *input = prestarted_input;
    *output = prestarted_output;
    return 1;
}
