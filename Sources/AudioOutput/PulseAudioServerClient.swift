import CPulseAudio
import Logging

/// A connection of its own to the sound server (PulseAudio, or PipeWire's `pipewire-pulse`),
/// apart from the playback streams', for what watches or changes the server while nothing plays:
/// the headset monitor and the ducking. It runs its own threaded main loop, subscribes to the
/// server's events named by `subscription` once connected, and when the connection fails (the
/// server went away, or is not up yet) connects again 2 s later, for as long as it runs.
///
/// A subclass says what to do when the connection is ready (`ready()`), when a subscribed event
/// comes (`changed(_:index:)`) and when the connection is lost (`disconnected()`); each runs on the
/// main loop's thread or with its lock held, as everything of the connection does.
// @unchecked Sendable: `context` and `stopped`, and a subclass's state, are touched only on the
// main loop's thread (its callbacks) or with `pa_threaded_mainloop_lock` held.
class PulseAudioServerClient: @unchecked Sendable {
    /// The server (`PULSE_SERVER`); nil for libpulse's default.
    let server: String?
    let logger: Logger
    let mainloop: OpaquePointer?
    /// The connection, while there is one.
    var context: OpaquePointer?
    private let name: String
    private let subscription: pa_subscription_mask_t
    private var stopped = false

    /// - Parameters:
    ///   - name: the client's name, as the server lists it.
    ///   - server: the server; nil for libpulse's default.
    ///   - subscription: the events `changed(_:index:)` is told of.
    ///   - logger: for the subclass's reports.
    init(name: String, server: String?, subscription: pa_subscription_mask_t, logger: Logger) {
        self.name = name
        self.server = server
        self.subscription = subscription
        self.logger = logger
        mainloop = pa_threaded_mainloop_new()
        if let mainloop { pa_threaded_mainloop_start(mainloop) }
    }

    /// What the C callbacks are given to find this client again.
    var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// On the loop's thread or under its lock: the connection is ready and subscribed.
    func ready() {}

    /// On the loop's thread: an event of the subscription.
    func changed(_ event: pa_subscription_event_type_t, index: UInt32) {}

    /// On the loop's thread or under its lock: the connection is gone; a new one follows 2 s later.
    func disconnected() {}

    /// Runs `body` with the main loop's lock held.
    func locked<Result>(_ body: () -> Result) -> Result {
        guard let mainloop else { return body() }
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return body()
    }

    /// Makes a context and connects it; the state callback does the rest.
    func connect() {
        guard let mainloop else { return }
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        guard !stopped, context == nil, let context = pa_context_new(pa_threaded_mainloop_get_api(mainloop), name)
        else { return }
        self.context = context
        pa_context_set_state_callback(context, serverClientStateChanged, userdata)
        pa_context_set_subscribe_callback(context, serverClientChanged, userdata)
        if pa_context_connect(context, server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
            contextFailed()
        }
    }

    /// On the loop's thread: the connection is ready, or failed.
    fileprivate func stateChanged() {
        guard let context else { return }
        switch pa_context_get_state(context) {
        case PA_CONTEXT_READY:
            if let operation = pa_context_subscribe(context, subscription, nil, nil) { pa_operation_unref(operation) }
            ready()
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            contextFailed()
        default:
            break
        }
    }

    /// On the loop's thread or under its lock: the connection is gone; try again later.
    private func contextFailed() {
        disconnected()
        dropContext()
        guard !stopped else { return }
        // Not from inside the loop's callback: `connect` takes the loop's lock.
        Task { [self] in
            try? await Task.sleep(for: .seconds(2))
            connect()
        }
    }

    /// Under the loop's lock: disconnects and lets the context go, its callbacks first.
    private func dropContext() {
        guard let context else { return }
        pa_context_set_state_callback(context, nil, nil)
        pa_context_set_subscribe_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
        self.context = nil
    }

    /// Disconnects for good and stops the main loop.
    func stop() {
        guard let mainloop else { return }
        pa_threaded_mainloop_lock(mainloop)
        stopped = true
        dropContext()
        pa_threaded_mainloop_unlock(mainloop)
        pa_threaded_mainloop_stop(mainloop)
    }

    deinit {
        if let mainloop {
            if !stopped { pa_threaded_mainloop_stop(mainloop) }
            pa_threaded_mainloop_free(mainloop)
        }
    }
}

// The callbacks are plain functions: libpulse calls them on its main loop's thread with the
// client as userdata, which its owner keeps alive for as long as the context exists.

private func serverClientStateChanged(_ context: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    Unmanaged<PulseAudioServerClient>.fromOpaque(userdata).takeUnretainedValue().stateChanged()
}

private func serverClientChanged(
    _ context: OpaquePointer?, _ event: pa_subscription_event_type_t, _ index: UInt32,
    _ userdata: UnsafeMutableRawPointer?
) {
    guard let userdata else { return }
    Unmanaged<PulseAudioServerClient>.fromOpaque(userdata).takeUnretainedValue().changed(event, index: index)
}
