// Include guard: the module map and Swift's importer may both pull this header in.
#ifndef SPEAKD_CESPEAKNG_SHIM_H
#define SPEAKD_CESPEAKNG_SHIM_H

// The classic API: synthesis with a callback (espeak_SetSynthCallback, espeak_EVENT), voices
// (espeak_ListVoices, espeak_VOICE), parameters (espeak_PARAMETER) and synthesis flags.
#include <espeak-ng/speak_lib.h>
// The espeak_ng_* calls: status codes and their messages, initialisation that reports instead of exiting.
#include <espeak-ng/espeak_ng.h>

// End of the include guard.
#endif
