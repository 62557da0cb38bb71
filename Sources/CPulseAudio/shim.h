#ifndef SPEAKD_CPULSEAUDIO_SHIM_H
#define SPEAKD_CPULSEAUDIO_SHIM_H

// The asynchronous API on a threaded main loop: what the playback stream is driven through,
// for what the blocking "simple" API cannot do (PA_STREAM_DONT_MOVE, a role on the stream alone).
#include <pulse/thread-mainloop.h>
#include <pulse/context.h>
#include <pulse/stream.h>
#include <pulse/operation.h>
// pa_proplist, to give the stream its media.role.
#include <pulse/proplist.h>
// pa_strerror, to turn PulseAudio error codes into messages.
#include <pulse/error.h>
// pa_sample_spec and pa_buffer_attr, to ask for a small latency.
#include <pulse/sample.h>
#include <pulse/def.h>
// pa_context_get_sink_info_by_name and pa_context_subscribe: a headset's port availability
// (jack detection) and the server's change events, for headphone presence.
#include <pulse/introspect.h>
#include <pulse/subscribe.h>

#endif
