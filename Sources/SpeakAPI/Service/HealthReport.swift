/// The body of `GET /healthz`: 200 when `status` is `ok`, 503 otherwise (`degraded` too).
public struct HealthReport: Sendable, Hashable, Codable {
    /// The state of one component.
    public enum State: String, Sendable, Hashable, Codable {
        case ok
        /// Working, but not fully, and unable to recover by itself now: the engine renders on the
        /// workers it has and cannot start more (`detail` says why); the daemon keeps retrying.
        case degraded
        /// Not usable now; the daemon keeps retrying.
        case unavailable
    }

    /// The speech engine.
    public struct Engine: Sendable, Hashable, Codable {
        /// Whether it works.
        public var state: State
        /// The engine's own name and version (`espeak-ng 1.51`), when known.
        public var name: String?
        /// Why it is unavailable.
        public var detail: String?
        /// The engine worker processes, when the engine runs in them.
        public var workers: Workers?

        /// - Parameters: see the properties of the same names.
        public init(state: State, name: String? = nil, detail: String? = nil, workers: Workers? = nil) {
            self.state = state
            self.name = name
            self.detail = detail
            self.workers = workers
        }
    }

    /// The engine's worker processes.
    public struct Workers: Sendable, Hashable, Codable {
        /// Running now.
        public var running: Int
        /// Configured (`--engine-workers`).
        public var configured: Int
        /// Started to replace one that died (crashed, killed, stalled), since speakd started.
        public var restarts: Int
        /// How each worker is confined (`user nobody, no capabilities, no_new_privs, seccomp,
        /// landlock ABI 7 (signals and abstract sockets scoped)`; `user` when speakd runs as root).
        public var sandbox: String?

        /// - Parameters: see the properties of the same names.
        public init(running: Int, configured: Int, restarts: Int, sandbox: String? = nil) {
            self.running = running
            self.configured = configured
            self.restarts = restarts
            self.sandbox = sandbox
        }
    }

    /// The audio sink announcements are played on.
    public struct Audio: Sendable, Hashable, Codable {
        /// Whether it works.
        public var state: State
        /// What the sink plays to (`pulse`, `alsa:default`, `null`).
        public var sink: String
        /// Why it is unavailable, the last error it reported.
        public var detail: String?

        /// - Parameters: see the properties of the same names.
        public init(state: State, sink: String, detail: String? = nil) {
            self.state = state
            self.sink = sink
            self.detail = detail
        }
    }

    /// The queue's occupancy.
    public struct Queue: Sendable, Hashable, Codable {
        /// Announcements waiting (not counting the one speaking).
        public var waiting: Int
        /// Whether one is speaking.
        public var speaking: Bool
        /// The most that may wait.
        public var capacity: Int

        /// - Parameters: see the properties of the same names.
        public init(waiting: Int, speaking: Bool, capacity: Int) {
            self.waiting = waiting
            self.speaking = speaking
            self.capacity = capacity
        }
    }

    /// The MQTT fleet link (`--mqtt`).
    public struct MQTT: Sendable, Hashable, Codable {
        /// Whether the link is up; it never makes the daemon unavailable.
        public enum State: String, Sendable, Hashable, Codable {
            case connected
            /// Configured, not connected now: connecting or reconnecting with backoff.
            case connecting
            /// No `--mqtt`.
            case disabled
        }

        /// Whether the link is up.
        public var state: State
        /// The broker's URL (`mqtt://host:1883`), without credentials.
        public var broker: String?
        /// This kiosk's device id.
        public var device: String?
        /// Why it is not connected, the last error.
        public var detail: String?

        /// - Parameters: see the properties of the same names.
        public init(state: State, broker: String? = nil, device: String? = nil, detail: String? = nil) {
            self.state = state
            self.broker = broker
            self.device = device
            self.detail = detail
        }
    }

    /// One named output (`--output NAME=SPEC`; `default` is `--audio`): its sink and its queue.
    public struct Output: Sendable, Hashable, Codable {
        /// The output's name, as requests give it in `output`.
        public var name: String
        /// Whether its sink works: `degraded` for an RTP output whose last send failed, until a
        /// packet goes out again (the next announcement tries).
        public var state: State
        /// What the sink plays to (`pulse:headset`, `null`).
        public var sink: String
        /// Why it is unavailable or degraded, the last error it reported.
        public var detail: String?
        /// Its queue's occupancy; filled in by the server.
        public var queue: Queue?
        /// True for a private output (`--output NAME=SINK,private`); absent otherwise.
        public var `private`: Bool?
        /// A private output's headphones, as its sound server reports them.
        public var headset: Headset?
        /// What an RTP output has sent since speakd started; absent for a local sink.
        public var rtp: RTP?

        /// An RTP output's counts.
        public struct RTP: Sendable, Hashable, Codable {
            /// RTP packets sent.
            public var packets: Int
            /// Their payload bytes.
            public var bytes: Int
            /// Packets that left more than a millisecond after they were due.
            public var latePackets: Int

            /// - Parameters: see the properties of the same names.
            public init(packets: Int, bytes: Int, latePackets: Int) {
                self.packets = packets
                self.bytes = bytes
                self.latePackets = latePackets
            }
        }

        /// Whether headphones are plugged into a private output.
        public enum Headset: String, Sendable, Hashable, Codable {
            case present, absent
            /// The sink does not say (no jack detection, a null sink, not PulseAudio).
            case unknown
        }

        /// - Parameters: see the properties of the same names.
        public init(name: String, state: State, sink: String, detail: String? = nil, queue: Queue? = nil) {
            self.name = name
            self.state = state
            self.sink = sink
            self.detail = detail
            self.queue = queue
        }
    }

    /// `ok` when the engine and the `default` output are; `unavailable` when either is, else
    /// `degraded`. Another output that fails shows in `outputs` only: the default output and the
    /// others still speak.
    public var status: State
    /// The speech engine.
    public var engine: Engine
    /// The audio sink of the `default` output.
    public var audio: Audio
    /// The `default` output's queue; filled in by the server.
    public var queue: Queue?
    /// The MQTT fleet link; not part of `status`.
    public var mqtt: MQTT?
    /// Every output, `default` first, each with its own sink state and queue.
    public var outputs: [Output]?
    /// The named zone groups (`--zone-group NAME=OUTPUTS`), by name: each a name a request's
    /// `output` may give for several outputs at once. Empty when none is configured.
    public var zoneGroups: [ZoneGroup]?
    /// speakd's version (`0.1.0`, `0.1.0-dev` for a debug build).
    public var version: String?

    /// A named zone group: one name for several outputs, which an announcement to it is heard in
    /// as one announcement.
    public struct ZoneGroup: Sendable, Hashable, Codable {
        /// The group's name, as requests give it in `output`.
        public var name: String
        /// Its outputs, in the order the configuration names them.
        public var outputs: [String]

        /// - Parameters: see the properties of the same names.
        public init(name: String, outputs: [String]) {
            self.name = name
            self.outputs = outputs
        }
    }
    /// The database (`--state-dir`): absent when speakd keeps no state. A database that cannot
    /// be written (a full disk) is `degraded`, and so is the overall status; speaking goes on.
    public var database: Database? {
        didSet {
            if database?.state == .degraded, status == .ok { status = .degraded }
        }
    }

    /// The database of schedules and the audit log.
    public struct Database: Sendable, Hashable, Codable {
        public var state: State
        /// The database file.
        public var path: String
        /// Why it is degraded.
        public var detail: String?

        public init(state: State, path: String, detail: String? = nil) {
            self.state = state
            self.path = path
            self.detail = detail
        }
    }

    /// `status` is `ok` when engine and audio (the `default` output's) both are, `unavailable`
    /// when either is, otherwise `degraded`.
    public init(
        engine: Engine, audio: Audio, queue: Queue? = nil, outputs: [Output]? = nil, mqtt: MQTT? = nil,
        version: String? = nil
    ) {
        let states = [engine.state, audio.state]
        self.status =
            states.contains(.unavailable) ? .unavailable : states.allSatisfy { $0 == .ok } ? .ok : .degraded
        self.engine = engine
        self.audio = audio
        self.queue = queue
        self.mqtt = mqtt
        self.outputs = outputs
        self.version = version
    }
}
