#ifndef PARLA_ENGINE_HOST_H
#define PARLA_ENGINE_HOST_H
/// The environment variable that turns a process linking Parla's engine into its engine host
/// (set only in the environment of the child Parla starts; the host removes it at once).
#define PARLA_ENGINE_HOST_ENV "PARLA_ENGINE_HOST"
// The voice the host loads before its first utterance: Parla's voice for English, the
// catalog's default for "en" (voices/defaults.json), spelled as Parla sends it: the host
// compares names exactly (a test checks they agree).
#define PARLA_ENGINE_FIRST_VOICE "en-US"
// The directory of its file under espeak-ng-data/lang (the host loads the voice from the
// file: engine_host.c says why).
#define PARLA_ENGINE_FIRST_VOICE_FAMILY "gmw"
/// The engine host's loop: loads espeak-ng, then speaks the runs read from standard input
/// until it ends (engine_host.c). Returns the exit status.
int parla_engine_host_main(void);
/// Starts an engine host now, by forking this process (which must still have one thread: call
/// it from a constructor), for ``parla_take_prestarted_host`` to hand over later. The child
/// runs ``parla_engine_host_main`` with a socket from this process as its standard input and a
/// pipe to it as its standard output. Returns 1 if it did, 0 if it could not.
int parla_prestart_host(void);
/// The host ``parla_prestart_host`` started, once: returns 1 and fills in its process id,
/// the descriptor that writes to it and the one that reads from it; 0 if there is none.
int parla_take_prestarted_host(int *pid, int *input, int *output);
/// The directory of the espeak-ng bundled with the program (the Python wheel's espeak-ng/
/// beside parla-engine: libespeak-ng.so.1 and espeak-ng-data), once libespeak-ng is loaded;
/// NULL where the system's is used.
const char *parla_espeak_bundled_directory(void);
#endif
