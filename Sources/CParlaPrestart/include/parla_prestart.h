#ifndef PARLA_PRESTART_H
#define PARLA_PRESTART_H
// CParlaPrestart exports nothing: its constructor (prestart.c) forks the engine host before
// main, and EngineHost takes it with parla_take_prestarted_host (CParlaEngineHost).
#endif
