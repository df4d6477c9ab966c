// libparla's C API under hostile input, and speaking live (see api_test.c).
#define _DEFAULT_SOURCE  // usleep, mkdtemp
#include <parla.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "api_test.h"

// MARK: Hostile input

static uint64_t seed = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

// Random bytes (often not UTF-8), or random code points (UTF-8, with markup characters,
// combining marks, emoji and right-to-left letters among them), NUL-terminated.
static void random_text(char *out, size_t size) {
    size_t n = next_random() % (size - 8), at = 0;
    int bytes = next_random() % 3 == 0;
    static const uint32_t picks[] = { '<', '>', '&', '"', '/', ' ', '.', 'a', 0x301, 0x1F44D, 0x1F3FD, 0x627, 0x3B1, 0x65E5, 0x200D, 0xFEFF };
    while (at < n) {
        if (bytes) {
            unsigned char c = (unsigned char)next_random();
            out[at++] = (char)(c ? c : 'x');
            continue;
        }
        uint32_t c = next_random() % 2 ? picks[next_random() % (sizeof picks / sizeof picks[0])] : (uint32_t)(next_random() % 0x10FFFF);
        if (c == 0 || (c >= 0xD800 && c <= 0xDFFF)) c = 'x';
        if (c < 0x80) out[at++] = (char)c;
        else if (c < 0x800 && at + 2 < n) { out[at++] = (char)(0xC0 | c >> 6); out[at++] = (char)(0x80 | (c & 0x3F)); }
        else if (c < 0x10000 && at + 3 < n) { out[at++] = (char)(0xE0 | c >> 12); out[at++] = (char)(0x80 | ((c >> 6) & 0x3F)); out[at++] = (char)(0x80 | (c & 0x3F)); }
        else if (at + 4 < n) { out[at++] = (char)(0xF0 | c >> 18); out[at++] = (char)(0x80 | ((c >> 12) & 0x3F)); out[at++] = (char)(0x80 | ((c >> 6) & 0x3F)); out[at++] = (char)(0x80 | (c & 0x3F)); }
        else break;
    }
    out[at] = 0;
}

// Thousands of random strings and made-up handles through every call that takes them: each
// must return (a status, or NULL with a message), never crash. Detection's segments must lie
// inside the text whatever it is.
void test_hostile(int rounds) {
    char text[512], other[64];
    parla_synthesizer *s = parla_synthesizer_new(NULL);
    for (int i = 0; i < rounds; i++) {
        random_text(text, sizeof text);
        random_text(other, sizeof other);
        parla_utterance *u = next_random() % 2 ? parla_utterance_new(text) : parla_utterance_new_ssml(text);
        if (u) {
            parla_utterance_set_language(u, other);
            parla_utterance_set_voice(u, other);
            parla_utterance_prefer_voice(u, other, other);
            parla_utterance_set_rate(u, (double)(int64_t)next_random() / 1e15);
            parla_utterance_set_announcement(u, (parla_priority)(next_random() % 7), (int)next_random());
            parla_utterance_free(u);
        } else {
            expect(parla_last_error()[0] != 0, "a refused utterance says why");
        }
        parla_segment_list *segments = NULL;
        if (parla_detect(text, &segments) == PARLA_OK) {
            for (size_t k = 0; k < parla_segment_list_count(segments); k++) {
                parla_segment g = { .size = sizeof g };
                parla_segment_list_get(segments, k, &g);
                check_range("random segment", text, g.byte_start, g.byte_end, g.scalar_start, g.scalar_end, NULL);
            }
            parla_segment_list_free(segments);
        }
        void *made_up = (void *)(uintptr_t)next_random();
        expect(parla_is_speaking((parla_synthesizer *)made_up) == -1, "a made-up synthesizer handle");
        expect(parla_utterance_set_rate((parla_utterance *)made_up, 1) == PARLA_ERROR_INVALID_HANDLE, "a made-up utterance handle");
        parla_timeline_free((parla_timeline *)made_up);
        parla_segment_list_free((parla_segment_list *)made_up);
        expect(parla_voice_list_count((parla_voice_list *)made_up) == 0, "a made-up list handle");
        expect(parla_wait(s, next_random(), 0, NULL) == PARLA_ERROR_INVALID_ARGUMENT, "a made-up utterance id");
    }
    parla_synthesizer_free(s);
}

// MARK: Live

#define MAX_EVENTS 4096
static struct {
    parla_event_kind kind;
    uint64_t utterance;
    int64_t b0, b1, s0, s1;
    char text[128];
    int other_thread;
    int heard;
} events[MAX_EVENTS];
static int event_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t main_thread;

static void on_event(const parla_event *e, void *user_data) {
    expect(user_data == (void *)&events, "the user pointer comes back");
    expect(e->size == sizeof *e, "the event's size is %zu", e->size);
    expect(e->kind != PARLA_EVENT_WORD || (e->audio_ns >= 0 && e->time_ns > 0), "a word's times: %lld ns in the audio, at %lld ns",
           (long long)e->audio_ns, (long long)e->time_ns);
    pthread_mutex_lock(&lock);
    if (event_count < MAX_EVENTS) {
        events[event_count].kind = e->kind;
        events[event_count].utterance = e->utterance;
        events[event_count].b0 = e->byte_start;
        events[event_count].b1 = e->byte_end;
        events[event_count].s0 = e->scalar_start;
        events[event_count].s1 = e->scalar_end;
        snprintf(events[event_count].text, sizeof events[event_count].text, "%s", e->text ? e->text : "");
        events[event_count].other_thread = !pthread_equal(pthread_self(), main_thread);
        events[event_count].heard = e->announcement_heard;
        event_count++;
    }
    pthread_mutex_unlock(&lock);
}

// The index of utterance `id`'s first event of `kind` at or after `from`, or -1.
static int find(uint64_t id, parla_event_kind kind, int from) {
    pthread_mutex_lock(&lock);
    int found = -1;
    for (int i = from; i < event_count && found < 0; i++)
        if (events[i].utterance == id && events[i].kind == kind) found = i;
    pthread_mutex_unlock(&lock);
    return found;
}

static int words_of(uint64_t id) {
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < event_count; i++) n += events[i].utterance == id && events[i].kind == PARLA_EVENT_WORD;
    pthread_mutex_unlock(&lock);
    return n;
}

void test_live(void) {
    const char *reading =
        "The first sentence of a long reading goes on for a while, so that there is time. "
        "The second sentence is here, with more words to hear. The third sentence ends it.";
    const char *urgent = "Battery low: 5 % left — plug in. 👍🏽";
    main_thread = pthread_self();
    parla_synthesizer *s = parla_synthesizer_new(NULL);
    expect_status(parla_set_event_callback(s, on_event, &events), PARLA_OK, "callback");
    expect_status(parla_prepare(s), PARLA_OK, "prepare");

    // Speak, check every word's range against the caller's bytes, and finish.
    uint64_t a;
    expect_status(parla_speak_text(s, "Café au lait, naïve façade.", &a), PARLA_OK, "speak");
    parla_event_kind how = 0;
    // No limit (-1, as parla.h's example waits): it returns when the utterance ends, not at once.
    expect_status(parla_wait(s, a, -1, &how), PARLA_OK, "wait with no limit");
    expect(how == PARLA_EVENT_FINISHED, "the first utterance finished (%d)", how);
    expect(find(a, PARLA_EVENT_STARTED, 0) >= 0, "started");
    expect(words_of(a) == 5, "%d words of 5", words_of(a));
    for (int i = 0; i < event_count; i++) {
        if (events[i].kind != PARLA_EVENT_WORD) continue;
        check_range("live word", "Café au lait, naïve façade.", events[i].b0, events[i].b1, events[i].s0, events[i].s1, events[i].text);
        expect(events[i].other_thread, "events come on Parla's thread");
    }

    // An announcement interrupts the reading, which resumes; a queued low one waits for both.
    uint64_t r, b, c;
    parla_utterance *u = parla_utterance_new(reading);
    parla_utterance_set_resumes_after_interruption(u, 1);
    expect_status(parla_speak(s, u, &r), PARLA_OK, "speak the reading");
    parla_utterance_free(u);
    for (int i = 0; i < 300 && words_of(r) < 3; i++) usleep(10000);
    expect(words_of(r) >= 3, "the reading is heard");
    expect_status(parla_announce(s, urgent, PARLA_PRIORITY_DEFAULT, 0, &b), PARLA_OK, "announce");
    expect_status(parla_announce(s, "Later.", PARLA_PRIORITY_LOW, 1, &c), PARLA_OK, "a queued announcement");
    expect_status(parla_wait(s, c, 60000000000, &how), PARLA_OK, "wait for the last");
    int b_end = find(b, PARLA_EVENT_FINISHED, 0), r_resumed = find(r, PARLA_EVENT_RESUMED, 0), r_end = find(r, PARLA_EVENT_FINISHED, 0),
        c_end = find(c, PARLA_EVENT_FINISHED, 0);
    expect(b_end >= 0 && events[b_end].heard == 1, "the announcement was heard in full");
    expect(r_resumed > b_end && r_end > r_resumed, "the reading resumed after it (%d %d %d)", b_end, r_resumed, r_end);
    expect(c_end > r_end && events[c_end].heard == 1, "the low one came last, in full");
    for (int i = 0; i < event_count; i++) {
        if (events[i].utterance == b && events[i].kind == PARLA_EVENT_WORD)
            check_range("announcement word", urgent, events[i].b0, events[i].b1, events[i].s0, events[i].s1, NULL);
        if (events[i].utterance == r && (events[i].kind == PARLA_EVENT_WORD || events[i].kind == PARLA_EVENT_RESUMED))
            check_range("reading word", reading, events[i].b0, events[i].b1, events[i].s0, events[i].s1,
                        events[i].kind == PARLA_EVENT_WORD ? events[i].text : NULL);
    }

    // Stop: the reading ends interrupted, the queued one is dropped, and no word comes after.
    uint64_t d, e;
    expect_status(parla_speak_text(s, reading, &d), PARLA_OK, "speak again");
    expect_status(parla_speak_text(s, "Never heard.", &e), PARLA_OK, "queue one");
    for (int i = 0; i < 300 && words_of(d) < 2; i++) usleep(10000);
    int stopped = 0;
    expect_status(parla_stop(s, PARLA_BOUNDARY_IMMEDIATE, &stopped), PARLA_OK, "stop");
    expect(stopped == 1, "stop says it stopped something");
    expect_status(parla_wait(s, d, 5000000000, &how), PARLA_OK, "wait after stop");
    expect(how == PARLA_EVENT_INTERRUPTED, "stopped speech ends interrupted (%d)", how);
    expect_status(parla_wait(s, e, 5000000000, &how), PARLA_OK, "wait for the queued one");
    expect(how == PARLA_EVENT_DROPPED, "queued speech is dropped (%d)", how);
    int words_at_stop = words_of(d);
    usleep(300000);  // a word after the stop would come within this: nothing is waited for
    expect(words_of(d) == words_at_stop, "no word after the stop");
    expect(words_of(e) == 0, "the dropped one said nothing");

    // Pause at a word and continue.
    uint64_t f;
    expect_status(parla_speak_text(s, "One two three four five six seven eight.", &f), PARLA_OK, "speak to pause");
    for (int i = 0; i < 300 && words_of(f) < 2; i++) usleep(10000);
    expect_status(parla_pause(s, PARLA_BOUNDARY_WORD), PARLA_OK, "pause");
    for (int i = 0; i < 300 && find(f, PARLA_EVENT_PAUSED, 0) < 0; i++) usleep(10000);
    expect(find(f, PARLA_EVENT_PAUSED, 0) >= 0 && parla_is_speaking(s) == 1, "paused");
    expect_status(parla_set_volume(s, 0.8), PARLA_OK, "live volume");
    expect_status(parla_set_pitch(s, 1.2), PARLA_OK, "live pitch");
    expect_status(parla_continue(s), PARLA_OK, "continue");
    expect_status(parla_wait(s, f, 30000000000, &how), PARLA_OK, "wait after continue");
    expect(how == PARLA_EVENT_FINISHED && find(f, PARLA_EVENT_CONTINUED, 0) >= 0, "continued and finished");

    // Freed while speaking (once its first word is heard): it stops, and the handle is refused
    // afterwards.
    uint64_t g;
    expect_status(parla_speak_text(s, reading, &g), PARLA_OK, "speak before free");
    for (int i = 0; i < 300 && words_of(g) < 1; i++) usleep(10000);
    expect(words_of(g) >= 1, "speaking when freed");
    parla_synthesizer_free(s);
    expect_status(parla_speak_text(s, "x", NULL), PARLA_ERROR_INVALID_HANDLE, "speak on a freed synthesizer");
}

