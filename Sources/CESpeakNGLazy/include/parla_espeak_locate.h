#ifndef PARLA_ESPEAK_LOCATE_H
#define PARLA_ESPEAK_LOCATE_H
/// Prepares the loading of libespeak-ng (espeak_locate.c): loads Parla's stand-in for
/// libpcaudio where it is installed with the program, and the espeak-ng bundled with the
/// program where the system has none. lazy_espeak.c calls it once, before its dlopen.
void parla_espeak_before_load(void);
/// The directory of the espeak-ng bundled with the program (the Python wheel's espeak-ng/
/// beside parla-engine: libespeak-ng.so.1 and espeak-ng-data), once libespeak-ng is loaded;
/// NULL where the system's is used.
const char *parla_espeak_bundled_directory(void);
#endif
