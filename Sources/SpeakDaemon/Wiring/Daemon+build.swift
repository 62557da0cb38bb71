import AnnouncementIntake
import AnnouncementQueue
import AnnouncementRecords
import AudioOutput
import FoundationEssentials
import Logging
import PosixSupport
import ServiceLifecycle
import SpeakAPI
import SpeakClient
import SpeakSSIP
import SpeakServer
import SpeakState
import SpeakWyoming
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
    /// The Wyoming listener (`--wyoming`), or nil.
    public let wyoming: WyomingServer?
    let group: ServiceGroup
    /// Whether headphones are plugged into each private output, by name: read it, or watch its
    /// `changes()` (docs/privacy.md).
    public var headsets: [String: HeadsetPresence] = [:]

    /// Runs until graceful shutdown (SIGTERM, SIGINT or `shutdown()`) has finished.
    public func run() async throws {
        try await group.run()
    }

    /// Waits until every listener (the SSIP and Wyoming ones too) accepts connections; returns
    /// the bound addresses of the HTTP listeners.
    public func waitUntilReady() async throws -> [SpeakEndpoint] {
        let addresses = try await front.waitUntilListening()
        try await ssip?.waitUntilListening()
        try await wyoming?.waitUntilListening()
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
    let activatedSSIP = try checkSocketPaths(configuration, environment: environment)
    try checkDucking(configuration)
    // Then the token, so a token file that cannot be used stops the start before the engine loads.
    let settings = try accessSettings(configuration, logger: logger)
    // And the database: one that cannot be used stops the start, naming its file.
    let records = try openRecords(configuration, logger: logger)
    let engines = try await makeEngines(configuration, given: givenRenderer, environment: environment, logger: logger)
    let sound = try await makeSound(
        configuration, renderer: engines.renderer, environment: environment, logger: logger)
    let metrics = SpeakMetrics()
    if let cache = engines.cache { metrics.observe(renderCache: cache) }
    let outputs = try await makeOutputs(
        configuration, renderer: engines.renderer, sound: sound, metrics: metrics, recorder: records?.audit,
        sinks: (makeSink, makeOutputSink), environment: environment, logger: logger)
    var health = DaemonHealth(
        engineName: engines.renderer.engineName, outputs: outputs.parts.map { ($0.name, $0.audio) },
        pool: engines.pool)
    health.headsets = outputs.headsets
    health.zoneGroups = configuration.zoneGroups
    health.rtp = Dictionary(uniqueKeysWithValues: outputs.parts.compactMap { part in part.rtp.map { (part.name, $0) } })
    if let records { health.database = (records.database.path, records.audit) }
    // One way in for every front. Its health gate reads the outputs' audio only, so it does not
    // need the fleet link, which is built on it; `/healthz` reports the link too.
    var limits = configuration.intakeLimits
    limits.chimes = sound.chimes.names
    var intake = AnnouncementIntake(
        outputs: outputs.queues, renderer: engines.renderer, health: health, limits: limits,
        counters: metrics.serviceCounters)
    intake.privateOutputs = outputs.privateNames
    intake.refusals = records?.audit
    let fronts = try makeFronts(
        configuration, intake: intake, health: health, settings: settings, metrics: metrics, records: records,
        engines: engines, sound: sound, ducker: outputs.ducker,
        sinks: outputs.parts.map { ($0.name, $0.spec) }, activatedSSIP: activatedSSIP, logger: logger)
    let group = makeServiceGroup(
        configuration, outputs: outputs, fronts: fronts, intake: intake, environment: environment,
        gracefulShutdownSignals: gracefulShutdownSignals, logger: logger)
    return Daemon(
        configuration: configuration, queue: outputs.parts[0].queue, audio: outputs.parts[0].audio,
        outputs: outputs.queues,
        outputAudio: Dictionary(uniqueKeysWithValues: outputs.parts.map { ($0.name, $0.audio) }),
        server: fronts.server, front: fronts.listeners, ssip: fronts.ssip, wyoming: fronts.wyoming, group: group,
        headsets: outputs.headsets)
}

/// Checks the HTTP and SSIP socket paths, creating their directories; returns systemd's SSIP
/// socket when a socket unit passed one (it is there, listening, before speakd starts).
private func checkSocketPaths(_ configuration: DaemonConfiguration, environment: [String: String]) throws -> Int32? {
    if let path = configuration.socketPath {
        try prepareSocketDirectory(path, environment: environment)
        do {
            try SpeakListener.checkSocketPath(path)
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
    }
    let activatedSSIP = SystemdSockets(environment: environment).ssip
    if let path = configuration.ssipPath, activatedSSIP == nil {
        try prepareSocketDirectory(path, environment: environment)
        do {
            try SpeakListener.checkSocketPath(path)
        } catch {
            throw DaemonStartError(description: "--ssip: \(error)")
        }
    }
    return activatedSSIP
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
    if let readFile = configuration.readTokenFile {
        let read: AccessToken.Loaded
        do {
            read = try AccessToken.loadOrCreate(at: readFile)
        } catch {
            throw DaemonStartError(description: "\(error) (the read token, --read-token-file)")
        }
        guard read.token != loaded.token else {
            throw DaemonStartError(
                description:
                    "\(readFile) holds the same token as \(configuration.tokenFile): the read-only token must differ")
        }
        logger.info(
            read.created ? "created the read-only token file" : "the read-only token file gives read access",
            metadata: ["speakd.read-token-file": "\(readFile)"])
        settings.readToken = read.token
    }
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
