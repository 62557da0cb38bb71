import AnnouncementQueue
import AudioOutput
import Logging
import SpeakServer
import SpeechRendering

/// The parts of one named output.
struct OutputParts {
    let name: String
    let audio: AudioSupervisor
    let queue: AnnouncementQueue
    let spec: AudioSinkSpec
    /// A private output's headphone presence.
    let headset: HeadsetPresence?
    /// What an RTP output has sent.
    let rtp: RTPStatistics?
}

/// Every named output: each one's parts, and their queues together.
struct OutputSet {
    /// `default` first.
    let parts: [OutputParts]
    let queues: AnnouncementOutputs
    /// The names of the private outputs (`NAME=SINK,private`).
    let privateNames: Set<String>
    /// Lowers other streams while any output speaks (`--duck`); nil for none.
    let ducker: PulseAudioDucker?

    /// Whether headphones are plugged into each private output, by name.
    var headsets: [String: HeadsetPresence] {
        Dictionary(uniqueKeysWithValues: parts.compactMap { part in part.headset.map { (part.name, $0) } })
    }
}

/// `--audio` is the output called `default`; each `--output` adds one. Each has its own
/// supervisor, speaker and queue, so one failing or busy leaves the others speaking; the engine
/// workers, the chimes, the event stream and the id space are shared.
/// - Parameter sinks: makes the `default` output's sink, and another output's by name; nil makes
///   the one the configuration names.
func makeOutputs(
    _ configuration: DaemonConfiguration, renderer: any SpeechRenderer, sound: AnnouncementSound,
    metrics: SpeakMetrics, recorder: (any AnnouncementRecorder)?,
    sinks: (AudioSupervisor.MakeSink?, (@Sendable (String) -> AudioSupervisor.MakeSink?)?),
    environment: [String: String], logger: Logger
) async throws -> OutputSet {
    let named =
        [NamedOutput(name: AnnouncementOutputs.defaultName, sink: configuration.audio)] + configuration.outputs
    if let problem = AnnouncementOutputs.checkZoneGroups(configuration.zoneGroups, outputs: named.map(\.name)) {
        throw DaemonStartError(description: "--zone-group: \(problem)")
    }
    let shared = SharedQueueState(
        eventHistory: configuration.eventHistory, subscriberBuffer: 256, queues: named.count, recorder: recorder)
    let ducker = try makeDucker(configuration, outputs: named, environment: environment, logger: logger)
    var parts: [OutputParts] = []
    for output in named {
        let makeSink = output.name == AnnouncementOutputs.defaultName ? sinks.0 : sinks.1?(output.name)
        parts.append(
            try await makeOutput(
                output, configuration, renderer: renderer, sound: sound, metrics: metrics, shared: shared,
                ducker: ducker, makeSink: makeSink, environment: environment, logger: logger))
    }
    return OutputSet(
        parts: parts,
        queues: AnnouncementOutputs(parts.map(\.queue), shared: shared, zoneGroups: configuration.zoneGroups),
        privateNames: Set(named.filter(\.isPrivate).map(\.name)), ducker: ducker)
}

/// Checks that `--duck` has a sound server to act through: an output on `pulse` or `auto`. Called
/// before the engines start, so a start that cannot work fails at once.
func checkDucking(_ configuration: DaemonConfiguration) throws {
    guard !configuration.duckRoles.isEmpty else { return }
    let outputs = [configuration.audio] + configuration.outputs.map(\.sink)
    let throughServer = outputs.contains { sink in
        switch try? AudioSinkSpec(parsing: sink) {
        case .auto, .pulse, .pulseSink: true
        default: false
        }
    }
    guard throughServer else {
        throw DaemonStartError(
            description: "--duck: no output plays through a sound server (pulse or auto); ducking lowers the other "
                + "streams of PulseAudio or PipeWire")
    }
}

/// speakd's own ducking (`--duck ROLES`), through the sound server the outputs play to; nil when
/// it is off.
private func makeDucker(
    _ configuration: DaemonConfiguration, outputs: [NamedOutput], environment: [String: String], logger: Logger
) throws -> PulseAudioDucker? {
    guard !configuration.duckRoles.isEmpty else { return nil }
    logger.info(
        "ducking other streams while speaking",
        metadata: [
            "speakd.duck": "\(configuration.duckRoles.joined(separator: ","))",
            "speakd.duck-level": "\(configuration.duckLevel)",
        ])
    return PulseAudioDucker(
        roles: configuration.duckRoles, level: configuration.duckLevel, server: environment["PULSE_SERVER"],
        logger: logger)
}

/// One output: its audio supervisor (connected now, or retrying in the background), its
/// playback and speaker, and its queue.
private func makeOutput(
    _ output: NamedOutput, _ configuration: DaemonConfiguration, renderer: any SpeechRenderer,
    sound: AnnouncementSound, metrics: SpeakMetrics, shared: SharedQueueState, ducker: PulseAudioDucker?,
    makeSink: AudioSupervisor.MakeSink?,
    environment: [String: String], logger: Logger
) async throws -> OutputParts {
    let spec = try AudioSinkSpec(parsing: output.sink)
    var outputLogger = logger
    if output.name != AnnouncementOutputs.defaultName { outputLogger[metadataKey: "speakd.output"] = "\(output.name)" }
    var sinkOptions = AudioSinkOptions(
        targetLatency: .milliseconds(Int((configuration.audioLatencySeconds * 1000).rounded())))
    sinkOptions.outputName = output.name
    if case .rtp = spec { sinkOptions.rtpStatistics = RTPStatistics() }
    // The role tags PulseAudio streams only (`pulse`, `pulse:SINK`, `auto` when it finds a
    // server), and a tagged stream is closed when idle: the server ducks the other streams
    // for as long as it exists, silent or not. ALSA through the pulse plugin carries no role.
    if let role = configuration.mediaRole {
        sinkOptions.mediaRole = role
        sinkOptions.releaseAfterIdle = .milliseconds(500)
    }
    let format = renderer.format
    let audio = AudioSupervisor(
        spec: spec.description,
        makeSink: makeSink
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
    var speaker = EngineSpeaker(
        renderer: renderer, audio: audio, playback: playback, sound: sound, logger: outputLogger)
    speaker.ducker = ducker
    // A private output fails a private announcement at once while its headphones are out.
    let headset = output.isPrivate ? HeadsetPresence(output: output.name) : nil
    let queue = AnnouncementQueue(
        speaker: headset.map { HeadsetGatedSpeaker(speaker: speaker, presence: $0) } ?? speaker
            as any AnnouncementSpeaker,
        capacity: configuration.maxQueue,
        pauseTimeout: .milliseconds(Int64((configuration.pauseTimeoutSeconds * 1000).rounded())),
        playbackTiming: PlaybackTiming(firstSample: metrics.firstSampleHeard, lastSound: metrics.lastSoundEnded),
        output: output.name, receiverDelay: spec.receiverDelay, shared: shared, logger: outputLogger)
    return OutputParts(
        name: output.name, audio: audio, queue: queue, spec: spec, headset: headset, rtp: sinkOptions.rtpStatistics)
}
