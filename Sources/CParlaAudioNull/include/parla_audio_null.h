#ifndef PARLA_AUDIO_NULL_H
#define PARLA_AUDIO_NULL_H
// pcaudiolib's interface, as libespeak-ng 1.51 calls it (audio_null.c implements it with no
// device at all).
#include <stddef.h>
struct audio_object;
struct audio_object *create_audio_device_object(const char *device, const char *application_name, const char *description);
int audio_object_open(struct audio_object *object, int format, unsigned int rate, unsigned char channels);
void audio_object_close(struct audio_object *object);
void audio_object_destroy(struct audio_object *object);
int audio_object_write(struct audio_object *object, const void *data, size_t bytes);
int audio_object_drain(struct audio_object *object);
int audio_object_flush(struct audio_object *object);
const char *audio_object_strerror(struct audio_object *object, int error);
#endif
