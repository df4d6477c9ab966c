// parla-bench --c-helper: speaks through libparla's C API as a C program would, and prints
// the CLOCK_MONOTONIC time (ns) just before each parla_speak_text call; parla-bench finds
// the first sound after each at the sink's monitor.
//   c-onset RUNS TEXT SINK
#define _DEFAULT_SOURCE
#include <parla.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: c-onset RUNS TEXT SINK\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    parla_synthesizer *s = parla_synthesizer_new(argv[3]);
    if (!s || parla_prepare(s) != PARLA_OK) {
        fprintf(stderr, "c-onset: %s\n", parla_last_error());
        return 1;
    }
    uint64_t id;
    parla_speak_text(s, "Warm up.", &id);
    parla_wait(s, id, 30000, NULL);
    for (int i = 0; i < runs; i++) {
        usleep(400 * 1000);
        unsigned long long t0 = now_ns();
        if (parla_speak_text(s, argv[2], &id) != PARLA_OK) {
            fprintf(stderr, "c-onset: %s\n", parla_last_error());
            return 1;
        }
        printf("%llu\n", t0);
        fflush(stdout);
        parla_wait(s, id, 30000, NULL);
    }
    usleep(300 * 1000);
    parla_synthesizer_free(s);
    return 0;
}
