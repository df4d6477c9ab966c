// The few words of a command line the prestart constructor and QuickStart read before the
// parser (parla_command_line.h).
#include "parla_command_line.h"
#include <stddef.h>
#include <string.h>

// The subcommands of `parla` that speak.
static const char *const speaking_commands[] = {"say", "selection"};
// Options that make a speaking command print instead.
static const char *const printing_options[] = {"-h", "--help", "--version", "--stop", "--generate-completion-script"};

#define COUNT(array) (sizeof(array) / sizeof *(array))

static int one_of(const char *word, const char *const *list, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strcmp(word, list[i]) == 0) return 1;
    return 0;
}

int parla_program_named(const char *argv0) {
    if (!argv0) return PARLA_PROGRAM_OTHER;
    const char *name = strrchr(argv0, '/');
    name = name ? name + 1 : argv0;
    if (strcmp(name, "parla") == 0) return PARLA_PROGRAM_PARLA;
    if (strcmp(name, "speak-selection") == 0) return PARLA_PROGRAM_SPEAK_SELECTION;
    return PARLA_PROGRAM_OTHER;
}

void parla_read_command_line(int program, int argc, const char *const *argv, parla_command_line *line) {
    line->speaks = 0;
    line->quick = PARLA_QUICK_NONE;
    line->first_argument = 1;
    if (argc < 1 || !argv) return;
    int say = 0;
    if (program == PARLA_PROGRAM_PARLA) {
        if (argc < 2 || !argv[1] || !one_of(argv[1], speaking_commands, COUNT(speaking_commands))) return;
        say = strcmp(argv[1], "say") == 0;
        line->first_argument = 2;
    } else if (program != PARLA_PROGRAM_SPEAK_SELECTION) {
        return;
    }
    line->speaks = 1;
    for (int i = line->first_argument; i < argc; i++) {
        if (!argv[i] || strcmp(argv[i], "--") == 0) break;
        if (one_of(argv[i], printing_options, COUNT(printing_options))) {
            line->speaks = 0;
            break;
        }
    }
    if (!line->speaks) return;
    if (say) {
        line->quick = PARLA_QUICK_SAY;
    } else if (argc == line->first_argument) {
        // `speak-selection` or `parla selection`, alone.
        line->quick = PARLA_QUICK_SELECTION;
    }
}
