// Speaks a paragraph and prints each word as it is heard; an announcement interrupts it, and
// a polite one waits its turn. Build it against an installed Parla:
//
//     cc announce.c $(pkg-config --cflags --libs parla) -o announce && ./announce
#define _DEFAULT_SOURCE  // usleep
#include <parla.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *paragraph =
    "Parla speaks text in the right language. It says which word is being heard, "
    "and an announcement can interrupt it or wait its turn.";

static const char *kind_name(parla_event_kind kind) {
    switch (kind) {
    case PARLA_EVENT_FINISHED: return "finished";
    case PARLA_EVENT_INTERRUPTED: return "interrupted";
    case PARLA_EVENT_DROPPED: return "dropped";
    case PARLA_EVENT_FAILED: return "failed";
    default: return "?";
    }
}

// Each utterance's text, by id % 4 (ids increase by one), shared with the event thread.
static const char *texts[4];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void remember(uint64_t id, const char *text) {
    pthread_mutex_lock(&lock);
    texts[id % 4] = text;
    pthread_mutex_unlock(&lock);
}

// On Parla's event thread: print the word being heard, by its byte range in our own string.
static void on_event(const parla_event *event, void *user_data) {
    (void)user_data;
    pthread_mutex_lock(&lock);
    const char *text = texts[event->utterance % 4];
    pthread_mutex_unlock(&lock);
    if (event->kind == PARLA_EVENT_WORD && text && event->byte_end <= (int64_t)strlen(text)) {
        printf("word %llu: %.*s\n", (unsigned long long)event->utterance, (int)(event->byte_end - event->byte_start),
               text + event->byte_start);
    } else if (event->kind >= PARLA_EVENT_FINISHED) {
        printf("utterance %llu %s%s%s\n", (unsigned long long)event->utterance, kind_name(event->kind),
               event->error ? ": " : "", event->error ? event->error : "");
    }
    fflush(stdout);
}

static int check(parla_status status, const char *what) {
    if (status != PARLA_OK) fprintf(stderr, "announce: %s: %s\n", what, parla_last_error());
    return status == PARLA_OK;
}

int main(void) {
    printf("libparla %s\n", parla_version());
    parla_synthesizer *synth = parla_synthesizer_new(NULL);
    if (!synth) {
        fprintf(stderr, "announce: %s\n", parla_last_error());
        return 1;
    }
    static const char *announcement = "Battery low.";
    static const char *polite = "Download finished.";
    if (!check(parla_set_event_callback(synth, on_event, NULL), "events")) return 1;

    uint64_t reading, urgent, later;
    parla_utterance *u = parla_utterance_new(paragraph);
    parla_utterance_set_language(u, "en");
    parla_utterance_set_resumes_after_interruption(u, 1);
    if (!check(parla_speak(synth, u, &reading), "speak")) return 1;
    remember(reading, paragraph);
    parla_utterance_free(u);

    usleep(1500 * 1000);  // a few words in, an announcement interrupts ...
    if (!check(parla_announce(synth, announcement, PARLA_PRIORITY_DEFAULT, 0, &urgent), "announce")) return 1;
    remember(urgent, announcement);
    // ... and a polite one waits until everything before it has been said.
    if (!check(parla_announce(synth, polite, PARLA_PRIORITY_LOW, 1, &later), "announce")) return 1;
    remember(later, polite);

    parla_event_kind how;
    if (!check(parla_wait(synth, later, 60000000000, &how), "wait")) return 1;
    parla_synthesizer_free(synth);
    return how == PARLA_EVENT_FINISHED ? 0 : 1;
}
