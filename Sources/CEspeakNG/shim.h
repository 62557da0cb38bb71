#ifndef SPEAKD_CESPEAKNG_SHIM_H
#define SPEAKD_CESPEAKNG_SHIM_H

// The classic API: initialisation, synthesis with a callback, voices, parameters.
#include <espeak-ng/speak_lib.h>
// The espeak_ng_* calls: status codes and their messages, initialisation that reports instead of exiting.
#include <espeak-ng/espeak_ng.h>

#endif
