import CPulseAudio
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// speakd's own ducking (`--duck ROLES`): while an announcement is heard, the volume of every
/// other playback stream whose `media.role` is one of `roles` is lowered to `level` of what it
/// was, and put back 0.5 s after the last announcement ends, through the sound server's
/// PulseAudio protocol (PulseAudio, or PipeWire's `pipewire-pulse`).
///
/// It does what PulseAudio's `module-role-ducking` or a WirePlumber policy would do, for a server
/// that has neither configured: PipeWire with WirePlumber 0.5, whose role policy is not set up by
/// default, or PulseAudio without the module. A stream of a ducked role that starts while speakd
/// speaks is lowered too. Each stream's volume is put back to what it was before, so a volume
/// changed during an announcement is not kept. Roles compare without case, and `video` and
/// `movie` are the same role (pipewire-pulse renames PulseAudio's `video` to `Movie`).
///
/// It has its own connection and main loop, apart from the playback streams'; when the server
/// goes away it connects again 2 s later, and a stream it had lowered is forgotten with it.
public final class PulseAudioDucker: Sendable {
    /// How long after the last announcement the streams are put back: a queue of announcements
    /// is one ducked stretch, not a pumping of the music between them.
    public static let hold = Duration.milliseconds(500)

    private let client: Client
    private let state = Mutex(Holding())

    private struct Holding {
        /// Announcements being heard now, on any output.
        var speaking = 0
        /// Bumped by every change, so a restore scheduled before it is dropped.
        var generation = 0
    }

    /// - Parameters:
    ///   - roles: the `media.role`s lowered (`music`, `movie`, `game`…).
    ///   - level: the linear factor they are lowered by, 0–1 (0.2 is −14 dB).
    ///   - server: the server (`PULSE_SERVER`); nil for libpulse's default.
    ///   - logger: where connections and failures are logged.
    public init(roles: [String], level: Double, server: String?, logger: Logger) {
        client = Client(roles: Set(roles.map(Self.canonical)), level: level, server: server, logger: logger)
        client.connect()
    }

    /// An announcement starts being heard: the streams are lowered, if they are not yet.
    public func begin() {
        let start = state.withLock { state -> Bool in
            state.speaking += 1
            state.generation += 1
            return state.speaking == 1
        }
        if start { client.setDucking(true) }
    }

    /// An announcement has ended: the streams are put back `hold` after the last one, unless
    /// another begins first.
    public func end() {
        let generation = state.withLock { state -> Int? in
            state.speaking = max(0, state.speaking - 1)
            state.generation += 1
            return state.speaking == 0 ? state.generation : nil
        }
        guard let generation else { return }
        Task { [self] in
            try? await Task.sleep(for: Self.hold)
            let restore = state.withLock { $0.speaking == 0 && $0.generation == generation }
            if restore { client.setDucking(false) }
        }
    }

    /// Puts every stream back, waiting up to a second for the server to confirm it, and
    /// disconnects.
    public func stop() {
        client.setDucking(false)
        for _ in 0..<100 where client.pendingChanges > 0 { usleep(10_000) }
        client.stop()
    }

    /// A role as it is compared: lowercased, `video` as `movie`.
    static func canonical(_ role: String) -> String {
        let lowered = role.lowercased()
        return lowered == "video" ? "movie" : lowered
    }

    /// The C side: everything here runs on the main loop's thread or under its lock.
    // @unchecked Sendable: as its superclass's, `ducking`, `lowered` and `pending` are touched only
    // on the main loop's thread or with its lock held.
    fileprivate final class Client: PulseAudioServerClient, @unchecked Sendable {
        let roles: Set<String>
        let level: pa_volume_t
        /// Whether streams of the roles are to be lowered now.
        var ducking = false
        /// The streams lowered, by index, with the volume each had before.
        var lowered: [UInt32: pa_cvolume] = [:]
        /// Volume changes sent and not yet confirmed by the server.
        private var pending = 0

        init(roles: Set<String>, level: Double, server: String?, logger: Logger) {
            self.roles = roles
            self.level = pa_sw_volume_from_linear(max(0, min(1, level)))
            super.init(
                name: "speakd ducking", server: server,
                subscription: pa_subscription_mask_t(PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue), logger: logger)
        }

        /// Volume changes sent and not yet confirmed.
        var pendingChanges: Int {
            locked { context == nil ? 0 : pending }
        }

        /// On the loop's thread: the server confirmed (or refused) one volume change.
        func changeConfirmed() {
            pending = max(0, pending - 1)
        }

        override func ready() {
            if ducking { queryStreams() }
        }

        /// The streams went with the server.
        override func disconnected() {
            lowered = [:]
            pending = 0
            logger.info("ducking: the sound server went away; connecting again in 2 s")
        }

        /// Lowers the streams of the roles now and while `on` stays true, or puts them back.
        func setDucking(_ on: Bool) {
            locked {
                guard on != ducking else { return }
                ducking = on
                if on {
                    queryStreams()
                } else {
                    for (index, volume) in lowered { setVolume(index, volume) }
                    lowered = [:]
                }
            }
        }

        /// On the loop's thread or under its lock: asks for every playback stream.
        func queryStreams() {
            guard let context else { return }
            let operation = pa_context_get_sink_input_info_list(context, duckerStreamInfo, userdata)
            if let operation { pa_operation_unref(operation) }
        }

        /// On the loop's thread: a stream came or went.
        override func changed(_ event: pa_subscription_event_type_t, index: UInt32) {
            guard let context else { return }
            switch event.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue {
            case PA_SUBSCRIPTION_EVENT_NEW.rawValue where ducking:
                let operation = pa_context_get_sink_input_info(context, index, duckerStreamInfo, userdata)
                if let operation { pa_operation_unref(operation) }
            case PA_SUBSCRIPTION_EVENT_REMOVE.rawValue:
                lowered[index] = nil
            default:
                break
            }
        }

        /// On the loop's thread: one stream's description; lowered when its role is one of ours.
        func received(_ info: UnsafePointer<pa_sink_input_info>?) {
            guard ducking, let info, lowered[info.pointee.index] == nil, info.pointee.has_volume != 0,
                info.pointee.volume_writable != 0,
                let role = pa_proplist_gets(info.pointee.proplist, PA_PROP_MEDIA_ROLE),
                roles.contains(PulseAudioDucker.canonical(String(cString: role)))
            else { return }
            var before = info.pointee.volume
            var after = pa_cvolume()
            pa_sw_cvolume_multiply_scalar(&after, &before, level)
            lowered[info.pointee.index] = before
            setVolume(info.pointee.index, after)
        }

        private func setVolume(_ index: UInt32, _ volume: pa_cvolume) {
            guard let context else { return }
            var volume = volume
            if let operation = pa_context_set_sink_input_volume(context, index, &volume, duckerChanged, userdata) {
                pending += 1
                pa_operation_unref(operation)
            }
        }
    }
}

// Streams' descriptions and volume changes come to plain functions: libpulse calls them on its
// main loop's thread with the client as userdata, which the ducker keeps alive for as long as the
// context exists.

private func duckerStreamInfo(
    _ context: OpaquePointer?, _ info: UnsafePointer<pa_sink_input_info>?, _ eol: Int32,
    _ userdata: UnsafeMutableRawPointer?
) {
    guard let userdata, eol == 0 else { return }
    duckerClient(userdata).received(info)
}

private func duckerChanged(_ context: OpaquePointer?, _ success: Int32, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    duckerClient(userdata).changeConfirmed()
}

private func duckerClient(_ userdata: UnsafeMutableRawPointer) -> PulseAudioDucker.Client {
    Unmanaged<PulseAudioDucker.Client>.fromOpaque(userdata).takeUnretainedValue()
}
