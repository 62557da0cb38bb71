// pcaudio's API (pcaudiolib/audio.h) as libespeak-ng 1.51 calls it, with no device behind it.
// In synchronous mode libespeak-ng only creates the object and never opens it; if it did,
// opening fails and espeak-ng reports an audio error rather than playing anything.

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "CNoAudioDevice.h"

struct audio_object;

int speakd_no_audio_device(void) { return 1; }

struct audio_object *create_audio_device_object(const char *device, const char *application_name,
                                                const char *description) {
    (void)device;
    (void)application_name;
    (void)description;
    return NULL;
}

int audio_object_open(struct audio_object *object, int format, uint32_t rate, uint8_t channels) {
    (void)object;
    (void)format;
    (void)rate;
    (void)channels;
    return ENODEV;
}

void audio_object_close(struct audio_object *object) { (void)object; }

void audio_object_destroy(struct audio_object *object) { (void)object; }

int audio_object_write(struct audio_object *object, const void *data, size_t bytes) {
    (void)object;
    (void)data;
    (void)bytes;
    return ENODEV;
}

int audio_object_drain(struct audio_object *object) {
    (void)object;
    return 0;
}

int audio_object_flush(struct audio_object *object) {
    (void)object;
    return 0;
}

const char *audio_object_strerror(struct audio_object *object, int error) {
    (void)object;
    (void)error;
    return "no audio device in the engine worker";
}
