import CPulseAudio
import Logging

/// Watches one PulseAudio sink's ports and keeps a `HeadsetPresence` up to date: it subscribes to
/// the server's sink and card change events and reads the sink's ports (their jack detection,
/// `pa_sink_port_info.available`) at start and after each change.
///
/// It has its own connection and main loop, apart from the playback stream's, so it reports
/// while nothing plays. When the connection fails (the server went away, or is not up yet)
/// presence becomes unknown and the monitor connects again 2 s later, for as long as it runs.
public final class PulseAudioHeadsetMonitor: Sendable {
    private let watcher: Watcher

    /// - Parameters:
    ///   - sinkName: the sink whose ports tell (`pulse:SINK`'s SINK); nil for the server's default sink.
    ///   - server: the server (`PULSE_SERVER`); nil for libpulse's default.
    ///   - presence: what it keeps up to date.
    ///   - logger: where changes are logged.
    public init(sinkName: String?, server: String?, presence: HeadsetPresence, logger: Logger) {
        watcher = Watcher(sinkName: sinkName, server: server, presence: presence, logger: logger)
        watcher.connect()
    }

    /// Disconnects and stops its main loop; presence is left as it was last reported.
    public func stop() {
        watcher.stop()
    }

    /// The C side: everything here runs on the main loop's thread or under its lock.
    // @unchecked Sendable: as its superclass's, `presence` is reported from the loop's thread only.
    fileprivate final class Watcher: PulseAudioServerClient, @unchecked Sendable {
        let sinkName: String?
        let presence: HeadsetPresence

        init(sinkName: String?, server: String?, presence: HeadsetPresence, logger: Logger) {
            self.sinkName = sinkName
            self.presence = presence
            super.init(
                name: "speakd headset monitor", server: server,
                subscription: pa_subscription_mask_t(
                    PA_SUBSCRIPTION_MASK_SINK.rawValue | PA_SUBSCRIPTION_MASK_CARD.rawValue),
                logger: logger)
        }

        override func ready() { query() }

        override func changed(_ event: pa_subscription_event_type_t, index: UInt32) { query() }

        /// Presence is unknown until the server is back.
        override func disconnected() { report(nil) }

        /// On the loop's thread: asks for the sink's ports.
        func query() {
            guard let context else { return }
            let operation = pa_context_get_sink_info_by_name(context, sinkName ?? "@DEFAULT_SINK@", sinkInfo, userdata)
            if let operation { pa_operation_unref(operation) }
        }

        /// On the loop's thread: one sink's description, or the end of the list (`eol`).
        func received(_ info: UnsafePointer<pa_sink_info>?, eol: Int32) {
            if eol < 0 {
                // No such sink (not loaded yet, or unplugged with its module): nothing known.
                report(nil)
                return
            }
            guard let info else { return }
            var ports: [HeadsetPresence.Port] = []
            if let list = info.pointee.ports {
                for index in 0..<Int(info.pointee.n_ports) {
                    guard let port = list[index]?.pointee else { continue }
                    let name = port.name.map { String(cString: $0) } ?? ""
                    let lowered = name.lowercased()
                    let isHeadphones =
                        port.type == PA_DEVICE_PORT_TYPE_HEADPHONES.rawValue
                        || port.type == PA_DEVICE_PORT_TYPE_HEADSET.rawValue
                        || lowered.contains("headphone") || lowered.contains("headset")
                    let availability: HeadsetPresence.Port.Availability =
                        switch UInt32(port.available) {
                        case PA_PORT_AVAILABLE_YES.rawValue: .yes
                        case PA_PORT_AVAILABLE_NO.rawValue: .no
                        default: .unknown
                        }
                    ports.append(.init(name: name, isHeadphones: isHeadphones, availability: availability))
                }
            }
            let active = info.pointee.active_port?.pointee.name.map { String(cString: $0) }
            report(HeadsetPresence.presence(ports: ports, active: active))
        }

        private func report(_ present: Bool?) {
            guard present != presence.present else { return }
            logger.info(
                "headset presence changed",
                metadata: [
                    "speakd.output": "\(presence.output)",
                    "speakd.headset": "\(present.map { $0 ? "present" : "absent" } ?? "unknown")",
                ])
            presence.update(present)
        }
    }
}

// The sink's description comes to a plain function: libpulse calls it on its main loop's thread
// with the watcher as userdata, which the monitor keeps alive for as long as the context exists.

private func sinkInfo(
    _ context: OpaquePointer?, _ info: UnsafePointer<pa_sink_info>?, _ eol: Int32, _ userdata: UnsafeMutableRawPointer?
) {
    guard let userdata else { return }
    watcher(userdata).received(info, eol: eol)
}

private func watcher(_ userdata: UnsafeMutableRawPointer) -> PulseAudioHeadsetMonitor.Watcher {
    Unmanaged<PulseAudioHeadsetMonitor.Watcher>.fromOpaque(userdata).takeUnretainedValue()
}
