#ifndef CPULSEAUDIO_SHIM_H
#define CPULSEAUDIO_SHIM_H
// libpulse's asynchronous API with the threaded main loop.
#include <pulse/pulseaudio.h>
#include <pulse/thread-mainloop.h>
#endif
