import AnnouncementIntake
import AnnouncementRecords
import AudioOutput
import FoundationEssentials
import Logging
import NIOPosix
import ServiceCore
import SpeakAPI
import SpeakFleet
import SpeakSSIP
import SpeakScheduler
import SpeakServer
import SpeakService
import SpeakState
import SpeakWyoming
import SpeechRendering

/// The ways in: the HTTP routes and their listeners, SSIP, Wyoming, the fleet link and the schedules.
struct Fronts {
    let server: SpeakServer
    let listeners: SpeakFront
    let ssip: SSIPListener?
    let wyoming: WyomingServer?
    let fleet: FleetLink?
    let schedules: ScheduleService?
}

/// Every front over the one service; `health` is what `/healthz` reports, the fleet link added.
func makeFronts(
    _ configuration: DaemonConfiguration, intake: AnnouncementIntake, health: DaemonHealth, settings: ServerSettings,
    metrics: SpeakMetrics, records: (database: StateDatabase, audit: AuditRecorder)?, engines: EngineParts,
    sound: AnnouncementSound, ducker: PulseAudioDucker?, sinks: [(name: String, spec: AudioSinkSpec)],
    activatedSSIP: Int32?, logger: Logger
) throws -> Fronts {
    let scheduleLimits = ScheduleService.Limits(
        maxSchedules: configuration.maxSchedules, maxStoredBytes: configuration.maxScheduleMiB << 20)
    let schedules = records.map {
        ScheduleService(store: $0.database.schedules, intake: intake, logger: logger, limits: scheduleLimits)
    }
    // The one door: every front below is handed this and nothing else of the daemon.
    var service = CoreService(intake: intake, health: health)
    service.scheduleService = schedules
    service.auditLog = records?.database.audit
    service.requests = RequestStore(table: records?.database.fleetRequests)
    // Listing (which measures a new clip's loudness), decoding and checking an upload read and
    // decode whole files: on NIO's thread pool, never on an event loop or Swift's cooperative threads.
    service.clipLibrary = engines.clips.map { library in
        { @Sendable () async throws -> [ClipInfo] in
            try await offThread { try library.list().map(ClipInfo.init) }
        }
    }
    service.clipSound = engines.clips.map { library in
        { @Sendable (name: String, format: AudioFormat) async throws -> [Int16]? in
            try await offThread {
                // A typed do and a plain catch: a cast of an error to its own type crashed Swift 6.2's
                // SIL verifier (trixie's toolchain).
                do throws(ClipLibrary.Failure) {
                    return try library.sound(of: name, format: format)
                } catch {
                    // A file of the directory that the clip check refuses: it cannot be played either.
                    throw SpeakError(.invalid, name: ErrorResponse.Code.invalidClip, error.description, field: "name")
                }
            }
        }
    }
    if configuration.clipsUpload, let library = engines.clips {
        let leftovers = library.removeLeftoverUploads()
        if !leftovers.isEmpty {
            logger.notice(
                "removed the temporary files of uploads a crash left",
                metadata: ["speakd.files": "\(leftovers.joined(separator: ", "))"])
        }
        service.clipUpload = { @Sendable (name: String, audio: Data, replace: Bool) async throws -> ClipStored in
            try await offThread {
                let stored: ClipLibrary.Stored
                do throws(ClipLibrary.UploadFailure) {
                    stored = try library.store(audio, as: name, replace: replace)
                } catch {
                    logger.notice(
                        "clip upload refused", metadata: ["speakd.clip": "\(name)", "speakd.reason": "\(error)"])
                    throw SpeakError(upload: error)
                }
                logger.notice(
                    "clip stored",
                    metadata: [
                        "speakd.clip": "\(name)", "speakd.file": "\(stored.listing.file)",
                        "speakd.bytes": "\(audio.count)", "speakd.replaced": "\(stored.replaced)",
                    ])
                return ClipStored(clip: ClipInfo(stored.listing), replaced: stored.replaced)
            }
        }
    }
    service.hallSound = sound.hallSound(renderer: engines.renderer)
    let sinkSpecs = Dictionary(sinks.map { ($0.name, $0.spec) }, uniquingKeysWith: { first, _ in first })
    service.sessionDescriptions = { name in
        guard case .rtp(let stream)? = sinkSpecs[name] else { return nil }
        return stream.sessionDescription(outputName: name)
    }
    let fleet = try makeFleetLink(configuration, service: service, schedules: schedules != nil, logger: logger)
    // `/healthz` reports the fleet link too, which is built on the service before it.
    var health = health
    if let fleet { health.fleet = fleet }
    service.healthReporter = health
    let server = SpeakServer(service: service, settings: settings, metrics: metrics, logger: logger)
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
            path: $0, activatedDescriptor: activatedSSIP, service: service, limits: limits, logger: logger)
    }
    let wyoming = try makeWyomingServer(configuration, service: service, logger: logger)
    let outputs = intake.outputs
    let front = SpeakFront(listeners: listeners) {
        logger.info("listeners closed; finishing announcements")
        await outputs.shutdown()
        engines.pool?.shutdown()
        await engines.piper?.shutdown()
        // The other streams back at their volume before the process ends.
        ducker?.stop()
    }
    return Fronts(
        server: server, listeners: front, ssip: ssip, wyoming: wyoming, fleet: fleet, schedules: schedules)
}

/// The fleet link `--mqtt` asks for, or nil.
private func makeFleetLink(
    _ configuration: DaemonConfiguration, service: any SpeakService, schedules: Bool, logger: Logger
) throws -> FleetLink? {
    do {
        guard let settings = try configuration.fleetSettings else { return nil }
        return try FleetLink(settings: settings, service: service, logger: logger, schedules: schedules)
    } catch {
        throw DaemonStartError(description: "--mqtt: \(error)")
    }
}

/// Runs `work` on NIO's thread pool for blocking work and answers its result: a clip's check
/// reads and decodes a file of up to 64 MiB, which must hold neither an event loop (every
/// connection it serves would wait) nor a thread of Swift's cooperative pool.
func offThread<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await NIOThreadPool.singleton.runIfActive(work)
}

extension ClipInfo {
    /// A clip as the library lists it, as the API shows it (`GET /v1/clips`, an upload's answer).
    fileprivate init(_ listing: ClipLibrary.Listing) {
        self.init(
            name: listing.name, file: listing.file, duration: listing.duration, sampleRate: listing.sampleRate,
            channels: listing.channels, loudness: listing.loudness.map { ($0 * 10).rounded() / 10 })
    }
}

extension SpeakError {
    /// An upload the clip library refused, as the service's refusal.
    init(upload failure: ClipLibrary.UploadFailure) {
        switch failure.kind {
        case .name:
            self.init(.invalid, name: ErrorResponse.Code.invalidClipName, failure.description, field: "name")
        case .exists:
            self.init(.conflict, name: ErrorResponse.Code.clipExists, failure.description, field: "name")
        case .sound:
            self.init(.invalid, name: ErrorResponse.Code.invalidClip, failure.description, field: "body")
        case .directory:
            self.init(.stateUnavailable, name: "clipsUnavailable", failure.description)
        }
    }
}
