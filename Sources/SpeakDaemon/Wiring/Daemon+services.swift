import AnnouncementIntake
import AnnouncementQueue
import Logging
import ServiceLifecycle
import UnixSignals

/// The services the daemon runs, in the order they start (shutdown runs from the last to the
/// first): each output's queue and audio, headphone presence, SSIP, metrics, the idle release, the listeners,
/// systemd's readiness, the schedules and the fleet link.
func makeServiceGroup(
    _ configuration: DaemonConfiguration, outputs: OutputSet, fronts: Fronts, intake: AnnouncementIntake,
    environment: [String: String], gracefulShutdownSignals: [UnixSignal], logger: Logger
) -> ServiceGroup {
    typealias Configured = ServiceGroupConfiguration.ServiceConfiguration
    // The default output keeps the service names it had before outputs had names.
    let outputServices = outputs.parts.flatMap { part -> [Configured] in
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
    let ssipServices: [Configured] =
        fronts.ssip.map {
            [.init(service: $0, failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "ssip")]
        } ?? []
    // Beside SSIP: a Wyoming announcement waiting for its `finished` gets its `played`.
    let wyomingServices: [Configured] =
        fronts.wyoming.map {
            [.init(service: $0, failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "wyoming")]
        } ?? []
    let headsetServices: [Configured] =
        outputs.headsets.isEmpty
        ? []
        : [
            .init(
                service: HeadsetService(
                    outputs: outputs.parts.compactMap { part in part.headset.map { (part.spec, $0) } },
                    events: outputs.queues, sessions: intake.sessions, environment: environment, logger: logger),
                successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore, serviceName: "headsets")
        ]
    var group = ServiceGroupConfiguration(
        services: outputServices + headsetServices + ssipServices + wyomingServices + [
            .init(
                service: MetricsObserver(metrics: fronts.server.metrics, outputs: outputs.queues),
                successTerminationBehavior: .ignore, serviceName: "metrics"),
            .init(
                service: IdleRelease(outputs: outputs.queues, quiet: configuration.idleRelease),
                successTerminationBehavior: .ignore, serviceName: "idle-release"),
            .init(
                service: fronts.listeners, failureTerminationBehavior: .gracefullyShutdownGroup,
                serviceName: "listeners"),
            .init(
                service: SystemdReadiness(
                    front: fronts.listeners, ssip: fronts.ssip, wyoming: fronts.wyoming,
                    notifier: SystemdNotifier(environment: environment),
                    logger: logger),
                successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore, serviceName: "systemd"),
        ],
        gracefulShutdownSignals: gracefulShutdownSignals,
        logger: logger)
    if let schedules = fronts.schedules {
        group.services.append(.init(service: schedules, successTerminationBehavior: .ignore, serviceName: "schedules"))
    }
    if let fleet = fronts.fleet {
        // Failing or ending on its own never stops speaking: the link logs and reconnects itself.
        group.services.append(
            .init(
                service: fleet, successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore,
                serviceName: "mqtt"))
    }
    // systemd's default stop timeout is 90 s, but a kiosk wants to be gone within 5.
    group.maximumGracefulShutdownDuration = .milliseconds(4_500)
    return ServiceGroup(configuration: group)
}
