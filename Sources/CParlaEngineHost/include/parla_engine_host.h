#ifndef PARLA_ENGINE_HOST_H
#define PARLA_ENGINE_HOST_H
/// The environment variable that turns a process linking Parla's engine into its engine host
/// (set only in the environment of the child Parla starts; the host removes it at once).
#define PARLA_ENGINE_HOST_ENV "PARLA_ENGINE_HOST"
/// The engine host's loop: loads espeak-ng, then speaks the runs read from standard input
/// until it ends (engine_host.c). Returns the exit status.
int parla_engine_host_main(void);

/// Sets the environment a helper process that speaks (an engine host, a render worker) needs,
/// while it has one thread: ORT_DISABLE_TELEMETRY for ONNX Runtime. Never later: glibc's getenv
/// takes no lock, and a setenv that grows the environment frees the array that another thread
/// (a voice's espeak-ng loading beside ONNX Runtime) may be reading.
void parla_helper_prepare_environment(void);
/// Starts an engine host now, by forking this process (which must still have one thread: it is
/// called from CParlaBeforeMain's constructor), for ``parla_take_prestarted_host`` to hand over later. The child
/// runs ``parla_engine_host_main`` with a socket from this process as its standard input and a
/// pipe to it as its standard output. Returns 1 if it did, 0 if it could not.
int parla_prestart_host(void);
/// The host ``parla_prestart_host`` started, once: returns 1 and fills in its process id,
/// the descriptor that writes to it and the one that reads from it; 0 if there is none.
int parla_take_prestarted_host(int *pid, int *input, int *output);
#endif
