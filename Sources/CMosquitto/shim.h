// Include guard: the module map and Swift's importer may both pull this header in.
#ifndef SPEAKD_CMOSQUITTO_SHIM_H
#define SPEAKD_CMOSQUITTO_SHIM_H

// The client library: connections, the network thread (mosquitto_loop_start), publish and
// subscribe with MQTT 5 properties (mosquitto_property_*).
#include <mosquitto.h>
// MQTT 5 constants: MQTT_PROTOCOL_V5, the property identifiers (MQTT_PROP_*), reason codes.
#include <mqtt_protocol.h>

// End of the include guard.
#endif
