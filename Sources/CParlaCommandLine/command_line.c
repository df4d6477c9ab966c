// The command-line table the prestart constructor and QuickStart.swift share
// (parla_command_line.h).
#include "parla_command_line.h"
#include <stddef.h>
#include <string.h>

// The subcommands of `parla` that speak.
static const char *const speaking_commands[] = {"say", "selection"};
// Options that make a speaking command print instead.
static const char *const printing_options[] = {"-h", "--help", "--version", "--stop", "--generate-completion-script"};
// `say`'s option for the output file, in both spellings.
static const char *const output_options[] = {"-o", "--output"};

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
    line->output = -1;
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
    if (!say) {
        // `speak-selection` or `parla selection`, alone.
        if (argc == line->first_argument) line->quick = PARLA_QUICK_SELECTION;
        return;
    }
    // `parla say`: words, and at most one output option followed by a name.
    int words = 0;
    for (int i = line->first_argument; i < argc; i++) {
        const char *word = argv[i];
        if (!word) return;
        if (one_of(word, output_options, COUNT(output_options))) {
            if (line->output >= 0 || i + 1 >= argc || !argv[i + 1] || argv[i + 1][0] == '-') {
                line->output = -1;
                return;
            }
            line->output = ++i;
            continue;
        }
        if (word[0] == '-') {
            line->output = -1;
            return;
        }
        words++;
    }
    if (words > 0) line->quick = PARLA_QUICK_SAY;
    else line->output = -1;
}
