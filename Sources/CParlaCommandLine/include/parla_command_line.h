#ifndef PARLA_COMMAND_LINE_H
#define PARLA_COMMAND_LINE_H
// What a command line of `parla` or `speak-selection` asks for, as far as the time before
// the parser needs it: whether the command will speak (the prestart constructor then starts
// the engine host before main), and which speaking command it is (QuickStart then parses it
// with that command's own parser, not the whole tree's). It knows no option but those that
// only print (help, version, --stop, completion scripts): every option is defined once, in
// swift-argument-parser's commands.

/// The program the line is for.
enum { PARLA_PROGRAM_OTHER = 0, PARLA_PROGRAM_PARLA = 1, PARLA_PROGRAM_SPEAK_SELECTION = 2 };
/// The quick forms: none; `parla say …` that speaks; a bare `speak-selection` or
/// `parla selection`.
enum { PARLA_QUICK_NONE = 0, PARLA_QUICK_SAY = 1, PARLA_QUICK_SELECTION = 2 };

typedef struct {
    /// Whether the command speaks: `parla say`, `parla selection` or `speak-selection`, with
    /// no option (before `--`) that only prints: help, version, `--stop`, completion scripts.
    int speaks;
    /// A PARLA_QUICK_ form.
    int quick;
    /// The index of the command's first argument (after `say`, or after the program).
    int first_argument;
} parla_command_line;

/// The program `argv0` names (its file name: "parla", "speak-selection"), as a PARLA_PROGRAM_.
int parla_program_named(const char *argv0);
/// Reads `argv` (argv[0] the program, which `program` says) into `line`.
void parla_read_command_line(int program, int argc, const char *const *argv, parla_command_line *line);
#endif
