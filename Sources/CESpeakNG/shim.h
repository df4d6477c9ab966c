#ifndef CESPEAKNG_SHIM_H
#define CESPEAKNG_SHIM_H
// The classic eSpeak API (espeak_Synth, events, voices) plus the espeak-ng status API.
#include <espeak-ng/speak_lib.h>
#include <espeak-ng/espeak_ng.h>
#endif
