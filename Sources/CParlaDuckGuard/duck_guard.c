// Parla's ducking guard. When Parla lowers other programs' streams while it speaks, it first
// tells this small helper process what it changed; when the speech ends it restores the
// volumes itself and tells the helper to forget them. If Parla's process dies without doing
// that (SIGKILL, a crash), the socket to the helper closes, and the helper, connected to the
// sound server since it started, sets every stream it still remembers back to its volume from before,
// unless the user has changed that stream's volume since. The helper is this same program
// started again with PARLA_DUCK_GUARD set: CParlaBeforeMain's constructor runs it before main.
#define _GNU_SOURCE
#include "parla_duck_guard.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pulse/pulseaudio.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { MAX_ENTRIES = 256 };

struct entry {
    uint32_t index;
    pa_cvolume original, ducked;
    int live;
};

static struct entry entries[MAX_ENTRIES];
static int pending_operations;

static struct entry *find(uint32_t index, int create) {
    struct entry *free_slot = NULL;
    for (int i = 0; i < MAX_ENTRIES; i++) {
        if (entries[i].live && entries[i].index == index) return &entries[i];
        if (!entries[i].live && free_slot == NULL) free_slot = &entries[i];
    }
    if (!create || free_slot == NULL) return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->index = index;
    free_slot->live = 1;
    return free_slot;
}

/// One line from Parla: "D index channels original... ducked..." or "F index".
static void take_line(char *line) {
    char *p = line, *end;
    char kind = *p++;
    unsigned long index = strtoul(p, &end, 10);
    if (end == p || index > UINT32_MAX) return;
    p = end;
    if (kind == 'F') {
        struct entry *e = find((uint32_t)index, 0);
        if (e) e->live = 0;
        return;
    }
    if (kind != 'D') return;
    unsigned long channels = strtoul(p, &end, 10);
    if (end == p || channels == 0 || channels > PA_CHANNELS_MAX) return;
    p = end;
    pa_cvolume original = {.channels = (uint8_t)channels}, ducked = {.channels = (uint8_t)channels};
    for (unsigned long i = 0; i < 2 * channels; i++) {
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v > PA_VOLUME_MAX) return;
        p = end;
        if (i < channels) original.values[i] = (pa_volume_t)v; else ducked.values[i - channels] = (pa_volume_t)v;
    }
    struct entry *e = find((uint32_t)index, 1);
    if (e == NULL) return;
    e->original = original;
    e->ducked = ducked;
}

/// Whether `now` is still the volume Parla set (PipeWire converts volumes to floats and back,
/// so a channel may differ by a little).
static int unchanged(const pa_cvolume *now, const pa_cvolume *ducked) {
    if (now->channels != ducked->channels) return 0;
    for (unsigned i = 0; i < now->channels; i++) {
        long d = (long)now->values[i] - (long)ducked->values[i];
        if (d < 0) d = -d;
        if (d > (long)ducked->values[i] / 100 + 2) return 0;
    }
    return 1;
}

// The guard holds one connection to the sound server from its start, so that a restore after
// Parla dies is only the requests themselves: connecting (the handshake, and PipeWire's
// setting up of a client) took most of a second on a loaded machine. If that connection is
// lost while Parla lives (the server restarted), the guard connects again once Parla is gone.
static pa_mainloop *loop;
static pa_context *context;
static int parent_gone, restoring, connections_after;
static int finished = -1;  // the exit status, once the guard's work is over
static char buffer[8192];
static size_t used;

static void finish_if_done(void) {
    if (restoring && pending_operations <= 0) finished = 0;
}

static void operation_done(pa_context *c, int success, void *userdata) {
    (void)c; (void)success; (void)userdata;
    pending_operations--;
    finish_if_done();
}

static void got_input(pa_context *c, const pa_sink_input_info *info, int eol, void *userdata) {
    (void)userdata;
    if (eol != 0 || info == NULL) {
        if (eol != 0) {
            pending_operations--;
            finish_if_done();
        }
        return;
    }
    struct entry *e = find(info->index, 0);
    if (e == NULL || !unchanged(&info->volume, &e->ducked)) return;
    pa_operation *op = pa_context_set_sink_input_volume(c, info->index, &e->original, operation_done, NULL);
    if (op) {
        pending_operations++;
        pa_operation_unref(op);
    }
}

static void start_restore(pa_context *c) {
    restoring = 1;
    for (int i = 0; i < MAX_ENTRIES; i++) {
        if (!entries[i].live) continue;
        pa_operation *op = pa_context_get_sink_input_info(c, entries[i].index, got_input, NULL);
        if (op) {
            pending_operations++;
            pa_operation_unref(op);
        }
    }
    finish_if_done();
}

static void connect_to_server(void);

static void state_changed(pa_context *c, void *userdata) {
    (void)userdata;
    if (c != context) return;
    pa_context_state_t state = pa_context_get_state(c);
    if (state == PA_CONTEXT_READY) {
        if (parent_gone && !restoring) start_restore(c);
    } else if (!PA_CONTEXT_IS_GOOD(state) && parent_gone) {
        // Lost, or never made: one more try, then give up (what is left is the user's to fix).
        restoring = 0;
        pending_operations = 0;
        if (connections_after < 1) connect_to_server(); else finished = 1;
    }
}

/// A new connection; the one it replaces (failed) is left as it is, as the guard ends soon.
static void connect_to_server(void) {
    if (parent_gone) connections_after++;
    pa_context *c = pa_context_new(pa_mainloop_get_api(loop), "Parla (restoring ducked volumes)");
    context = c;
    if (c == NULL) {
        if (parent_gone) finished = 1;
        return;
    }
    pa_context_set_state_callback(c, state_changed, NULL);
    const char *server = getenv("PARLA_DUCK_SERVER");
    if (pa_context_connect(c, server && *server ? server : NULL, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0 && context == c) {
        context = NULL;
        if (parent_gone) finished = 1;
    }
}

/// Parla's process has ended: restore what it left lowered, over the connection if it is
/// ready, or once it is.
static void parent_ended(void) {
    parent_gone = 1;
    int any = 0;
    for (int i = 0; i < MAX_ENTRIES; i++) any |= entries[i].live;
    if (!any) {
        finished = 0;
        return;
    }
    // A server that does not answer must not keep this process forever.
    alarm(5);
    pa_context_state_t state = context ? pa_context_get_state(context) : PA_CONTEXT_FAILED;
    if (state == PA_CONTEXT_READY) start_restore(context);
    else if (!PA_CONTEXT_IS_GOOD(state)) connect_to_server();
}

static void parla_readable(pa_mainloop_api *api, pa_io_event *event, int fd, pa_io_event_flags_t flags, void *userdata) {
    (void)flags; (void)userdata;
    ssize_t n = read(fd, buffer + used, sizeof buffer - 1 - used);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        api->io_free(event);
        parent_ended();
        return;
    }
    used += (size_t)n;
    char *start = buffer, *newline;
    while ((newline = memchr(start, '\n', used - (size_t)(start - buffer))) != NULL) {
        *newline = 0;
        take_line(start);
        start = newline + 1;
    }
    used -= (size_t)(start - buffer);
    memmove(buffer, start, used);
    if (used == sizeof buffer - 1) used = 0;  // a line that long is not Parla's
}

static int guard_main(void) {
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    loop = pa_mainloop_new();
    if (loop == NULL) return 1;
    pa_mainloop_api *api = pa_mainloop_get_api(loop);
    if (api->io_new(api, 0, PA_IO_EVENT_INPUT | PA_IO_EVENT_HANGUP | PA_IO_EVENT_ERROR, parla_readable, NULL) == NULL) return 1;
    connect_to_server();
    while (finished < 0 && pa_mainloop_iterate(loop, 1, NULL) >= 0) {}
    if (context) {
        // Disconnecting calls the state callback at once (TERMINATED), which would connect again:
        // the guard is done, on every way out of the loop.
        pa_context_set_state_callback(context, NULL, NULL);
        pa_context_disconnect(context);
    }
    return finished < 0 ? 1 : finished;
}

int parla_duck_guard_role(void) {
    const char *value = getenv(PARLA_DUCK_GUARD_ENV);
    if (value == NULL) return 0;
    char *end = NULL;
    long pid = strtol(value, &end, 10);
    int valid = pid > 0 && end != NULL && *end == 0 && end != value;
    unsetenv(PARLA_DUCK_GUARD_ENV);
    if (!valid) return 0;
    // Started by `pid`, or by `pid` that has already died (then its socket is closed and what it
    // sent is still to be restored). Anything else inherited the variable: run as usual.
    return getppid() == (pid_t)pid || getppid() == 1 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

int parla_duck_guard_main(void) { return guard_main(); }

int parla_duck_guard_start(const char *server, int *guard_pid) {
    *guard_pid = -1;
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigfillset(&defaults);
    sigdelset(&defaults, SIGKILL);
    sigdelset(&defaults, SIGSTOP);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
    // The environment: this process's, the role and, if given, the server.
    size_t count = 0;
    while (environ[count]) count++;
    char **env = calloc(count + 3, sizeof *env);
    char role[64], where[4096];
    int rc = -1;
    pid_t pid = -1;
    if (env != NULL) {
        size_t n = 0;
        for (size_t i = 0; i < count; i++) {
            if (strncmp(environ[i], PARLA_DUCK_GUARD_ENV "=", sizeof PARLA_DUCK_GUARD_ENV) == 0) continue;
            if (strncmp(environ[i], "PARLA_DUCK_SERVER=", 18) == 0) continue;
            env[n++] = environ[i];
        }
        snprintf(role, sizeof role, "%s=%d", PARLA_DUCK_GUARD_ENV, (int)getpid());
        env[n++] = role;
        if (server != NULL && snprintf(where, sizeof where, "PARLA_DUCK_SERVER=%s", server) < (int)sizeof where) env[n++] = where;
        env[n] = NULL;
        char *argv[] = {"/proc/self/exe", "(parla ducking guard)", NULL};
        rc = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv, env);
        free(env);
    }
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    close(fds[0]);
    if (rc != 0) {
        close(fds[1]);
        return -1;
    }
    *guard_pid = (int)pid;
    return fds[1];
}

static void *reap(void *pid) {
    while (waitpid((pid_t)(intptr_t)pid, NULL, 0) < 0 && errno == EINTR) {}
    return NULL;
}

void parla_duck_guard_end(int fd, int pid) {
    if (fd >= 0) close(fd);
    if (pid <= 0) return;
    // It exits once it has restored (a few ms, at most its 5 s alarm): waited for apart, so
    // that the caller does not wait. A program that reaps its children itself, or ignores
    // SIGCHLD, has it reaped already (ECHILD).
    pthread_t thread;
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0) return;
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 64 * 1024);
    pthread_create(&thread, &attributes, reap, (void *)(intptr_t)pid);
    pthread_attr_destroy(&attributes);
}

static int send_all(int fd, const char *text, size_t length) {
    while (length > 0) {
        ssize_t n = send(fd, text, length, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        text += n;
        length -= (size_t)n;
    }
    return 0;
}

int parla_duck_guard_remember(int fd, uint32_t index, unsigned channels, const uint32_t *original, const uint32_t *ducked) {
    if (channels == 0 || channels > PA_CHANNELS_MAX) return -1;
    char line[1024];
    int n = snprintf(line, sizeof line, "D %u %u", index, channels);
    for (unsigned i = 0; i < 2 * channels && n > 0 && n < (int)sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %u", i < channels ? original[i] : ducked[i - channels]);
    if (n <= 0 || n >= (int)sizeof line - 1) return -1;
    line[n++] = '\n';
    return send_all(fd, line, (size_t)n);
}

int parla_duck_guard_forget(int fd, uint32_t index) {
    char line[32];
    int n = snprintf(line, sizeof line, "F %u\n", index);
    return send_all(fd, line, (size_t)n);
}
