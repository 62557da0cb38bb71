#ifndef SPEAKD_NO_AUDIO_DEVICE_H
#define SPEAKD_NO_AUDIO_DEVICE_H

/// The engine worker links libespeak-ng statically with this in place of libpcaudio: the worker
/// only ever renders in synchronous mode, so it must not load an audio client (PulseAudio, ALSA
/// and the codecs behind them) or try to reach a sound server from inside its sandbox.
///
/// Returns 1, so a Swift caller can check that this stub, not libpcaudio, was linked.
int speakd_no_audio_device(void);

#endif
