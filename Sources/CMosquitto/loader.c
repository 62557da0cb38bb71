// libmosquitto, loaded with dlopen when a fleet link starts rather than linked at start.
//
// Each function speakd calls is defined here under its own name and forwards to the library's;
// mosquitto.h declares them, so the compiler checks every definition against the library's
// prototype. The table is filled once, under pthread_once, before any forwarding call.

#include "CMosquitto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define SPEAKD_MOSQUITTO_FUNCTIONS(X)                                                              \
    X(mosquitto_connect_bind_v5)                                                                   \
    X(mosquitto_connect_v5_callback_set)                                                           \
    X(mosquitto_destroy)                                                                           \
    X(mosquitto_disconnect_v5)                                                                     \
    X(mosquitto_disconnect_v5_callback_set)                                                        \
    X(mosquitto_int_option)                                                                        \
    X(mosquitto_lib_init)                                                                          \
    X(mosquitto_loop_start)                                                                        \
    X(mosquitto_loop_stop)                                                                         \
    X(mosquitto_message_v5_callback_set)                                                           \
    X(mosquitto_new)                                                                               \
    X(mosquitto_property_add_binary)                                                               \
    X(mosquitto_property_add_int32)                                                                \
    X(mosquitto_property_add_string)                                                               \
    X(mosquitto_property_add_string_pair)                                                          \
    X(mosquitto_property_free_all)                                                                 \
    X(mosquitto_property_read_binary)                                                              \
    X(mosquitto_property_read_int32)                                                               \
    X(mosquitto_property_read_string)                                                              \
    X(mosquitto_publish_v5)                                                                        \
    X(mosquitto_publish_v5_callback_set)                                                           \
    X(mosquitto_reason_string)                                                                     \
    X(mosquitto_reconnect_delay_set)                                                               \
    X(mosquitto_strerror)                                                                          \
    X(mosquitto_subscribe_v5)                                                                      \
    X(mosquitto_tls_set)                                                                           \
    X(mosquitto_user_data_set)                                                                     \
    X(mosquitto_username_pw_set)                                                                   \
    X(mosquitto_will_set_v5)

#define SPEAKD_POINTER(name) static __typeof__(name) *library_##name;
SPEAKD_MOSQUITTO_FUNCTIONS(SPEAKD_POINTER)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

static void load(void) {
    // The soname of Debian's libmosquitto1 (libmosquitto-dev's link points at it).
    void *library = dlopen("libmosquitto.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(failure, sizeof failure, "cannot load libmosquitto: %s", dlerror());
        return;
    }
#define SPEAKD_RESOLVE(name)                                                                       \
    library_##name = (__typeof__(name) *)dlsym(library, #name);                                    \
    if (library_##name == NULL) {                                                                  \
        snprintf(failure, sizeof failure, "libmosquitto has no %s", #name);                        \
        return;                                                                                    \
    }
    SPEAKD_MOSQUITTO_FUNCTIONS(SPEAKD_RESOLVE)
    loaded = 1;
}

const char *speakd_mosquitto_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

int mosquitto_lib_init(void) { return library_mosquitto_lib_init(); }

struct mosquitto *mosquitto_new(const char *id, bool clean_session, void *obj) {
    return library_mosquitto_new(id, clean_session, obj);
}

void mosquitto_destroy(struct mosquitto *mosq) { library_mosquitto_destroy(mosq); }

const char *mosquitto_strerror(int mosq_errno) { return library_mosquitto_strerror(mosq_errno); }

const char *mosquitto_reason_string(int reason_code) { return library_mosquitto_reason_string(reason_code); }

int mosquitto_connect_bind_v5(struct mosquitto *mosq, const char *host, int port, int keepalive,
                              const char *bind_address, const mosquitto_property *properties) {
    return library_mosquitto_connect_bind_v5(mosq, host, port, keepalive, bind_address, properties);
}

int mosquitto_disconnect_v5(struct mosquitto *mosq, int reason_code, const mosquitto_property *properties) {
    return library_mosquitto_disconnect_v5(mosq, reason_code, properties);
}

void mosquitto_connect_v5_callback_set(struct mosquitto *mosq,
                                       void (*on_connect)(struct mosquitto *, void *, int, int,
                                                          const mosquitto_property *props)) {
    library_mosquitto_connect_v5_callback_set(mosq, on_connect);
}

void mosquitto_disconnect_v5_callback_set(struct mosquitto *mosq,
                                          void (*on_disconnect)(struct mosquitto *, void *, int,
                                                                const mosquitto_property *props)) {
    library_mosquitto_disconnect_v5_callback_set(mosq, on_disconnect);
}

void mosquitto_message_v5_callback_set(struct mosquitto *mosq,
                                       void (*on_message)(struct mosquitto *, void *,
                                                          const struct mosquitto_message *,
                                                          const mosquitto_property *props)) {
    library_mosquitto_message_v5_callback_set(mosq, on_message);
}

void mosquitto_publish_v5_callback_set(struct mosquitto *mosq,
                                       void (*on_publish)(struct mosquitto *, void *, int, int,
                                                          const mosquitto_property *props)) {
    library_mosquitto_publish_v5_callback_set(mosq, on_publish);
}

int mosquitto_int_option(struct mosquitto *mosq, enum mosq_opt_t option, int value) {
    return library_mosquitto_int_option(mosq, option, value);
}

int mosquitto_loop_start(struct mosquitto *mosq) { return library_mosquitto_loop_start(mosq); }

int mosquitto_loop_stop(struct mosquitto *mosq, bool force) { return library_mosquitto_loop_stop(mosq, force); }

int mosquitto_property_add_binary(mosquitto_property **proplist, int identifier, const void *value, uint16_t len) {
    return library_mosquitto_property_add_binary(proplist, identifier, value, len);
}

int mosquitto_property_add_int32(mosquitto_property **proplist, int identifier, uint32_t value) {
    return library_mosquitto_property_add_int32(proplist, identifier, value);
}

int mosquitto_property_add_string(mosquitto_property **proplist, int identifier, const char *value) {
    return library_mosquitto_property_add_string(proplist, identifier, value);
}

int mosquitto_property_add_string_pair(mosquitto_property **proplist, int identifier, const char *name,
                                       const char *value) {
    return library_mosquitto_property_add_string_pair(proplist, identifier, name, value);
}

void mosquitto_property_free_all(mosquitto_property **properties) { library_mosquitto_property_free_all(properties); }

const mosquitto_property *mosquitto_property_read_binary(const mosquitto_property *proplist, int identifier,
                                                         void **value, uint16_t *len, bool skip_first) {
    return library_mosquitto_property_read_binary(proplist, identifier, value, len, skip_first);
}

const mosquitto_property *mosquitto_property_read_int32(const mosquitto_property *proplist, int identifier,
                                                        uint32_t *value, bool skip_first) {
    return library_mosquitto_property_read_int32(proplist, identifier, value, skip_first);
}

const mosquitto_property *mosquitto_property_read_string(const mosquitto_property *proplist, int identifier,
                                                         char **value, bool skip_first) {
    return library_mosquitto_property_read_string(proplist, identifier, value, skip_first);
}

int mosquitto_publish_v5(struct mosquitto *mosq, int *mid, const char *topic, int payloadlen, const void *payload,
                         int qos, bool retain, const mosquitto_property *properties) {
    return library_mosquitto_publish_v5(mosq, mid, topic, payloadlen, payload, qos, retain, properties);
}

int mosquitto_reconnect_delay_set(struct mosquitto *mosq, unsigned int reconnect_delay,
                                  unsigned int reconnect_delay_max, bool reconnect_exponential_backoff) {
    return library_mosquitto_reconnect_delay_set(mosq, reconnect_delay, reconnect_delay_max,
                                                 reconnect_exponential_backoff);
}

int mosquitto_subscribe_v5(struct mosquitto *mosq, int *mid, const char *sub, int qos, int options,
                           const mosquitto_property *properties) {
    return library_mosquitto_subscribe_v5(mosq, mid, sub, qos, options, properties);
}

int mosquitto_tls_set(struct mosquitto *mosq, const char *cafile, const char *capath, const char *certfile,
                      const char *keyfile, int (*pw_callback)(char *buf, int size, int rwflag, void *userdata)) {
    return library_mosquitto_tls_set(mosq, cafile, capath, certfile, keyfile, pw_callback);
}

void mosquitto_user_data_set(struct mosquitto *mosq, void *obj) { library_mosquitto_user_data_set(mosq, obj); }

int mosquitto_username_pw_set(struct mosquitto *mosq, const char *username, const char *password) {
    return library_mosquitto_username_pw_set(mosq, username, password);
}

int mosquitto_will_set_v5(struct mosquitto *mosq, const char *topic, int payloadlen, const void *payload, int qos,
                          bool retain, mosquitto_property *properties) {
    return library_mosquitto_will_set_v5(mosq, topic, payloadlen, payload, qos, retain, properties);
}
