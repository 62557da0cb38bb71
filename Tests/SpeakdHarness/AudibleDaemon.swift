import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeechModel
import Testing

/// The real `speakd` playing to a private PulseAudio null sink whose monitor is recorded, with an
/// event stream followed from before the first announcement; further null sinks, for further
/// outputs (`--output platform=pulse:platform`), are recorded too.
///
/// A test that fails early leaves the processes to their owners' deinitialisers, which end them
/// by PID.
package struct AudibleDaemon {
    package let pulse: PulseAudioServer
    package let recorder: MonitorRecorder
    /// The recorders of the further null sinks, by sink name.
    package let sinkRecorders: [String: MonitorRecorder]
    package let daemon: SpeakdProcess
    package let events: EventStreamRecorder

    /// Starts the audio server, the recorders, the daemon (`--audio pulse`) and the event stream.
    /// - Parameters:
    ///   - audio: the `default` output's sink (`pulse` plays to the server's first null sink).
    ///   - arguments: the daemon's further arguments.
    ///   - extraSinks: further null sinks of the server, each recorded (`sinkRecorders`).
    package static func start(audio: String = "pulse", arguments: [String] = [], extraSinks: [String] = [])
        async throws -> AudibleDaemon
    {
        let pulse = try await PulseAudioServer.start(extraSinks: extraSinks)
        var recorders: [MonitorRecorder] = []
        do {
            recorders.append(try await MonitorRecorder.start(pulse))
            for sink in extraSinks { recorders.append(try await MonitorRecorder.start(pulse, sink: sink)) }
            let daemon = try await SpeakdProcess.start(
                audio: audio, arguments: arguments, environment: pulse.environment)
            let events = EventStreamRecorder(client: daemon.unixClient)
            try await daemon.waitForEventStreams(1)
            return AudibleDaemon(
                pulse: pulse, recorder: recorders[0],
                sinkRecorders: Dictionary(uniqueKeysWithValues: zip(extraSinks, recorders.dropFirst())), daemon: daemon,
                events: events)
        } catch {
            for recorder in recorders { _ = await recorder.stop() }
            await pulse.stop()
            throw error
        }
    }

    package var unix: SpeakHTTPClient { daemon.unixClient }
    package var tcp: SpeakHTTPClient { daemon.tcpClient }

    /// Stops the daemon (SIGTERM), then the recorders and the audio server; returns what was
    /// recorded on the first null sink. The event stream is followed until the daemon closes it,
    /// so the `shutdown` events of whatever was still queued are in `events` too.
    package func stop() async -> Recording {
        await stopRecordingEverySink().first
    }

    /// `stop()`, returning what every null sink recorded: the first's, and the further ones' by
    /// sink name.
    package func stopRecordingEverySink() async -> (first: Recording, sinks: [String: Recording]) {
        if daemon.isRunning {
            let (status, _) = await daemon.stop()
            #expect(status == 0, "speakd exited with \(String(describing: status)); log:\n\(daemon.log)")
        }
        _ = await events.wait(timeout: .seconds(5)) { _ in events.hasEnded }
        events.stop()
        func recording(_ recorder: MonitorRecorder) async -> Recording {
            Recording(samples: await recorder.stop(), sampleRate: recorder.sampleRate, recorder: recorder)
        }
        let first = await recording(recorder)
        var sinks: [String: Recording] = [:]
        for (name, recorder) in sinkRecorders { sinks[name] = await recording(recorder) }
        await pulse.stop()
        return (first, sinks)
    }

    /// Posts and expects 202; returns the accepted id.
    package func accept(_ body: [String: Any], via client: SpeakHTTPClient? = nil) async throws -> String {
        let response = try await post(body, via: client ?? unix)
        #expect(
            response.status == 202,
            "POST answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        return try response.decode(AnnouncementAccepted.self).id
    }

    /// Renders the utterance of `body` with `POST /v1/speech?raw=true` (nothing is played) for
    /// reference measurements: the engine's own speech, without chimes, repeats or loudness. The
    /// keys a raw render refuses (the queue's and the sound's) are left out.
    package func reference(_ body: [String: Any]) async throws -> Rendered {
        let ignored: Set = [
            "queue", "expiresAfter", "requestId", "chime", "chimeAfter", "repeat", "output", "priority",
        ]
        let wav = try await daemon.speech(body.filter { !ignored.contains($0.key) }, raw: true)
        return Rendered(analysis: AudioAnalysis(samples: wav.samples, sampleRate: wav.sampleRate))
    }
}

/// Sends `POST /v1/announcements` with a JSON object body.
package func post(_ body: [String: Any], via client: SpeakHTTPClient, wait: Bool = false) async throws
    -> SpeakHTTPResponse
{
    try await client.send(
        "POST", wait ? "/v1/announcements?wait=true" : "/v1/announcements",
        headers: [("Content-Type", "application/json")],
        body: Array(try JSONSerialization.data(withJSONObject: body)))
}

/// One announcement's JSON body.
package func announcement(
    _ text: String, pitch: Double? = nil, priority: AnnouncementPriority? = nil, queue: Bool? = nil,
    expiresAfter: Double? = nil
) -> [String: Any] {
    var body: [String: Any] = ["text": text]
    if let pitch { body["pitch"] = pitch }
    if let priority { body["priority"] = priority.rawValue }
    if let queue { body["queue"] = queue }
    if let expiresAfter { body["expiresAfter"] = expiresAfter }
    return body
}

/// An utterance as the engine rendered it, without playing it.
package struct Rendered {
    package let analysis: AudioAnalysis

    package init(analysis: AudioAnalysis) {
        self.analysis = analysis
    }

    /// From the first to the last sounding frame, in seconds.
    package var soundingDuration: Double { analysis.soundingDuration(silenceLevel: Recording.silenceLevel) }
    package var medianF0: Double? { analysis.medianF0() }
    /// Silence before the first sounding frame, in seconds.
    package var leadingSilence: Double {
        analysis.soundingSegments(minimumSilence: 0.01, silenceLevel: Recording.silenceLevel, minimumSound: 0).first?
            .start ?? 0
    }
    /// Silence after the last sounding frame, in seconds.
    package var trailingSilence: Double {
        guard
            let last = analysis.soundingSegments(
                minimumSilence: 0.01, silenceLevel: Recording.silenceLevel, minimumSound: 0
            ).last
        else { return analysis.duration }
        return analysis.duration - last.end
    }
}

/// What the null sink played, as recorded from its monitor.
package struct Recording {
    /// RMS of a 10 ms frame below which it counts as silence; espeak's quietest consonants are above it.
    package static let silenceLevel = 0.005

    package let analysis: AudioAnalysis
    package let recorder: MonitorRecorder

    package init(samples: [Int16], sampleRate: Int, recorder: MonitorRecorder) {
        analysis = AudioAnalysis(samples: samples, sampleRate: sampleRate)
        self.recorder = recorder
    }

    /// The announcements heard: sound separated by at least `minimumSilence` seconds.
    package func segments(minimumSilence: Double = 0.15) -> [AudioAnalysis.Segment] {
        analysis.soundingSegments(minimumSilence: minimumSilence, silenceLevel: Self.silenceLevel, minimumSound: 0.05)
    }

    /// Sounding frames only, 10 ms each: total time anything was heard.
    package var totalSoundingTime: Double {
        analysis.soundingSegments(minimumSilence: 0.01, silenceLevel: Self.silenceLevel, minimumSound: 0)
            .reduce(0) { $0 + $1.duration }
    }

    /// Median F0 of a segment.
    package func medianF0(_ segment: AudioAnalysis.Segment) -> Double? {
        analysis.slice(from: segment.start, to: segment.end).medianF0()
    }

    /// When the sound at `seconds` into the recording was played, by this process's clock.
    package func playedAt(_ seconds: Double) -> ContinuousClock.Instant? {
        recorder.playedAt(frame: Int(seconds * Double(analysis.sampleRate)))
    }

    /// The recording's time (seconds from its start) of `instant`.
    package func time(of instant: ContinuousClock.Instant) -> Double? {
        guard let origin = recorder.playedAt(frame: 0) else { return nil }
        let offset = instant - origin
        return Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18
    }
}

/// Checks that every id in `accepted` has exactly one `finished` event and nothing else has any.
package func expectExactlyOneFinished(
    _ accepted: some Collection<String>, in events: [AnnouncementEvent],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    var finishedCount: [String: Int] = [:]
    for event in events where event.type == .finished { finishedCount[event.id, default: 0] += 1 }
    for id in accepted {
        #expect(
            finishedCount[id] == 1, "announcement \(id) has \(finishedCount[id] ?? 0) finished events",
            sourceLocation: sourceLocation)
    }
    let strangers = Set(finishedCount.keys).subtracting(accepted)
    #expect(strangers.isEmpty, "finished events for ids never accepted: \(strangers)", sourceLocation: sourceLocation)
}
