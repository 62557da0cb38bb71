#ifndef SPEAKD_CALSA_SHIM_H
#define SPEAKD_CALSA_SHIM_H

// PCM playback: snd_pcm_open, snd_pcm_set_params, snd_pcm_writei, snd_pcm_drain, snd_pcm_drop.
#include <alsa/asoundlib.h>
// va_list, va_start and vsnprintf for the error handler below.
#include <stdarg.h>
#include <stdio.h>

// libasound prints every error to standard error ("ALSA lib pcm.c:2666:(snd_pcm_open_noupdate)
// Unknown PCM x") unless a handler is installed with snd_lib_error_set_handler. That handler is
// variadic, which Swift cannot implement, so this one formats the message and hands it to
// speakd_alsa_error_received, a plain C function that AudioOutput implements in Swift.
void speakd_alsa_error_received(const char *file, int line, const char *function, int err, const char *message);

static inline void speakd_alsa_error_handler(const char *file, int line, const char *function, int err,
                                             const char *fmt, ...) {
    char message[512];
    va_list arguments;
    va_start(arguments, fmt);
    vsnprintf(message, sizeof message, fmt, arguments);
    va_end(arguments);
    speakd_alsa_error_received(file, line, function, err, message);
}

// Sends libasound's error messages to speakd_alsa_error_received instead of standard error, for
// the whole process.
static inline int speakd_alsa_route_errors(void) {
    return snd_lib_error_set_handler(speakd_alsa_error_handler);
}

#endif
