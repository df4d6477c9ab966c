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
#include <pthread.h>
#include <stdatomic.h>
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
        while (length - whole >= 5) {
            uint32_t n = get_u32(buffer + whole + 1);
            if (n > PARLA_ENGINE_MAX_MESSAGE) { whole = length; break; }  // garbage: drop it all
            if (length - whole < 5 + (size_t)n) break;
            whole += 5 + n;
        }
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

// The child for the next utterance, forked while the host waits for it (the fork is then off
// the path of the first sound): it waits for a byte on `spare_go`, written once the host has
// read the utterance's PARLA_MSG_BEGIN, then speaks as a child forked then would. Its output is
// `spare_out`. No spare: spare_pid is 0.
static pid_t spare_pid;
static int spare_go = -1, spare_out = -1;

// Whether the spare's go pipe (*context) has something to read: an utterance is waiting.
// How long a spare waits for an utterance before it gives the Piper voice threaded sessions.
enum { RETHREAD_QUIET_MS = 100 };

// The spare's rethreading runs beside its wait for an utterance, which sets `utterance_came`
// when it comes: the rethreading then stops (at the next session or run) and keeps the
// sessions it replaced, unless it was swapping its own in, which parla_engine_rethread_settle
// waits for.
static atomic_int utterance_came;
typedef struct { int slot, threads; } rethreading;

static int utterance_waiting(void *context) {
    (void)context;
    return atomic_load(&utterance_came);
}

static void *rethread_beside(void *context) {
    const rethreading *r = context;
    parla_engine_rethread_piper_slot(r->slot, r->threads, utterance_waiting, NULL);
    return NULL;
}

static void fork_spare(void) {
    int go[2], output[2];
    if (pipe(go) != 0) return;
    if (pipe(output) != 0) {
        close(go[0]);
        close(go[1]);
        return;
    }
    pid_t child = fork();
    if (child == 0) {
        parla_die_with_parent();
        close(go[1]);
        close(output[0]);
        // The spare writes to its own pipe (out_fd, below), never to Parla's: its copy of
        // standard output goes, so that Parla's end reads its end as soon as the host exits,
        // not when the spare, killed as the host dies, has been torn down too (`say -o`: about
        // 0.4 ms more at every exit). It keeps standard input: the utterance comes on it.
        int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null_fd >= 0) {
            dup2(null_fd, STDOUT_FILENO);
            close(null_fd);
        }
        // While it waits, the spare gives the Piper voices it inherited sessions with threads
        // of their own (those made before the fork have one: threads do not survive it):
        // "Hello there," is heard in 42 ms of inference on 2 threads instead of 67 on one.
        // The new sessions also make their first run here, which is slow (see piper_voice.c):
        // some 200 ms in all. Only for the voice just loaded or spoken with
        // (spare_threads_voice); an utterance that comes while the sessions are being made
        // stops it, and is spoken with the sessions inherited, which are warm (the host made
        // their first run when it loaded the voice): a 48-frame first chunk in 36 ms on one
        // thread, against 18 on two, and some 100 ms for a session's first run. The
        // rethreading runs on a thread of its own, so that an utterance that comes meanwhile
        // starts at once: on the spare's main thread, it waited for the session being made
        // (the encoder's takes 51 ms), and an Orca focus message through speech-dispatcher
        // that came then was heard 23 ms later (median of 15; the spare never forks, so its
        // threads are safe).
        // It starts after RETHREAD_QUIET_MS with no utterance: one that comes at once (a
        // one-shot `parla say` right after loading its voice) would otherwise share the CPU
        // with the rethreading until it could stop it (`say -o "Hello world."` with joe: 0.29
        // s against 0.24 s without threads).
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        const char *asked = getenv("PARLA_PIPER_LIVE_THREADS");
        int threads = asked && atoi(asked) > 0 ? atoi(asked) : cores > 4 ? 4 : cores > 1 ? (int)cores : 1;
        const char *quiet_asked = getenv("PARLA_PIPER_RETHREAD_QUIET_MS");  // for measuring
        struct pollfd quiet = { .fd = go[0], .events = POLLIN };
        rethreading rethread = { spare_threads_voice, threads };
        pthread_t rethreader;
        int rethreading_started = threads > 1 && spare_threads_voice >= 0 &&
                                  poll(&quiet, 1, quiet_asked ? atoi(quiet_asked) : RETHREAD_QUIET_MS) == 0 &&
                                  pthread_create(&rethreader, NULL, rethread_beside, &rethread) == 0;
        unsigned char start;
        ssize_t r;
        do r = read(go[0], &start, 1);
        while (r < 0 && errno == EINTR);
        if (r != 1) _exit(0);  // the host has ended
        atomic_store(&utterance_came, 1);
        if (rethreading_started) {
            parla_engine_keep_evicted_voices();
            parla_engine_rethread_settle();
        }
        close(go[0]);
        out_fd = output[1];
        int status = speak_utterance();
        int used = parla_engine_last_piper_slot();
        _exit(status == 0 && used >= 0 ? EXIT_USED_PIPER + used : status);
    }
    close(go[0]);
    close(output[1]);
    if (child < 0) {
        close(go[1]);
        close(output[0]);
        return;
    }
    spare_pid = child;
    spare_go = go[1];
    spare_out = output[0];
}

// Hands the spare child the utterance: its process id, and its output in *from; 0 if there
// is no spare, or it could not be started (it is then reaped).
static pid_t take_spare(int *from) {
    if (spare_pid <= 0) return 0;
    pid_t child = spare_pid;
    const unsigned char start = 1;
    ssize_t w;
    do w = write(spare_go, &start, 1);
    while (w < 0 && errno == EINTR);
    close(spare_go);
    spare_pid = 0;
    spare_go = -1;
    if (w != 1) {
        close(spare_out);
        kill(child, SIGKILL);
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
        return 0;
    }
    *from = spare_out;
    spare_out = -1;
    return child;
}

// Ends the spare child (closing its go pipe makes it exit) and reaps it.
static void drop_spare(void) {
    if (spare_pid <= 0) return;
    close(spare_go);
    close(spare_out);
    while (waitpid(spare_pid, NULL, 0) < 0 && errno == EINTR) {}
    spare_pid = 0;
    spare_go = spare_out = -1;
}

// Speaks utterance `id` in a child (the spare, else one forked now); reports PARLA_MSG_CRASHED (the
// id and the signal, 0 for none) if it died of a signal or failed, or could not be started.
static void run_utterance(uint32_t id) {
    int from = -1;
    pid_t child = take_spare(&from);
    if (child <= 0) {
        fork_spare();
        child = take_spare(&from);
    }
    if (child <= 0) child = -1;  // no pipe or no fork: reported as a crash below
    int alive = child > 0 && relay(from);
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
    if (child < 0 || WIFSIGNALED(status) || (WIFEXITED(status) && code != 0)) {
        put_header(PARLA_MSG_CRASHED, 8);
        put_u32(id);
        put_u32(child < 0 ? 0 : WIFSIGNALED(status) ? (uint32_t)WTERMSIG(status) : 0);
        flush_out();
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

int parla_engine_host_main(void) {
    signal(SIGPIPE, SIG_IGN);  // a write to a gone Parla fails and ends the loop instead
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
    fork_spare();
    for (;;) {
        // The next utterance's child is forked while nothing waits to be read: a message
        // already there (the next utterance, which then forks its child at once, or the end
        // of input as a one-shot `parla say` exits) is not kept waiting by a fork of no use
        // (0.4 to 0.7 ms of `say -o`'s exit went to one).
        if (spare_pid <= 0 && !out_lost && idle(0)) fork_spare();
        unsigned char *payload = NULL;
        uint32_t n = 0;
        int type = read_message(&payload, &n);
        if (type < 0) {
            // Parla has ended the host: the spare dies as the host exits, and its teardown
            // may as well begin now, beside the host's.
            if (spare_pid > 0) kill(spare_pid, SIGKILL);
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
            // Loaded here, before the fork, so every child has it warm; the spare child was
            // forked without it and is replaced. A voice that cannot load fails in the child
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
                // starts warm (see fork_spare).
                if (loaded && (!known || spare_pid > 0)) {
                    drop_spare();
                    fork_spare();
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
