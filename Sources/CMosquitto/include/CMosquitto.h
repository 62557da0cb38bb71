// Include guard: the module map and Swift's importer may both pull this header in.
#ifndef SPEAKD_CMOSQUITTO_H
#define SPEAKD_CMOSQUITTO_H

// The client library's declarations: connections, the network thread (mosquitto_loop_start),
// publish and subscribe with MQTT 5 properties (mosquitto_property_*).
#include <mosquitto.h>
// MQTT 5 constants: MQTT_PROTOCOL_V5, the property identifiers (MQTT_PROP_*), reason codes.
#include <mqtt_protocol.h>

/// Loads libmosquitto (and with it libssl and libcrypto) on first use instead of at start, so a
/// speakd without a fleet never maps them (about 1.8 MB). Returns NULL once the library and every
/// function speakd calls are there, or what is missing; the mosquitto_* functions speakd calls
/// (defined in loader.c, forwarding to the library) may be called only after it returned NULL.
const char *speakd_mosquitto_load(void);

// End of the include guard.
#endif
