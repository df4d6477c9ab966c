// Linked only into the `parla` and `speak-selection` programs: before main (called from
// CParlaBeforeMain's constructor), and before the Swift runtime and the command line parser
// get going, a command that is going to speak forks its engine host, which loads espeak-ng and its first voice on the other core in the
// meantime. EngineHost takes the host over (parla_take_prestarted_host) instead of starting
// one when it first needs it. Other commands, render workers and engine hosts start nothing.
#include "parla_prestart.h"
#include "parla_engine_host.h"
#include "parla_command_line.h"
#include <stdlib.h>
#include <string.h>

static int wants_engine(int argc, char **argv) {
    if (argc < 1 || argv[0] == NULL) return 0;
    // An engine chosen by hand, a helper copy of this program, or a debug run: as before.
    if (getenv("PARLA_ENGINE") != NULL || getenv(PARLA_ENGINE_HOST_ENV) != NULL) return 0;
    const char *off = getenv("PARLA_NO_PRESTART");
    if (off != NULL && off[0] != 0) return 0;
    parla_command_line line;
    parla_read_command_line(parla_program_named(argv[0]), argc, (const char *const *)argv, &line);
    return line.speaks;
}

void parla_prestart_if_speaking(int argc, char **argv) {
    if (!wants_engine(argc, argv)) return;
    parla_prestart_host();  // if it cannot, EngineHost starts one when it first needs it
}
