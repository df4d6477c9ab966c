#ifndef PARLA_PRESTART_H
#define PARLA_PRESTART_H
/// 1 if this program started its engine host before main (prestart.c), else 0.
int parla_prestarted_engine_host(void);
#endif
