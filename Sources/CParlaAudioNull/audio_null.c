// A stand-in for pcaudiolib (libpcaudio.so.0), the audio output library libespeak-ng links.
// Parla never lets espeak-ng play: it takes the samples and plays them through its own
// stream. The engine host loads this library before libespeak-ng, so the loader finds a
// "libpcaudio.so.0" already there and maps neither the real one nor what that pulls in
// (libpulse, libasound, libsndfile and its codecs, X11, libsystemd, libgcrypt, ...): about
// 2.8 ms less before the host can speak (see parla_espeak_before_load in
// espeak_locate.c). Every device is absent, as with the replacement in engine_host.c.
#include "parla_audio_null.h"

struct audio_object *create_audio_device_object(const char *device, const char *application_name, const char *description) {
    (void)device;
    (void)application_name;
    (void)description;
    return NULL;
}

int audio_object_open(struct audio_object *object, int format, unsigned int rate, unsigned char channels) {
    (void)object;
    (void)format;
    (void)rate;
    (void)channels;
    return -1;
}

void audio_object_close(struct audio_object *object) { (void)object; }

void audio_object_destroy(struct audio_object *object) { (void)object; }

int audio_object_write(struct audio_object *object, const void *data, size_t bytes) {
    (void)object;
    (void)data;
    (void)bytes;
    return -1;
}

int audio_object_drain(struct audio_object *object) {
    (void)object;
    return -1;
}

int audio_object_flush(struct audio_object *object) {
    (void)object;
    return -1;
}

const char *audio_object_strerror(struct audio_object *object, int error) {
    (void)object;
    (void)error;
    return "Parla plays espeak-ng's audio itself: espeak-ng has no audio device";
}
