import AudioOutput
import EspeakEngine
import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeechModel

/// Measures the built `speakd` against the acceptance figures, by listening to a private
/// PulseAudio null sink's monitor:
///
/// - request → first sample at the sink (short announcement over the Unix socket),
/// - last sample played → `finished` event received,
/// - cancel sent → silence at the sink,
///
/// and, for comparison, the same engine and sink driven in this process without the daemon.
/// Usage: `speakd-latency-bench [--repetitions N]` (build with `-c release`; `speakd` must sit
/// beside this executable).
@main
struct LatencyBenchmark {
    static let shortText = "Platform four"
    static let longText =
        "Attention please the train now standing at platform nine will be divided at the next station and only the front four coaches continue to the coast"
    /// A sample counts as sound above this absolute value (about −54 dBFS); the sink's silence is exact zeros.
    static let soundThreshold: Int16 = 64

    static func main() async throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        var repetitions = 20
        if let index = arguments.firstIndex(of: "--repetitions") {
            guard index + 1 < arguments.count, let value = Int(arguments[index + 1]), value > 0 else {
                FileHandle.standardError.write(Data("--repetitions: expected a positive whole number\n".utf8))
                exit(2)
            }
            repetitions = value
        }
        let speakdPath = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("speakd").path
        guard FileManager.default.isExecutableFile(atPath: speakdPath) else {
            FileHandle.standardError.write(Data("no speakd beside this executable at \(speakdPath); build it first\n".utf8))
            exit(1)
        }

        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse)
        let daemon = try await SpeakdProcess.start(executable: speakdPath, audio: "pulse", environment: pulse.environment)
        let events = EventStreamRecorder(client: daemon.unixClient)
        try await daemon.waitForEventStreams(1)
        let bench = LatencyBenchmark(recorder: recorder, daemon: daemon, events: events)

        print("speakd latency, \(repetitions) repetitions, PulseAudio null sink recorded from its monitor")
        let reference = try await bench.render(shortText)
        print("'\(shortText)': \(String(format: "%.3f", reference.duration)) s rendered, first sound after \(ms(reference.leading)), last sound \(ms(reference.trailing)) before its end")

        // Warm up the engine, the voice and the sink once.
        _ = try await bench.requestToSound(reference: reference)
        var toFirstSample: [Double] = []
        var toFinished: [Double] = []
        for _ in 0..<repetitions {
            let (first, finished) = try await bench.requestToSound(reference: reference)
            toFirstSample.append(first)
            toFinished.append(finished)
        }
        var toSilence: [Double] = []
        for round in 0..<repetitions {
            toSilence.append(try await bench.cancelToSilence(after: .milliseconds(600 + 37 * (round % 10))))
        }

        events.stop()
        await daemon.stop()

        // The same engine and the same kind of sink, in this process: the floor without HTTP and queue.
        var inProcess: [Double] = []
        do {
            inProcess = try await bench.inProcessToSound(pulse: pulse, reference: reference, repetitions: repetitions)
        } catch {
            print("in-process comparison failed: \(error)")
        }
        _ = await recorder.stop()
        await pulse.stop()

        print("")
        print("figure                                  median      p90      min      max   goal")
        row("request → first sample at the sink", toFirstSample, goal: "≤ 2 ms median")
        row("last sample played → finished event", toFinished, goal: "≤ 20 ms, never < 0")
        row("cancel sent → silence at the sink", toSilence, goal: "≤ 10 ms")
        if !inProcess.isEmpty {
            row("in process: render call → first sample", inProcess, goal: "(engine + sink, no daemon)")
        }
        let early = toFinished.filter { $0 < -0.002 }
        print("")
        print("finished before the last sample was played (beyond 2 ms of clock tolerance): \(early.count) of \(toFinished.count)")
        if !inProcess.isEmpty {
            print("daemon − in-process, request → first sample (medians): \(ms(median(toFirstSample) - median(inProcess)))")
        }
    }

    let recorder: MonitorRecorder
    let daemon: SpeakdProcess
    let events: EventStreamRecorder

    /// Where sound starts and ends in a rendering.
    struct Rendered {
        var duration: Double
        /// Seconds from the first sample to the first sounding one.
        var leading: Double
        /// Seconds from the last sounding sample to the end.
        var trailing: Double
    }

    func render(_ text: String) async throws -> Rendered {
        let response = try await daemon.unixClient.send(
            "POST", "/v1/speech", headers: [("Content-Type", "application/json")],
            body: Array(try JSONSerialization.data(withJSONObject: ["text": text])))
        guard response.status == 200 else { throw SpeakdProcess.Failure(description: "/v1/speech answered \(response.status)") }
        let file = daemon.directory.appendingPathComponent("reference.wav")
        try Data(response.body).write(to: file)
        let wav = try WAVReader(contentsOf: file)
        let first = wav.samples.firstIndex { abs(Int($0)) > Int(Self.soundThreshold) } ?? 0
        let last = wav.samples.lastIndex { abs(Int($0)) > Int(Self.soundThreshold) } ?? 0
        let rate = Double(wav.sampleRate)
        return Rendered(
            duration: Double(wav.samples.count) / rate, leading: Double(first) / rate,
            trailing: Double(wav.samples.count - 1 - last) / rate)
    }

    /// Posts the short announcement; returns (POST sent → its first sample played,
    /// its last sample played → finished event received), in seconds.
    func requestToSound(reference: Rendered) async throws -> (Double, Double) {
        try await waitForSilence()
        let fromFrame = recorder.recordedFrames
        let sent = ContinuousClock.now
        let response = try await daemon.unixClient.send(
            "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
            body: Array(try JSONSerialization.data(withJSONObject: ["text": Self.shortText])))
        guard response.status == 202 else { throw SpeakdProcess.Failure(description: "POST answered \(response.status)") }
        let id = try response.decode(AnnouncementAccepted.self).id
        guard let finished = await events.waitFor(.finished, of: id, timeout: .seconds(10)),
            finished.event.reason == .completed
        else { throw SpeakdProcess.Failure(description: "\(id) did not complete") }
        try await Task.sleep(for: .milliseconds(150))
        let samples = recorder.samplesSoFar()
        guard let first = samples[fromFrame...].firstIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) }),
            let last = samples[fromFrame...].lastIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) }),
            let firstPlayed = recorder.playedAt(frame: first), let lastPlayed = recorder.playedAt(frame: last)
        else { throw SpeakdProcess.Failure(description: "\(id) was not heard") }
        // The rendering's own leading and trailing silence are part of the announcement's audio.
        let firstSample = (firstPlayed - sent).seconds - reference.leading
        let lastSamplePlayed = lastPlayed + .microseconds(Int64(reference.trailing * 1e6))
        return (firstSample, (finished.receivedAt - lastSamplePlayed).seconds)
    }

    /// Starts the long announcement, cancels it after `delay`, returns DELETE sent → last sound played.
    func cancelToSilence(after delay: Duration) async throws -> Double {
        try await waitForSilence()
        let fromFrame = recorder.recordedFrames
        let response = try await daemon.unixClient.send(
            "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
            body: Array(try JSONSerialization.data(withJSONObject: ["text": Self.longText])))
        let id = try response.decode(AnnouncementAccepted.self).id
        _ = await events.waitFor(.started, of: id, timeout: .seconds(10))
        try await Task.sleep(for: delay)
        let sent = ContinuousClock.now
        _ = try await daemon.unixClient.send("DELETE", "/v1/announcements/\(id)")
        guard let finished = await events.waitFor(.finished, of: id, timeout: .seconds(10)), finished.event.reason == .cancelled
        else { throw SpeakdProcess.Failure(description: "\(id) was not cancelled") }
        try await Task.sleep(for: .milliseconds(300))
        let samples = recorder.samplesSoFar()
        guard let last = samples[fromFrame...].lastIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) }),
            let lastPlayed = recorder.playedAt(frame: last)
        else { throw SpeakdProcess.Failure(description: "\(id) was not heard") }
        return (lastPlayed - sent).seconds
    }

    /// The engine and a PulseAudio sink in this process: render call → first sample played.
    func inProcessToSound(pulse: PulseAudioServer, reference: Rendered, repetitions: Int) async throws -> [Double] {
        let engine = try await EspeakEngine(configuration: EspeakEngine.Configuration()) { voices in
            VoiceCatalog(voices: voices, overrides: .builtIn, defaultLanguage: try! LanguageTag("en"), fallback: nil)
        }
        let sink = PulseAudioSink(format: engine.format, server: pulse.serverString)
        try await sink.reopen()
        let playback = AudioPlayback()
        var results: [Double] = []
        for round in 0...repetitions {
            try await waitForSilence()
            let fromFrame = recorder.recordedFrames
            let sent = ContinuousClock.now
            try await playback.play(engine.render(Utterance(Self.shortText)), format: engine.format, on: sink)
            try await Task.sleep(for: .milliseconds(150))
            let samples = recorder.samplesSoFar()
            guard let first = samples[fromFrame...].firstIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) }),
                let firstPlayed = recorder.playedAt(frame: first)
            else { throw SpeakdProcess.Failure(description: "the in-process rendering was not heard") }
            if round > 0 { results.append((firstPlayed - sent).seconds - reference.leading) }
        }
        await sink.close()
        return results
    }

    /// Waits until the last 100 ms recorded are silent, so one measurement does not see the last.
    func waitForSilence() async throws {
        let window = recorder.sampleRate / 10
        for _ in 0..<200 {
            let samples = recorder.samplesSoFar()
            if samples.count > window, !samples.suffix(window).contains(where: { abs(Int($0)) > Int(Self.soundThreshold) }) {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw SpeakdProcess.Failure(description: "the sink never fell silent")
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

func ms(_ seconds: Double) -> String { String(format: "%.1f ms", seconds * 1000) }

func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let index = min(sorted.count - 1, max(0, Int((Double(sorted.count - 1) * p).rounded())))
    return sorted[index]
}

func row(_ name: String, _ values: [Double], goal: String) {
    func cell(_ value: Double) -> String { String(format: "%8.1f", value * 1000) }
    print(
        name.padding(toLength: 38, withPad: " ", startingAt: 0)
            + " \(cell(median(values)))\(cell(percentile(values, 0.9)))\(cell(values.min() ?? .nan))\(cell(values.max() ?? .nan)) ms   \(goal)")
}
