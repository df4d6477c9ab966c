// Parla's engine host: espeak-ng in a process of its own (see EngineHost.swift for why).
//
// It reads runs to speak on standard input and writes the audio and the raw engine events
// on standard output, in the messages of parla_engine_wire.h (which EngineHost.swift reads
// too). It speaks through the engine driver (engine_driver.c), as render workers do. It
// repairs nothing: Parla treats what it reports as untrusted. It runs as the small `parla-engine` program, or inside any program that links
// Parla, started again with PARLA_ENGINE_HOST=1 (CParlaBeforeMain's constructor).
//
// Every utterance is spoken by a child forked for it from the loaded engine (message
// BEGIN), as render workers do for their chunks: espeak-ng 1.51 can corrupt its memory on one
// text and crash on a later one, and keeps hidden state from one text to the next, so
// each utterance starts from the same pristine state. The child writes into a pipe of this
// process, which passes on only whole messages; if the child dies, the host says so
// (CRASHED) and goes on with the next utterance.
#define _GNU_SOURCE
#include "parla_engine_host.h"
#include "parla_engine_driver.h"
#include "parla_engine_wire.h"
#include "parla_process.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Output, gathered per audio block.
static unsigned char *out;
static size_t out_len, out_cap;
static int out_lost;  // Parla (or the host, for a child) is gone
static int out_fd = 1;  // standard output, or a child's pipe to the host

static void put(const void *bytes, size_t n) {
    if (out_len + n > out_cap) {
        size_t cap = out_cap ? out_cap : 65536;
        while (cap < out_len + n) cap *= 2;
        unsigned char *grown = realloc(out, cap);
        if (!grown) { out_lost = 1; return; }
        out = grown;
        out_cap = cap;
    }
    memcpy(out + out_len, bytes, n);
    out_len += n;
}

static void put_u32(uint32_t v) {
    unsigned char b[4] = { v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF, (v >> 24) & 0xFF };
    put(b, 4);
}

static void put_header(int type, uint32_t length) {
    unsigned char t = (unsigned char)type;
    put(&t, 1);
    put_u32(length);
}

static void flush_out(void) {
    size_t done = 0;
    while (done < out_len && !out_lost) {
        ssize_t n = write(out_fd, out + done, out_len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { out_lost = 1; break; }
        done += (size_t)n;
    }
    out_len = 0;
}

static int read_full(int fd, void *buffer, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buffer + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

static uint32_t get_u32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

// Reads one message; returns its type, or -1 at the end of input. *payload is malloc'd.
static int read_message(unsigned char **payload, uint32_t *length) {
    unsigned char header[5];
    if (!read_full(0, header, 5)) return -1;
    uint32_t n = get_u32(header + 1);
    if (n > PARLA_ENGINE_MAX_MESSAGE) return -1;
    unsigned char *p = malloc(n ? n : 1);
    if (!p || !read_full(0, p, n)) { free(p); return -1; }
    *payload = p;
    *length = n;
    return header[0];
}

// The run being spoken.
static uint32_t current_seq;
static int stop_requested;

// Whether a stop for the current run (or a later one) waits on standard input.
static int check_stop(void) {
    if (stop_requested) return 1;
    struct pollfd p = { .fd = 0, .events = POLLIN };
    while (poll(&p, 1, 0) > 0) {
        unsigned char *payload = NULL;
        uint32_t n = 0;
        int type = read_message(&payload, &n);
        if (type < 0) { stop_requested = 1; out_lost = 1; break; }  // Parla is gone
        if (type == PARLA_MSG_STOP && n >= 4 && get_u32(payload) >= current_seq) stop_requested = 1;
        free(payload);
        if (stop_requested) break;
        p.revents = 0;
    }
    return stop_requested;
}

// What the engine reports for a run becomes messages. A run's first audio block is written at
// once (the first sound of live speech waits for nothing more); later ones, with the events
// between them, are gathered into writes of OUT_BATCH bytes (0.37 s of audio at 22,050 Hz, a
// few ms of espeak-ng's work) and the rest goes at the run's end: espeak-ng hands over ~4 KB
// a block, and a write, a poll and the host's read and write for each block were most of
// `parla say -f`'s system time. A stop asked for is looked for at each write (check_stop).
// Piper's runs are not gathered: a voice hands out each decoded chunk in 4 KB blocks, and a
// chunk's tail would wait for the next chunk's decoding (20-30 ms of the first sound), while
// the writes cost nothing beside the model's work.
enum { OUT_BATCH = 16384 };
static int run_audio_sent, checked_since_write, run_gathers;

static int run_should_stop(void *context) {
    (void)context;
    if (out_lost) return 1;
    if (checked_since_write) return stop_requested;
    checked_since_write = 1;
    return check_stop();
}

static void run_audio(void *context, const int16_t *samples, int count) {
    (void)context;
    if (count <= 0) return;
    put_header(PARLA_MSG_AUDIO, (uint32_t)count * 2);
    put(samples, (size_t)count * 2);
    if (run_gathers && run_audio_sent && out_len < OUT_BATCH) return;
    run_audio_sent = 1;
    checked_since_write = 0;
    flush_out();
}

static void run_event(void *context, int kind, int position, int length, int sample) {
    (void)context;
    unsigned char k = (unsigned char)kind;
    put_header(PARLA_MSG_EVENT, 13);
    put(&k, 1);
    put_u32((uint32_t)position);
    put_u32((uint32_t)length);
    put_u32((uint32_t)sample);
}

static void run_phonemes(void *context, int position, const char *ipa, int length) {
    (void)context;
    if (length <= 0 || length > 4096) return;
    put_header(PARLA_MSG_PHONEMES, 4 + (uint32_t)length);
    put_u32((uint32_t)position);
    put(ipa, (size_t)length);
}

// Why the last run failed, sent with its DONE.
static char run_error[2048];

// The Piper voice a child spoke with (its slot, -1 for none): the child's exit status tells
// the host (EXIT_USED_PIPER + slot), whose next spare then gives that voice a threaded
// session while it waits (spare_threads_voice). Only then: making one costs some 80 ms of
// CPU, which every espeak-ng utterance would otherwise pay once Piper had been used.
enum { EXIT_USED_PIPER = 64 };
static int spare_threads_voice = -1;

// Speaks a SPEAK message's run; returns its PARLA_RUN_ status.
static int speak(const unsigned char *p, uint32_t n) {
    if (n < 26) return PARLA_RUN_FAILED;
    current_seq = get_u32(p);
    stop_requested = 0;
    run_audio_sent = 0;
    checked_since_write = 0;
    uint32_t voice_length = p[24] | (uint32_t)p[25] << 8;
    if (26 + (size_t)voice_length > n) return PARLA_RUN_FAILED;
    // The voice and the text, each NUL-terminated, in one block.
    size_t text_length = n - 26 - voice_length;
    char *strings = malloc(voice_length + 1 + text_length + 1);
    if (!strings) return PARLA_RUN_FAILED;
    memcpy(strings, p + 26, voice_length);
    strings[voice_length] = 0;
    memcpy(strings + voice_length + 1, p + 26 + voice_length, text_length);
    strings[voice_length + 1 + text_length] = 0;
    run_gathers = strncmp(strings, PARLA_PIPER_PREFIX, strlen(PARLA_PIPER_PREFIX)) != 0;
    parla_run run = {
        .voice = strings, .text = strings + voice_length + 1, .text_length = text_length,
        .flags = get_u32(p + 4), .rate = (int32_t)get_u32(p + 8), .pitch = (int32_t)get_u32(p + 12),
        .volume = (int32_t)get_u32(p + 16), .punctuation = (int32_t)get_u32(p + 20),
    };
    parla_run_output output = { NULL, run_should_stop, run_audio, run_event, run_phonemes };
    int status = parla_engine_speak(&run, &output, run_error, sizeof run_error);
    free(strings);
    if (stop_requested && status < PARLA_RUN_FAILED) return PARLA_RUN_STOPPED;
    return status;
}

// Whether the host has read espeak-ng's list of voices (2.4 ms), which a child needs to select
// a voice by a name that is not a lower-case file path under espeak-ng-data/lang ("ar" is
// sem/ar); without it, the child reads the list itself. Read once the host has been idle
// after an utterance, not before READY: the first sound waits for READY, and a process that
// ends after one utterance (`parla say -o`) should not pay for it. The children forked after
// it inherit the list.
static int voices_listed;

static void add_length(void *context, const char *name) { *(size_t *)context += strlen(name) + 1; }

static void add_name(void *context, const char *name) {
    (void)context;
    put(name, strlen(name));
    put("\n", 1);
}

static void list_voices(void) {
    voices_listed = 1;
    size_t total = 0;
    parla_engine_voice_names(add_length, &total);
    put_header(PARLA_MSG_VOICE_LIST, (uint32_t)total);
    parla_engine_voice_names(add_name, NULL);
}

// A child's life: speak the utterance's runs until PARLA_MSG_FINISH or the end of input.
static int speak_utterance(void) {
    for (;;) {
        unsigned char *payload = NULL;
        uint32_t n = 0;
        int type = read_message(&payload, &n);
        if (type < 0 || type == PARLA_MSG_FINISH) { free(payload); break; }
        if (type == PARLA_MSG_SPEAK) {
            run_error[0] = 0;
            int status = speak(payload, n);
            if (out_lost) { free(payload); return 0; }
            size_t why = status >= PARLA_RUN_FAILED ? strlen(run_error) : 0;
            put_header(PARLA_MSG_DONE, 8 + (uint32_t)why);
            put_u32(current_seq);
            put_u32((uint32_t)status);
            put(run_error, why);
        } else if (type == PARLA_MSG_LIST_VOICES) {
            list_voices();
        }
        // PARLA_MSG_STOP here is for a run that has already ended.
        free(payload);
        flush_out();
        if (out_lost) return 0;
    }
    flush_out();
    return 0;
}

// Whether the riser is stopped for an utterance's first sound (see waiting_child).
static int riser_stopped;
static void resume_riser(void);

// Passes the child's whole messages on to standard output until its pipe closes; returns
// whether standard output still works. A message cut short by the child's death is dropped.
static int relay(int from) {
    unsigned char *buffer = NULL;
    size_t length = 0, capacity = 0;
    for (;;) {
        if (capacity - length < 65536) {
            size_t grown_capacity = capacity ? capacity * 2 : 131072;
            unsigned char *grown = realloc(buffer, grown_capacity);
            if (!grown) { free(buffer); return 0; }
            buffer = grown;
            capacity = grown_capacity;
        }
        ssize_t r = read(from, buffer + length, capacity - length);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        length += (size_t)r;
        size_t whole = 0;
        int audio = 0;
        while (length - whole >= 5) {
            uint32_t n = get_u32(buffer + whole + 1);
            if (n > PARLA_ENGINE_MAX_MESSAGE) { whole = length; break; }  // garbage: drop it all
            if (length - whole < 5 + (size_t)n) break;
            audio |= buffer[whole] == PARLA_MSG_AUDIO;
            whole += 5 + (size_t)n;
        }
        if (audio) resume_riser();
        if (whole) {
            out_len = 0;
            put(buffer, whole);
            flush_out();
            if (out_lost) { free(buffer); return 0; }
            memmove(buffer, buffer + whole, length - whole);
            length -= whole;
        }
    }
    free(buffer);
    return 1;
}

// Children forked while the host waits for the next utterance (the fork is then off the path
// of the first sound). Each waits for a byte on `go`, written once the host has read the
// utterance's PARLA_MSG_BEGIN, then speaks as a child forked then would; its output is `out`.
//
// - The spare is ready at once. The Piper sessions it inherits have one thread each (threads
//   do not survive a fork), made warm by the host when it loaded the voice.
// - The riser, forked beside it for the Piper voice just loaded or spoken with, first gives
//   that voice sessions with threads of their own and makes their first run, which is slow
//   (some 80 ms of CPU to make them, 200 ms in all): "Hello there," is then heard in 42 ms of
//   inference on 2 threads instead of 67 on one. Then it says so on `ready`, and replaces the
//   spare. Until then the spare speaks. Only for a Piper voice: every espeak-ng utterance
//   would otherwise pay for it once Piper had been used.
//
// The riser is stopped (SIGSTOP) from an utterance's BEGIN until the utterance's first audio
// reaches the host, or its end: its work never shares the CPU with a first sound. (It used to
// be the spare itself, rethreading on a thread of its own while it waited: an utterance that
// came meanwhile shared the CPU with it. An Orca focus message sent through speech-dispatcher
// just after a cancelled one was heard 88-168 ms after its SPEAK, median 124, against 92-110
// with no rethreading at all, on a 2-core VM.) A stopped process holds nothing the others
// need: it can be stopped anywhere, which a thread of the spare could not be.
typedef struct {
    pid_t pid;       // 0: none
    int go, out;     // the host's ends of the pipes that start it and carry its output
    int ready;       // a riser's: one byte (1: its sessions are made, 0: they could not be); else -1
    int voice;       // the Piper slot whose sessions it threaded, or -1
} waiting_child;

static const waiting_child no_child = { 0, -1, -1, -1, -1 };
static waiting_child spare = { 0, -1, -1, -1, -1 }, riser = { 0, -1, -1, -1, -1 };

static void reap(pid_t pid) {
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}

// A spare killed as the riser replaced it, not yet reaped: its teardown (some ms) is not
// waited for where an utterance may be starting.
static pid_t unreaped;

static void reap_dropped(void) {
    reap(unreaped);
    unreaped = 0;
}

// How long a riser waits before it starts (PARLA_PIPER_RETHREAD_QUIET_MS, for measuring): one
// utterance right after a voice loads (a one-shot `parla say`) should not share the CPU with it.
enum { RETHREAD_QUIET_MS = 100 };

// The threads a live Piper session gets: PARLA_PIPER_LIVE_THREADS, else the cores, at most 4.
static int live_threads(void) {
    const char *asked = getenv("PARLA_PIPER_LIVE_THREADS");
    if (asked && atoi(asked) > 0) return atoi(asked);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 4 ? 4 : cores > 1 ? (int)cores : 1;
}

static void close_ends(const waiting_child *c) {
    if (c->go >= 0) close(c->go);
    if (c->out >= 0) close(c->out);
    if (c->ready >= 0) close(c->ready);
}

// Ends a waiting child (its pipes closed, killed); returns its pid, still to be reaped (0 for none).
static pid_t end_waiting(waiting_child *c) {
    pid_t pid = c->pid;
    if (pid <= 0) return 0;
    close_ends(c);
    kill(pid, SIGKILL);
    *c = no_child;
    if (c == &riser) riser_stopped = 0;
    return pid;
}

// Ends a waiting child and reaps it.
static void drop_waiting(waiting_child *c) { reap(end_waiting(c)); }

// Forks a waiting child: a riser for Piper slot `voice`, or the spare if it is -1. None (pid 0)
// if a pipe or the fork fails.
static waiting_child fork_waiting(int voice) {
    int go[2] = { -1, -1 }, output[2] = { -1, -1 }, ready[2] = { -1, -1 };
    if (pipe(go) != 0 || pipe(output) != 0 || (voice >= 0 && pipe(ready) != 0)) {
        for (int i = 0; i < 2; i++) {
            if (go[i] >= 0) close(go[i]);
            if (output[i] >= 0) close(output[i]);
        }
        return no_child;
    }
    pid_t child = fork();
    if (child == 0) {
        parla_die_with_parent();
        close(go[1]);
        close(output[0]);
        if (voice >= 0) close(ready[0]);
        // The other waiting child's pipes: held here, the host's closing them would not reach it.
        close_ends(&spare);
        close_ends(&riser);
        // A waiting child writes to its own pipe (out_fd, below), never to Parla's: its copy of
        // standard output goes, so that Parla's end reads its end as soon as the host exits,
        // not when the child, killed as the host dies, has been torn down too (`say -o`: about
        // 0.4 ms more at every exit). It keeps standard input: the utterance comes on it.
        int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null_fd >= 0) {
            dup2(null_fd, STDOUT_FILENO);
            close(null_fd);
        }
        if (voice >= 0) {
            const char *quiet_asked = getenv("PARLA_PIPER_RETHREAD_QUIET_MS");
            int quiet = quiet_asked ? atoi(quiet_asked) : RETHREAD_QUIET_MS;
            poll(NULL, 0, quiet > 0 ? quiet : 0);
            unsigned char made = parla_engine_rethread_piper_slot(voice, live_threads()) == 1;
            ssize_t w;
            do w = write(ready[1], &made, 1);
            while (w < 0 && errno == EINTR);
            close(ready[1]);
            if (!made) _exit(0);
        }
        unsigned char start;
        ssize_t r;
        do r = read(go[0], &start, 1);
        while (r < 0 && errno == EINTR);
        if (r != 1) _exit(0);  // the host has ended, or dropped this child
        close(go[0]);
        out_fd = output[1];
        int loads = parla_engine_piper_loads();
        int status = speak_utterance();
        // Its slot means the host's only if this child loaded no voice of its own.
        int used = parla_engine_piper_loads() == loads ? parla_engine_last_piper_slot() : -1;
        _exit(status == 0 && used >= 0 ? EXIT_USED_PIPER + used : status);
    }
    close(go[0]);
    close(output[1]);
    if (voice >= 0) close(ready[1]);
    if (child < 0) {
        close(go[1]);
        close(output[0]);
        if (voice >= 0) close(ready[0]);
        return no_child;
    }
    return (waiting_child){ child, go[1], output[0], voice >= 0 ? ready[0] : -1, voice };
}

// Reads the riser's word, if it has said it: made, it replaces the spare; failed, it is dropped
// (and no other is forked for that voice until it is spoken with again).
static void check_riser(void) {
    if (riser.pid <= 0 || riser.ready < 0) return;
    struct pollfd p = { .fd = riser.ready, .events = POLLIN };
    int ready;
    do ready = poll(&p, 1, 0);
    while (ready < 0 && errno == EINTR);
    if (ready <= 0) return;
    unsigned char made = 0;
    ssize_t r;
    do r = read(riser.ready, &made, 1);
    while (r < 0 && errno == EINTR);
    if (r == 1 && made == 1) {
        if (spare.pid > 0) {
            reap_dropped();
            unreaped = end_waiting(&spare);
        }
        close(riser.ready);
        riser.ready = -1;
        spare = riser;
        riser = no_child;
    } else {
        drop_waiting(&riser);
        spare_threads_voice = -1;
    }
}

// Lets a stopped riser go on.
static void resume_riser(void) {
    if (!riser_stopped) return;
    riser_stopped = 0;
    if (riser.pid > 0) kill(riser.pid, SIGCONT);
}

// Hands the spare child the utterance: its process id, and its output in *from; 0 if there
// is no spare, or it could not be started (it is then reaped).
static pid_t take_spare(int *from) {
    if (spare.pid <= 0) return 0;
    pid_t child = spare.pid;
    const unsigned char start = 1;
    ssize_t w;
    do w = write(spare.go, &start, 1);
    while (w < 0 && errno == EINTR);
    close(spare.go);
    int output = spare.out;
    spare = no_child;
    if (w != 1) {
        close(output);
        kill(child, SIGKILL);
        reap(child);
        return 0;
    }
    *from = output;
    return child;
}

// Speaks utterance `id` in a child (the spare, else one forked now); reports PARLA_MSG_CRASHED (the
// id and the signal, 0 for none) if it died of a signal or failed, or could not be started.
static void run_utterance(uint32_t id) {
    check_riser();
    if (riser.pid > 0 && kill(riser.pid, SIGSTOP) == 0) riser_stopped = 1;
    int from = -1;
    pid_t child = take_spare(&from);
    if (child <= 0) {
        spare = fork_waiting(-1);
        child = take_spare(&from);
    }
    if (child <= 0) child = -1;  // no pipe or no fork: reported as a crash below
    int alive = child > 0 && relay(from);
    resume_riser();
    reap_dropped();
    if (from >= 0) close(from);
    int status = 0;
    if (child > 0) {
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    }
    if (!alive && child > 0) return;  // Parla is gone
    spare_threads_voice = -1;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    if (child > 0 && WIFEXITED(status) && code >= EXIT_USED_PIPER && code < EXIT_USED_PIPER + PARLA_ENGINE_PIPER_SLOTS) {
        spare_threads_voice = code - EXIT_USED_PIPER;
        code = 0;
    }
    // A riser for another voice is of no use now: one for this voice takes its place.
    if (riser.pid > 0 && spare_threads_voice >= 0 && riser.voice != spare_threads_voice) drop_waiting(&riser);
    if (child < 0 || WIFSIGNALED(status) || (WIFEXITED(status) && code != 0)) {
        put_header(PARLA_MSG_CRASHED, 8);
        put_u32(id);
        put_u32(child < 0 ? 0 : WIFSIGNALED(status) ? (uint32_t)WTERMSIG(status) : 0);
        flush_out();
    }
}

// Waits for standard input, taking the riser's word meanwhile if it comes, and reaping a spare
// it replaced once that has died.
static void wait_for_input(void) {
    for (;;) {
        if (unreaped > 0 && waitpid(unreaped, NULL, WNOHANG) != 0) unreaped = 0;
        int watch = riser.pid > 0 && riser.ready >= 0;
        if (!watch && unreaped <= 0) return;
        struct pollfd p[2] = { { .fd = 0, .events = POLLIN }, { .fd = watch ? riser.ready : -1, .events = POLLIN } };
        int ready = poll(p, 2, unreaped > 0 ? 5 : -1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0 || p[0].revents) return;
        if (p[1].revents) check_riser();
    }
}

// Whether nothing comes on standard input for `milliseconds`.
static int idle(int milliseconds) {
    struct pollfd input = { .fd = 0, .events = POLLIN };
    int ready;
    do ready = poll(&input, 1, milliseconds);
    while (ready < 0 && errno == EINTR);
    return ready == 0;
}

void parla_helper_prepare_environment(void) {
    // ONNX Runtime otherwise keeps a telemetry database under ~/.cache/Microsoft.
    setenv("ORT_DISABLE_TELEMETRY", "1", 0);
}

int parla_engine_host_main(void) {
    parla_helper_prepare_environment();
    signal(SIGPIPE, SIG_IGN);  // a write to a gone Parla fails and ends the loop instead
    // Ctrl-C (and Ctrl-\) in a terminal signal its whole foreground process group, the host
    // with its program: the program decides what they mean, and the host ends when its input
    // does (or with it, PR_SET_PDEATHSIG). Killed by one before parla acted on it, the host
    // turned an interrupted `parla say` into "espeak-ng crashed (Interrupt)", exit status 1.
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    char why[600];
    int rate = parla_engine_init(why, sizeof why);
    if (rate <= 0) {
        put_header(PARLA_MSG_READY, 8 + (uint32_t)strlen(why));
        put_u32(PARLA_ENGINE_PROTOCOL);
        put_u32(0);
        put(why, strlen(why));
        flush_out();
        return 1;
    }
    // Loading the first voice loads data every voice shares (3 to 14 ms); done once here, a
    // forked child then selects any voice in 0.1 to 1.4 ms (once the list of voices is read,
    // below). The voice loaded is Parla's English one (the catalog's default for "en"): a
    // child whose first run is in it keeps it as loaded here (selecting it again took 0.3 to
    // 0.7 ms).
    parla_engine_select_first_voice();
    put_header(PARLA_MSG_READY, 8);
    put_u32(PARLA_ENGINE_PROTOCOL);
    put_u32((uint32_t)rate);
    flush_out();
    spare = fork_waiting(-1);
    for (;;) {
        // The next utterance's children are forked while nothing waits to be read: a message
        // already there (the next utterance, which then forks its child at once, or the end
        // of input as a one-shot `parla say` exits) is not kept waiting by a fork of no use
        // (0.4 to 0.7 ms of `say -o`'s exit went to one).
        check_riser();  // a riser ready replaces the spare: none is forked to be dropped
        if (spare.pid <= 0 && !out_lost && idle(0)) spare = fork_waiting(-1);
        if (riser.pid <= 0 && spare_threads_voice >= 0 && spare.voice != spare_threads_voice && live_threads() > 1 && !out_lost &&
            idle(0))
            riser = fork_waiting(spare_threads_voice);
        wait_for_input();
        unsigned char *payload = NULL;
        uint32_t n = 0;
        int type = read_message(&payload, &n);
        if (type < 0) {
            // Parla has ended the host: the waiting children die as the host exits, and their
            // teardown may as well begin now, beside the host's.
            if (spare.pid > 0) kill(spare.pid, SIGKILL);
            if (riser.pid > 0) kill(riser.pid, SIGKILL);
            break;
        }
        if (type == PARLA_MSG_BEGIN) {
            run_utterance(n >= 4 ? get_u32(payload) : 0);
            if (!voices_listed && idle(100)) {
                parla_engine_read_voice_list();
                voices_listed = 1;
            }
        } else if (type == PARLA_MSG_LIST_VOICES) {
            list_voices();
        } else if (type == PARLA_MSG_PRELOAD) {
            // Loaded here, before the fork, so every child has it warm; the waiting children
            // were forked without it and are replaced. A voice that cannot load fails in the child
            // that needs it, with the reason.
            char voice[4200];
            int loaded = 0, status = PARLA_RUN_FAILED;
            run_error[0] = 0;
            if (n < sizeof voice - strlen(PARLA_PIPER_PREFIX)) {
                snprintf(voice, sizeof voice, "%s%.*s", PARLA_PIPER_PREFIX, (int)n, (const char *)payload);
                int known = parla_engine_piper_slot(voice) >= 0;
                status = known ? 1 : parla_engine_preload_warm(voice, run_error, sizeof run_error);
                loaded = status == 1;
                if (loaded) spare_threads_voice = parla_engine_piper_slot(voice);
                // Its first run was made as it loaded (parla_piper_load_warm): every child
                // starts warm (see fork_waiting). A riser for another voice makes way.
                if (loaded && (!known || riser.voice != spare_threads_voice)) drop_waiting(&riser);
                if (loaded && !known) {
                    drop_waiting(&spare);
                    spare = fork_waiting(-1);
                }
            } else {
                snprintf(run_error, sizeof run_error, "the Piper voice's path is too long");
            }
            size_t why = loaded ? 0 : strlen(run_error);
            put_header(PARLA_MSG_PRELOADED, 4 + (uint32_t)why);
            put_u32((uint32_t)status);
            put(run_error, why);
        } else if (type == PARLA_MSG_SPEAK) {
            // A run outside an utterance: refused.
            put_header(PARLA_MSG_DONE, 8);
            put_u32(n >= 4 ? get_u32(payload) : 0);
            put_u32(PARLA_RUN_FAILED);
        }
        free(payload);
        // PARLA_MSG_STOP and PARLA_MSG_FINISH here are for an utterance that has already ended.
        flush_out();
        if (out_lost) return 0;
    }
    return 0;
}
