#ifndef PARLA_BEFORE_MAIN_H
#define PARLA_BEFORE_MAIN_H
// CParlaBeforeMain exports nothing: its one constructor (before_main.c) runs Parla's helper
// processes (engine host, render worker, ducking guard) and the engine's prestart before main.
#endif
