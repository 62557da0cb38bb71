#ifndef SPEAKD_CALSA_SHIM_H
#define SPEAKD_CALSA_SHIM_H

// PCM playback: snd_pcm_open, snd_pcm_set_params, snd_pcm_writei, snd_pcm_drain, snd_pcm_drop.
#include <alsa/asoundlib.h>

#endif
