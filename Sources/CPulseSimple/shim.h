#ifndef SPEAKD_CPULSESIMPLE_SHIM_H
#define SPEAKD_CPULSESIMPLE_SHIM_H

// The blocking "simple" API: one playback stream per sink, write, drain, flush.
#include <pulse/simple.h>
// The asynchronous API on a threaded main loop: what the playback stream is driven through,
// for the stream flags the simple API cannot set (PA_STREAM_DONT_MOVE).
#include <pulse/thread-mainloop.h>
#include <pulse/context.h>
#include <pulse/stream.h>
#include <pulse/operation.h>
// pa_strerror, to turn PulseAudio error codes into messages.
#include <pulse/error.h>
// pa_sample_spec and pa_buffer_attr, to ask for a small latency.
#include <pulse/sample.h>
#include <pulse/def.h>

#endif
