// parla-engine: the engine host Parla starts to run espeak-ng in a process of its own
// (engine_host.c). It is not meant to be run by hand: it speaks Parla's binary protocol on
// its standard input and output.
#include "parla_engine_host.h"

int main(void) { return parla_engine_host_main(); }
