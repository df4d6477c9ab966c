// The floor for `scripts/bench-render`: libespeak-ng driven directly, one process, audio
// discarded. Input lines: espeak-voice<TAB>text. The voice is selected only when it changes.
//   cc -O2 bench/espeak-floor.c -o espeak-floor -lespeak-ng && ./espeak-floor lines.tsv
#include <espeak-ng/speak_lib.h>
#include <stdio.h>
#include <string.h>

static long samples;

static int discard(short *wav, int count, espeak_EVENT *events) {
    (void)wav; (void)events;
    samples += count;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: espeak-floor voice-tab-text.tsv\n"); return 2; }
    int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 100, NULL, 0x8000);
    if (rate <= 0) { fprintf(stderr, "espeak-ng could not be initialised\n"); return 1; }
    espeak_SetSynthCallback(discard);
    FILE *f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 1; }
    static char line[1 << 20];
    char voice[128] = "";
    long lines = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        if (strcmp(voice, line) != 0) {
            if (espeak_SetVoiceByName(line) != EE_OK) { fprintf(stderr, "no voice %s\n", line); return 1; }
            snprintf(voice, sizeof voice, "%s", line);
        }
        const char *text = tab + 1;
        espeak_Synth(text, strlen(text) + 1, 0, POS_CHARACTER, 0, espeakCHARS_UTF8 | espeakENDPAUSE, NULL, NULL);
        lines++;
    }
    printf("%ld lines, %.1f s of audio\n", lines, samples / (double)rate);
    return 0;
}
