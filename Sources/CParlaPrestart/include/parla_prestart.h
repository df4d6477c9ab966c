#ifndef PARLA_PRESTART_H
#define PARLA_PRESTART_H
/// In the `parla` and `speak-selection` programs only (the targets that link CParlaPrestart):
/// if the command line speaks, forks the engine host now (prestart.c), for EngineHost to take
/// with parla_take_prestarted_host. CParlaBeforeMain's constructor calls it before main.
void parla_prestart_if_speaking(int argc, char **argv);
#endif
