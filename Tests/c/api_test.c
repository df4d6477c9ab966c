// libparla's C API, tested from C against an installed prefix (scripts/check-c builds it with
// `pkg-config --cflags --libs parla`). With "live" as its argument it also speaks, through the
// sound server of PULSE_SERVER (the script starts a private one and listens to its monitor).
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

int failures;

void expect(int ok, const char *format, ...) {
    if (ok) return;
    va_list args;
    va_start(args, format);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, " (last error: %s)\n", parla_last_error());
    va_end(args);
    failures++;
}

void expect_status(parla_status got, parla_status want, const char *what) {
    expect(got == want, "%s: status %d, expected %d", what, (int)got, (int)want);
    if (want != PARLA_OK) expect(parla_last_error()[0] != 0, "%s: no message", what);
}

// Scalars in the first `bytes` bytes of UTF-8 `s`.
int64_t scalars_in(const char *s, int64_t bytes) {
    int64_t n = 0;
    for (int64_t i = 0; i < bytes; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) n++;
    return n;
}

int on_boundary(const char *s, int64_t at) { return ((unsigned char)s[at] & 0xC0) != 0x80; }

// A range reported in `text`: inside it, on scalar boundaries, its scalar offsets agreeing
// with its byte offsets, and (if `spoken` is given) the caller's bytes there spelling it.
void check_range(const char *what, const char *text, int64_t b0, int64_t b1, int64_t s0, int64_t s1, const char *spoken) {
    int64_t length = (int64_t)strlen(text);
    expect(0 <= b0 && b0 <= b1 && b1 <= length, "%s: bytes %lld..%lld outside 0..%lld", what, (long long)b0, (long long)b1, (long long)length);
    if (!(0 <= b0 && b0 <= b1 && b1 <= length)) return;
    expect(on_boundary(text, b0) && (b1 == length || on_boundary(text, b1)), "%s: bytes %lld..%lld split a character", what, (long long)b0, (long long)b1);
    expect(scalars_in(text, b0) == s0 && scalars_in(text, b1) == s1, "%s: scalars %lld..%lld, bytes say %lld..%lld", what, (long long)s0,
           (long long)s1, (long long)scalars_in(text, b0), (long long)scalars_in(text, b1));
    if (spoken) {
        expect((int64_t)strlen(spoken) == b1 - b0 && memcmp(text + b0, spoken, (size_t)(b1 - b0)) == 0, "%s: the text at %lld..%lld is '%.*s', the word '%s'",
               what, (long long)b0, (long long)b1, (int)(b1 - b0), text + b0, spoken);
    }
}

// MARK: Without sound

static void test_errors(void) {
    expect(parla_version() && strchr(parla_version(), '.'), "parla_version() is '%s'", parla_version() ? parla_version() : "NULL");
    expect(parla_utterance_new(NULL) == NULL, "an utterance of NULL");
    expect(parla_utterance_new("caf\xc3") == NULL && strstr(parla_last_error(), "UTF-8"), "invalid UTF-8 refused");
    expect(parla_utterance_new_ssml("<speak><s>unclosed") == NULL, "malformed SSML refused");
    expect(parla_last_status() == PARLA_ERROR_SSML, "a _new's status: %d", (int)parla_last_status());
    expect(strcmp(parla_status_string(PARLA_ERROR_SSML), "malformed SSML") == 0 && strcmp(parla_status_string(PARLA_OK), "no error") == 0 &&
               strcmp(parla_status_string((parla_status)99), "unknown status") == 0,
           "status strings");
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", PARLA_VERSION_MAJOR, PARLA_VERSION_MINOR, PARLA_VERSION_PATCH);
    expect(strcmp(version, PARLA_VERSION_STRING) == 0 && strcmp(version, parla_version()) == 0, "the header is version %s, the library %s",
           PARLA_VERSION_STRING, parla_version());
    expect_status(parla_speak(NULL, NULL, NULL), PARLA_ERROR_INVALID_HANDLE, "speak on NULL");
    expect_status(parla_continue((parla_synthesizer *)(uintptr_t)0x7f0000001230), PARLA_ERROR_INVALID_HANDLE, "a made-up handle");
    expect_status(parla_continue((parla_synthesizer *)(uintptr_t)0x1001), PARLA_ERROR_INVALID_HANDLE, "a misaligned handle");

    parla_utterance *u = parla_utterance_new("Hello.");
    expect(u != NULL && parla_last_status() == PARLA_OK, "an utterance, and PARLA_OK after it");
    expect_status(parla_utterance_set_rate(u, 10), PARLA_ERROR_OUT_OF_RANGE, "rate 10");
    expect_status(parla_utterance_set_rate(u, 0.0 / 0.0), PARLA_ERROR_OUT_OF_RANGE, "rate NaN");
    expect_status(parla_utterance_set_pitch(u, -1), PARLA_ERROR_OUT_OF_RANGE, "pitch -1");
    expect_status(parla_utterance_set_volume(u, 2.5), PARLA_ERROR_OUT_OF_RANGE, "volume 2.5");
    expect_status(parla_utterance_set_volume(u, 1.5), PARLA_OK, "volume 1.5 (louder than normal)");
    expect_status(parla_utterance_set_rate(u, 1.5), PARLA_OK, "rate 1.5");
    expect_status(parla_utterance_set_voice(u, "no-such-voice"), PARLA_ERROR_UNKNOWN_VOICE, "an unknown voice");
    expect_status(parla_utterance_set_language(u, "not a tag!"), PARLA_ERROR_UNKNOWN_LANGUAGE, "a malformed language");
    expect_status(parla_utterance_set_language(u, "\xff"), PARLA_ERROR_INVALID_UTF8, "a language not UTF-8");
    expect_status(parla_utterance_set_announcement(u, (parla_priority)99, 0), PARLA_ERROR_INVALID_ARGUMENT, "priority 99");
    expect_status(parla_utterance_set_language(u, "en"), PARLA_OK, "language en");
    parla_utterance_free(u);
    expect_status(parla_utterance_set_language(u, "en"), PARLA_ERROR_INVALID_HANDLE, "a freed utterance");
    parla_utterance_free(u);  // twice: refused quietly

    parla_synthesizer *s = parla_synthesizer_new(NULL);
    expect(s != NULL, "a synthesizer");
    expect_status(parla_speak(s, u, NULL), PARLA_ERROR_INVALID_HANDLE, "speak a freed utterance");
    expect_status(parla_speak(s, (parla_utterance *)s, NULL), PARLA_ERROR_INVALID_HANDLE, "a synthesizer passed as an utterance");
    expect_status(parla_set_rate(s, 99), PARLA_ERROR_OUT_OF_RANGE, "live rate 99");
    expect_status(parla_set_pitch(s, 2.5), PARLA_ERROR_OUT_OF_RANGE, "live pitch 2.5");
    expect_status(parla_set_volume(s, 2.5), PARLA_ERROR_OUT_OF_RANGE, "live volume 2.5");
    expect_status(parla_stop(s, (parla_boundary)7, NULL), PARLA_ERROR_INVALID_ARGUMENT, "boundary 7");
    expect_status(parla_wait(s, 987654321, 10000000, NULL), PARLA_ERROR_INVALID_ARGUMENT, "wait for an id never given");
    parla_synthesizer_free(s);
    expect(parla_is_speaking(s) == -1, "a freed synthesizer");
}

static void test_write(void) {
    // Accents, an emoji with a skin tone, a combining mark, Greek, Arabic and Japanese.
    const char *text = "The café 👍🏽 was nai\xcc\x88ve, and the weather is fine. Καλημέρα κόσμε. مرحبا بالعالم.";
    parla_synthesizer *s = parla_synthesizer_new(NULL);
    parla_utterance *u = parla_utterance_new(text);
    // English in Scottish English; Greek and Arabic in their defaults.
    expect_status(parla_utterance_prefer_voice(u, "en", "espeak-ng.en-gb-scotland"), PARLA_OK, "prefer a voice for English");
    expect_status(parla_utterance_prefer_voice(u, "en", "espeak-ng.el"), PARLA_ERROR_INVALID_ARGUMENT, "a Greek voice for English");
    expect_status(parla_utterance_prefer_voice(u, "en", "no-such-voice"), PARLA_ERROR_UNKNOWN_VOICE, "an unknown preferred voice");
    expect_status(parla_utterance_prefer_voice(u, NULL, "espeak-ng.el"), PARLA_ERROR_INVALID_ARGUMENT, "a NULL language");
    char path[] = "/tmp/parla-c-test-XXXXXX";
    expect(mkdtemp(path) != NULL, "a directory");
    char file[600];
    snprintf(file, sizeof file, "%s/out.wav", path);
    parla_timeline *t = NULL;
    expect_status(parla_write_wav(s, u, file, &t), PARLA_OK, "write_wav");
    struct stat st;
    expect(stat(file, &st) == 0 && st.st_size > 44, "the WAV file exists");
    if (t) {
        int rate = parla_timeline_sample_rate(t);
        int64_t duration = parla_timeline_duration_ns(t);
        expect(rate > 0 && duration > 1000000000, "rate %d, %lld ns", rate, (long long)duration);
        // The duration is whole nanoseconds, rounded down: the file's samples are within one of it.
        long long samples = (st.st_size - 44) / 2, expected = (long long)(duration * (__int128)rate / 1000000000);
        expect(samples == expected || samples == expected + 1, "the file holds %lld samples for %lld ns", samples, (long long)duration);
        size_t words = parla_timeline_word_count(t);
        expect(words >= 6, "%zu words", words);
        int languages[3] = { 0 };
        int64_t last = -1;
        for (size_t i = 0; i < words; i++) {
            parla_timed_range w = { .size = sizeof w };
            expect_status(parla_timeline_word(t, i, &w), PARLA_OK, "word");
            expect(w.size == sizeof w, "the size is left as it was");
            char what[64];
            snprintf(what, sizeof what, "word %zu", i);
            check_range(what, text, w.byte_start, w.byte_end, w.scalar_start, w.scalar_end, w.text);
            expect(w.start_ns >= last && w.end_ns >= w.start_ns && w.end_ns <= duration, "%s: times %lld..%lld ns", what, (long long)w.start_ns,
                   (long long)w.end_ns);
            last = w.start_ns;
            if (getenv("PARLA_TEST_VERBOSE")) fprintf(stderr, "%s [%s]\n", w.text, w.language ? w.language : "-");
            if (w.language && strcmp(w.language, "en") == 0) {
                languages[0] = 1;
                expect(w.voice && strcmp(w.voice, "espeak-ng.en-gb-scotland") == 0, "%s: English in %s", what, w.voice ? w.voice : "NULL");
            }
            if (w.language && strcmp(w.language, "el") == 0) {
                languages[1] = 1;
                expect(w.voice && strcmp(w.voice, "espeak-ng.el") == 0, "%s: Greek in %s", what, w.voice ? w.voice : "NULL");
            }
            if (w.language && strcmp(w.language, "ar") == 0) languages[2] = 1;
        }
        expect(languages[0] && languages[1] && languages[2], "English, Greek and Arabic words");
        size_t sentences = parla_timeline_sentence_count(t);
        expect(sentences == 3, "%zu sentences", sentences);
        for (size_t i = 0; i < sentences; i++) {
            parla_timed_range r = { .size = sizeof r };
            expect_status(parla_timeline_sentence(t, i, &r), PARLA_OK, "sentence");
            check_range("sentence", text, r.byte_start, r.byte_end, r.scalar_start, r.scalar_end, NULL);
        }
        parla_timed_range past = { .size = sizeof past };
        expect_status(parla_timeline_word(t, words, &past), PARLA_ERROR_OUT_OF_RANGE, "a word past the end");
        // A struct whose size was not set is refused, and untouched.
        parla_timed_range unset = { 0 };
        expect_status(parla_timeline_word(t, 0, &unset), PARLA_ERROR_INVALID_ARGUMENT, "a timed range without its size");
        expect(unset.text == NULL && unset.byte_end == 0, "nothing written into it");
        // A program built with an older, shorter struct gets the fields it knows, and nothing
        // past them: here the struct as it would be without its last four fields.
        unsigned char older[sizeof(parla_timed_range) + 8];
        memset(older, 0xAB, sizeof older);
        size_t known = offsetof(parla_timed_range, text);
        memcpy(older, &known, sizeof known);
        expect_status(parla_timeline_word(t, 0, (parla_timed_range *)(void *)older), PARLA_OK, "a shorter struct");
        parla_timed_range first = { .size = sizeof first };
        parla_timeline_word(t, 0, &first);
        expect(memcmp(older + sizeof(size_t), (unsigned char *)&first + sizeof(size_t), known - sizeof(size_t)) == 0,
               "the shorter struct's fields are the word's");
        int untouched = 1;
        for (size_t k = known; k < sizeof older; k++) untouched &= older[k] == 0xAB;
        expect(untouched, "nothing written past the shorter struct");
        parla_timeline_free(t);
    }
    unlink(file);
    // Nothing is left behind where the file cannot be written.
    snprintf(file, sizeof file, "%s/missing/out.wav", path);
    expect(parla_write_wav(s, u, file, &t) == PARLA_ERROR_IO && t == NULL, "write into a missing directory: %s", parla_last_error());
    expect(stat(file, &st) != 0, "no file left");
    rmdir(path);
    parla_utterance_free(u);
    parla_synthesizer_free(s);
}

// MARK: Streaming

typedef struct {
    const char *text;
    int64_t samples, next_sample, words, stop_after;
    int rate, in_order;
    int64_t word_samples[8];
    int marks;
    char mark_names[4][8];
    int64_t mark_samples[4], mark_bytes[4];
} stream_state;

static int on_chunk(const parla_chunk *c, void *user_data) {
    stream_state *st = user_data;
    if (c->kind == PARLA_CHUNK_AUDIO) {
        st->in_order &= c->sample == st->next_sample && c->end_sample == c->sample + (int64_t)c->sample_count && c->samples != NULL;
        st->next_sample = c->end_sample;
        st->samples += (int64_t)c->sample_count;
        st->rate = c->sample_rate;
    } else if (c->kind == PARLA_CHUNK_WORD) {
        if (st->words < 8) st->word_samples[st->words] = c->sample;
        st->words++;
        check_range("streamed word", st->text, c->byte_start, c->byte_end, c->scalar_start, c->scalar_end, c->text);
        expect(c->sample <= c->end_sample && c->sample_rate > 0, "a word's samples %lld..%lld", (long long)c->sample, (long long)c->end_sample);
    } else if (c->kind == PARLA_CHUNK_MARK) {
        expect(c->text != NULL && c->sample == c->end_sample && c->byte_start == c->byte_end && c->scalar_start == c->scalar_end,
               "a mark: a name and one point");
        if (st->marks < 4 && c->text) {
            snprintf(st->mark_names[st->marks], sizeof st->mark_names[0], "%s", c->text);
            st->mark_samples[st->marks] = c->sample;
            st->mark_bytes[st->marks] = c->byte_start;
        }
        st->marks++;
    }
    return st->stop_after > 0 && st->samples >= st->stop_after;
}

static void test_synthesize(void) {
    const char *text = "Streaming works 👍🏽 here. Καλημέρα κόσμε.";
    parla_synthesizer *s = parla_synthesizer_new(NULL);
    parla_utterance *u = parla_utterance_new(text);
    char path[] = "/tmp/parla-c-stream-XXXXXX";
    expect(mkdtemp(path) != NULL, "a directory");
    char file[600];
    snprintf(file, sizeof file, "%s/out.wav", path);
    parla_timeline *t = NULL;
    expect_status(parla_write_wav(s, u, file, &t), PARLA_OK, "write the reference");
    stream_state st = { .text = text, .in_order = 1 };
    expect_status(parla_synthesize(s, u, on_chunk, &st), PARLA_OK, "synthesize");
    // The stream holds the file's audio and words, in order.
    struct stat info;
    expect(stat(file, &info) == 0 && st.samples == (info.st_size - 44) / 2, "streamed %lld samples, the file %lld", (long long)st.samples,
           (long long)((info.st_size - 44) / 2));
    expect(st.in_order && st.rate == 22050, "audio in order at 22050 Hz (%d)", st.rate);
    expect(t && st.words == (int64_t)parla_timeline_word_count(t), "%lld words streamed", (long long)st.words);
    // Stopped by its callback after the first samples: it returns, having made less.
    stream_state early = { .text = text, .in_order = 1, .stop_after = 1 };
    expect_status(parla_synthesize(s, u, on_chunk, &early), PARLA_OK, "synthesize, stopped early");
    expect(early.samples > 0 && early.samples < st.samples, "stopped after %lld of %lld samples", (long long)early.samples, (long long)st.samples);
    expect_status(parla_synthesize(s, u, NULL, NULL), PARLA_ERROR_INVALID_ARGUMENT, "no callback");
    // For playback, with espeak-ng's voices: the same audio and words.
    stream_state played = { .text = text, .in_order = 1 };
    expect_status(parla_synthesize_for_playback(s, u, on_chunk, &played), PARLA_OK, "synthesize for playback");
    expect(played.in_order && played.words == st.words && played.samples == st.samples, "for playback: %lld words, %lld samples",
           (long long)played.words, (long long)played.samples);
    expect_status(parla_synthesize_for_playback(NULL, u, on_chunk, &played), PARLA_ERROR_INVALID_HANDLE, "for playback, no synthesizer");
    parla_timeline_free(t);
    unlink(file);
    rmdir(path);
    parla_utterance_free(u);
    parla_synthesizer_free(s);
}

static void test_synthesize_marks(void) {
    // Each mark comes with the sample where the next word starts; one after the last word, at
    // the audio's end. Its offsets are those of the text after it in the markup.
    const char *ssml = "<speak><mark name=\"a\"/>Hello <mark name=\"b\"/>big world.<mark name=\"c\"/></speak>";
    parla_synthesizer *s = parla_synthesizer_new(NULL);
    parla_utterance *u = parla_utterance_new_ssml(ssml);
    stream_state st = { .text = ssml, .in_order = 1 };
    expect_status(parla_synthesize(s, u, on_chunk, &st), PARLA_OK, "synthesize SSML with marks");
    expect(st.marks == 3 && st.words == 3, "3 marks (%d) and 3 words (%lld)", st.marks, (long long)st.words);
    expect(!strcmp(st.mark_names[0], "a") && !strcmp(st.mark_names[1], "b") && !strcmp(st.mark_names[2], "c"), "marks a, b, c in order");
    expect(st.mark_samples[0] == st.word_samples[0] && st.mark_samples[1] == st.word_samples[1], "a and b where Hello and big start");
    expect(st.mark_samples[2] == st.samples, "c where the audio ends (%lld of %lld)", (long long)st.mark_samples[2], (long long)st.samples);
    expect(st.mark_bytes[1] == (int64_t)(strstr(ssml, "big") - ssml) && st.mark_bytes[2] == (int64_t)strlen(ssml),
           "b sits before big (byte %lld), c at the end (byte %lld)", (long long)st.mark_bytes[1], (long long)st.mark_bytes[2]);
    parla_utterance_free(u);
    parla_synthesizer_free(s);
}

static void test_voices_and_detect(void) {
    parla_voice_list *list = NULL;
    expect_status(parla_voices(&list), PARLA_OK, "voices");
    size_t n = parla_voice_list_count(list), english = 0;
    expect(n > 50, "%zu voices", n);
    for (size_t i = 0; i < n; i++) {
        parla_voice v = { .size = sizeof v };
        expect_status(parla_voice_list_get(list, i, &v), PARLA_OK, "voice");
        expect(v.identifier && v.name && v.engine && v.languages, "voice %zu has its strings", i);
        if (v.identifier && strcmp(v.identifier, "espeak-ng.en-us") == 0) english = 1;
    }
    expect(english, "espeak-ng.en-us is listed");
    parla_voice_list_free(list);

    const char *text = "Hello there, my friend. Καλημέρα σας, φίλε μου.";
    parla_segment_list *segments = NULL;
    expect_status(parla_detect(text, &segments), PARLA_OK, "detect");
    size_t count = parla_segment_list_count(segments);
    expect(count == 2, "%zu segments", count);
    for (size_t i = 0; i < count; i++) {
        parla_segment g = { .size = sizeof g };
        expect_status(parla_segment_list_get(segments, i, &g), PARLA_OK, "segment");
        check_range("segment", text, g.byte_start, g.byte_end, g.scalar_start, g.scalar_end, NULL);
        expect(g.language && strcmp(g.language, i == 0 ? "en" : "el") == 0, "segment %zu is %s", i, g.language ? g.language : "NULL");
    }
    parla_segment_list_free(segments);
    expect_status(parla_detect("\xe2\x82", &segments), PARLA_ERROR_INVALID_UTF8, "detect invalid UTF-8");
}

// MARK: Installing voices

static int64_t install_progress_total;
static void on_install_progress(const char *file, int64_t bytes, int64_t total, void *user_data) {
    expect(user_data == &install_progress_total, "the progress callback gets its user data");
    expect(file && strstr(file, "xx_XX-tiny-low") != NULL, "progress names the file (%s)", file ? file : "NULL");
    expect(0 <= bytes && bytes <= total, "progress %lld of %lld", (long long)bytes, (long long)total);
    if (bytes == total) install_progress_total += total;
}

// A mirror of Piper's catalog with one small made-up voice, in `root` (md5 by md5sum).
static int write_mirror(const char *root) {
    char path[4096], command[4200], md5[2][40] = {{0}};
    const char *names[2] = {"xx_XX-tiny-low.onnx", "xx_XX-tiny-low.onnx.json"};
    long sizes[2];
    snprintf(path, sizeof path, "%s/xx", root);
    if (mkdir(path, 0755) != 0) return 0;
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/xx/%s", root, names[i]);
        FILE *f = fopen(path, "w");
        if (!f) return 0;
        if (i == 0)
            for (int k = 0; k < 300000; k++) fputc(k * 7 % 251, f);
        else
            fputs("{\"audio\": {\"sample_rate\": 22050, \"quality\": \"low\"}, \"espeak\": {\"voice\": \"en-us\"}, "
                  "\"language\": {\"code\": \"xx_XX\"}, \"phoneme_type\": \"espeak\", \"phoneme_id_map\": {\"_\": [0]}}",
                  f);
        sizes[i] = ftell(f);
        fclose(f);
        snprintf(command, sizeof command, "md5sum '%s'", path);
        FILE *p = popen(command, "r");
        if (!p || fscanf(p, "%32s", md5[i]) != 1) return 0;
        pclose(p);
    }
    snprintf(path, sizeof path, "%s/voices.json", root);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"xx_XX-tiny-low\": {\"language\": {\"code\": \"xx_XX\"}, \"quality\": \"low\", \"files\": {"
               "\"xx/%s\": {\"size_bytes\": %ld, \"md5_digest\": \"%s\"}, \"xx/%s\": {\"size_bytes\": %ld, \"md5_digest\": \"%s\"}}}}",
            names[0], sizes[0], md5[0], names[1], sizes[1], md5[1]);
    fclose(f);
    return 1;
}

static int voice_listed(const char *identifier) {
    parla_voice_list *list = NULL;
    if (parla_voices(&list) != PARLA_OK) return 0;
    int found = 0;
    for (size_t i = 0; i < parla_voice_list_count(list); i++) {
        parla_voice v = { .size = sizeof v };
        if (parla_voice_list_get(list, i, &v) == PARLA_OK && v.identifier && strcmp(v.identifier, identifier) == 0) found = 1;
    }
    parla_voice_list_free(list);
    return found;
}

static void test_install_voice(void) {
    char scratch[] = "/tmp/parla-c-install.XXXXXX", mirror[4200], data[4200];
    if (!mkdtemp(scratch)) {
        expect(0, "mkdtemp");
        return;
    }
    snprintf(mirror, sizeof mirror, "%s/mirror", scratch);
    snprintf(data, sizeof data, "%s/data", scratch);
    expect(mkdir(mirror, 0755) == 0 && write_mirror(mirror), "the mirror is written");
    char *saved = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME")) : NULL;
    setenv("XDG_DATA_HOME", data, 1);

    expect_status(parla_install_voice(NULL, mirror, NULL, NULL), PARLA_ERROR_INVALID_ARGUMENT, "install NULL");
    expect_status(parla_install_voice("\xe2\x82", mirror, NULL, NULL), PARLA_ERROR_INVALID_UTF8, "install invalid UTF-8");
    expect_status(parla_install_voice("xx_XX-tiny-lo", mirror, NULL, NULL), PARLA_ERROR_UNKNOWN_VOICE, "install an unknown name");
    expect(strstr(parla_last_error(), "Did you mean xx_XX-tiny-low") != NULL, "the nearest name is offered: %s", parla_last_error());
    expect_status(parla_install_voice("xx_XX-tiny-low", "/nonexistent/mirror", NULL, NULL), PARLA_ERROR_IO, "install from nowhere");
    expect_status(parla_install_voice("xx_XX-tiny-low", mirror, on_install_progress, &install_progress_total), PARLA_OK, "install");
    expect(install_progress_total > 300000, "progress reached each file's end (%lld bytes)", (long long)install_progress_total);
    expect(voice_listed("piper.xx_XX-tiny-low"), "the installed voice is listed");
    expect_status(parla_remove_voice("xx_XX-tiny-low"), PARLA_OK, "remove");
    expect(!voice_listed("piper.xx_XX-tiny-low"), "the removed voice is not listed");
    expect_status(parla_remove_voice("xx_XX-tiny-low"), PARLA_ERROR_UNKNOWN_VOICE, "remove again");

    if (saved) {
        setenv("XDG_DATA_HOME", saved, 1);
        free(saved);
    } else {
        unsetenv("XDG_DATA_HOME");
    }
    char command[4300];
    snprintf(command, sizeof command, "rm -rf '%s'", scratch);
    expect(system(command) == 0, "scratch removed");
}

int main(int argc, char **argv) {
    test_errors();
    test_voices_and_detect();
    test_write();
    test_synthesize();
    test_synthesize_marks();
    if (argc == 1) test_install_voice();
    if (argc == 1) test_hostile(20000);  // once, in the run without sound
    if (argc > 1 && strcmp(argv[1], "live") == 0) test_live();
    if (failures) {
        fprintf(stderr, "api_test: %d failures\n", failures);
        return 1;
    }
    printf("api_test: all passed%s\n", argc > 1 ? " (live)" : "");
    return 0;
}
