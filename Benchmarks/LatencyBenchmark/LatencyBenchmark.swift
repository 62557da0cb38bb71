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
/// - last audible sample played → `finished` event received (and, as before, from where the
///   rendering's own trailing silence would have ended),
/// - cancel sent → silence at the sink, and the same for a pause,
///
/// and, for comparison, the same engine and sink driven in this process without the daemon.
/// Usage: `speakd-latency-bench [--repetitions N] [--idle-gap MS] [--verbose]` (build with
/// `scripts/build-release`; `speakd` must sit beside this executable). `--idle-gap` is how long the
/// sink is silent before each measured announcement (default 300 ms); past the daemon's and its
/// workers' idle release (a minute, `IdleRelease`), each announcement first maps its code again. `speakd-latency-bench --public-address [--pairs N]` compares request → first
/// sample with the public-address stage neutral and as shipped instead (`PublicAddressBenchmark`);
/// `speakd-latency-bench --ssip [--runs N]` times `spd-say -w` through speakd's SSIP front against
/// speech-dispatcher on the same sink (`SSIPBenchmark`); `speakd-latency-bench --piper [--runs N]
/// [--seconds S] [--piper-workers N] [--piper-threads N] [--venv PATH]` compares speakd's Piper engine with
/// `piper.http_server` (`PiperBenchmark`); `speakd-latency-bench --schedules [--slots N]` times scheduled
/// slots → first audible sample, and `speakd-latency-bench --audit [--pairs N]` last audible sample →
/// `finished` without and with the audit log (`ScheduleBenchmark`); `speakd-latency-bench --cache [--texts N]
/// [--venv PATH]` times request → first audible sample of texts said uncached and again from the render cache,
/// with espeak-ng and Piper (`CacheBenchmark`); `speakd-latency-bench --disk-load [--runs N] [--seconds N]
/// [--clients N] [--posts N]` compares, in alternating runs, post latency and 50-client throughput without and with `--state-dir` while `dd
/// oflag=sync` loops load the disk (`DiskLoadBenchmark`).
@main
struct LatencyBenchmark {
    static let shortText = "Platform four"
    static let longText =
        "Attention please the train now standing at platform nine will be divided at the next station and only the front four coaches continue to the coast"
    /// A sample counts as sound above this absolute value (about −54 dBFS); the sink's silence is exact zeros.
    static let soundThreshold: Int16 = 64

    /// The whole number after `flag` in `arguments`, at least `minimum` (1 unless given),
    /// `fallback` without the flag; exits with status 2 and says so when the value is missing or
    /// not such a number.
    static func positiveCount(_ flag: String, in arguments: [String], default fallback: Int, minimum: Int = 1) -> Int {
        guard let index = arguments.firstIndex(of: flag) else { return fallback }
        guard index + 1 < arguments.count, let value = Int(arguments[index + 1]), value >= minimum else {
            let expected = minimum == 1 ? "a positive whole number" : "a whole number of at least \(minimum)"
            exitSaying("\(flag): expected \(expected)", status: 2)
        }
        return value
    }

    /// The Piper venv's absolute path: after `--venv`, else `.build-piper` in the current
    /// directory; exits with status 2 and says so when the value is missing.
    static func piperVenv(in arguments: [String]) -> String {
        var venv = ".build-piper"
        if let index = arguments.firstIndex(of: "--venv") {
            guard index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") else {
                exitSaying("--venv: expected the Piper venv's directory", status: 2)
            }
            venv = arguments[index + 1]
        }
        return URL(fileURLWithPath: venv).path
    }

    static func main() async throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let repetitions = positiveCount("--repetitions", in: arguments, default: 20)
        let speakdPath = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("speakd").path
        guard FileManager.default.isExecutableFile(atPath: speakdPath) else {
            exitSaying("no speakd beside this executable at \(speakdPath); build it first")
        }
        if arguments.contains("--ssip") {
            try await SSIPBenchmark.run(
                speakdPath: speakdPath, runs: positiveCount("--runs", in: arguments, default: 9))
            return
        }
        if arguments.contains("--cache") {
            try await CacheBenchmark.run(
                speakdPath: speakdPath, texts: positiveCount("--texts", in: arguments, default: 10),
                venv: piperVenv(in: arguments))
            return
        }
        if arguments.contains("--piper") {
            let venv = piperVenv(in: arguments)
            try await PiperBenchmark.run(
                speakdPath: speakdPath,
                options: PiperBenchmark.Options(
                    runs: positiveCount("--runs", in: arguments, default: 15),
                    seconds: positiveCount("--seconds", in: arguments, default: 10),
                    workers: positiveCount("--piper-workers", in: arguments, default: 0, minimum: 0),
                    threads: positiveCount("--piper-threads", in: arguments, default: 0, minimum: 0),
                    venv: venv))
            return
        }
        if arguments.contains("--schedules") {
            try await ScheduleBenchmark.schedules(
                speakdPath: speakdPath, slots: positiveCount("--slots", in: arguments, default: 12))
            return
        }
        if arguments.contains("--audit") {
            try await ScheduleBenchmark.audit(
                speakdPath: speakdPath, pairs: positiveCount("--pairs", in: arguments, default: 20))
            return
        }
        if arguments.contains("--disk-load") {
            try await DiskLoadBenchmark.run(
                speakdPath: speakdPath, runs: positiveCount("--runs", in: arguments, default: 5),
                seconds: positiveCount("--seconds", in: arguments, default: 20),
                clients: positiveCount("--clients", in: arguments, default: 50),
                posts: positiveCount("--posts", in: arguments, default: 200))
            return
        }
        if arguments.contains("--public-address") {
            let pairs = positiveCount("--pairs", in: arguments, default: 40)
            try await PublicAddressBenchmark.run(
                speakdPath: speakdPath, pairs: pairs, verbose: arguments.contains("--verbose"))
            return
        }

        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse)
        // The render cache off: every announcement is rendered, as the figures compare engines.
        let daemon = try await SpeakdProcess.start(
            executable: speakdPath, audio: "pulse", arguments: ["--render-cache-mib", "0"],
            environment: pulse.environment)
        let events = EventStreamRecorder(client: daemon.unixClient)
        try await daemon.waitForEventStreams(1)
        let bench = LatencyBenchmark(
            recorder: recorder, daemon: daemon, events: events, verbose: arguments.contains("--verbose"),
            idleGap: .milliseconds(positiveCount("--idle-gap", in: arguments, default: 300)))

        print("speakd latency, \(repetitions) repetitions, PulseAudio null sink recorded from its monitor")
        let reference = try await bench.render(shortText)
        print(
            "'\(shortText)': \(String(format: "%.3f", reference.duration)) s rendered, first sound after \(ms(reference.leading)), last sound \(ms(reference.trailing)) before its end"
        )

        // Warm up the engine, the voice and the sink once.
        _ = try await bench.requestToSound(reference: reference)
        var toFirstSample: [Bounds] = []
        var toFinished: [Bounds] = []
        var audibleToFinished: [Bounds] = []
        for _ in 0..<repetitions {
            let measured = try await bench.requestToSound(reference: reference)
            toFirstSample.append(measured.firstSample)
            toFinished.append(measured.renderingEndToFinished)
            audibleToFinished.append(measured.lastAudibleToFinished)
        }
        var toSilence: [Bounds] = []
        for round in 0..<repetitions {
            toSilence.append(try await bench.cancelToSilence(after: .milliseconds(600 + 37 * (round % 10))))
        }
        var pauseToSilence: [Bounds] = []
        for round in 0..<repetitions {
            pauseToSilence.append(try await bench.pauseToSilence(after: .milliseconds(600 + 37 * (round % 10))))
        }
        var toWordEvent: [Bounds] = []
        for _ in 0..<max(1, repetitions / 3) {
            toWordEvent += try await bench.wordOnsetToEvent()
        }

        events.stop()
        await daemon.stop()

        // The same stops with a sink that buffers more ahead (`--audio-latency 0.05`, the earlier default).
        let longerDaemon = try await SpeakdProcess.start(
            executable: speakdPath, audio: "pulse", arguments: ["--audio-latency", "0.05", "--render-cache-mib", "0"],
            environment: pulse.environment)
        let longerEvents = EventStreamRecorder(client: longerDaemon.unixClient)
        try await longerDaemon.waitForEventStreams(1)
        let longer = LatencyBenchmark(
            recorder: recorder, daemon: longerDaemon, events: longerEvents, verbose: bench.verbose)
        var longerCancel: [Bounds] = []
        var longerPause: [Bounds] = []
        for round in 0..<repetitions {
            longerCancel.append(try await longer.cancelToSilence(after: .milliseconds(600 + 37 * (round % 10))))
            longerPause.append(try await longer.pauseToSilence(after: .milliseconds(600 + 37 * (round % 10))))
        }
        longerEvents.stop()
        await longerDaemon.stop()

        // The same engine and the same kind of sink, in this process: the floor without HTTP and queue.
        var inProcess: [Bounds] = []
        do {
            inProcess = try await bench.inProcessToSound(pulse: pulse, reference: reference, repetitions: repetitions)
        } catch {
            print("in-process comparison failed: \(error)")
        }
        _ = await recorder.stop()
        await pulse.stop()

        print("")
        print("Each figure twice: 'sink' times frames by the sink clock rebuilt from the recording (early by up to")
        print("the null sink's render-ahead), 'arrive' by when their block reached the recorder (late by parec's")
        print("delivery); the truth lies between.")
        print("")
        print("figure                                   timing   median      p90      min      max   goal")
        row("request → first sample at the sink", toFirstSample, goal: "≤ 2 ms median")
        row("last audible sample → finished event", audibleToFinished, goal: "≤ 20 ms, never < 0")
        row("rendering's end → finished event", toFinished, goal: "was 'last sample'")
        row("cancel sent → silence at the sink", toSilence, goal: "≤ 5 ms")
        row("pause sent → silence at the sink", pauseToSilence, goal: "≤ 5 ms")
        row("  with --audio-latency 0.05: cancel", longerCancel, goal: "was the default")
        row("  pause", longerPause, goal: "was the default")
        row("word's first sample → word event", toWordEvent, goal: "≤ 20 ms, never < 0")
        if !inProcess.isEmpty {
            row("in process: render call → first sample", inProcess, goal: "engine + sink, no daemon")
        }
        print("")
        print(
            "Below zero is not a real latency: at a stream's start the null sink rewinds what it had rendered ahead and"
        )
        print("the monitor does not repeat it, so part of the leading silence never reaches the recording; request →")
        print("first sample cannot be resolved below about 10 ms this way, against a goal of 2 ms.")
        print("")
        print("'rendering's end' is where the announcement's audio ended when the engine's trailing silence")
        print(
            "(\(ms(reference.trailing)) here) was played as part of it; it no longer is, so this figure is now below zero."
        )
        let early = audibleToFinished.filter { $0.sinkClock < 0 }
        print("")
        print(
            "finished received before the last audible sample was played (by the sink clock): \(early.count) of \(audibleToFinished.count)"
        )
        if !inProcess.isEmpty {
            // The sink's start-of-stream artefacts are the same on both paths, so the difference is
            // what the daemon (HTTP, queue, event) adds to the raw engine and sink.
            print(
                "request → first sample, daemon − in-process engine + sink (medians): "
                    + ms(median(toFirstSample.map(\.sinkClock)) - median(inProcess.map(\.sinkClock)))
                    + " by sink clock, "
                    + ms(median(toFirstSample.map(\.arrival)) - median(inProcess.map(\.arrival))) + " by arrival")
        }
    }

    let recorder: MonitorRecorder
    let daemon: SpeakdProcess
    let events: EventStreamRecorder
    /// Print each measurement's raw frames.
    let verbose: Bool
    /// How long the sink is silent before each announcement `record` measures.
    var idleGap: Duration = .milliseconds(300)

    /// Where sound starts and ends in a rendering.
    struct Rendered {
        var duration: Double
        /// Seconds from the first sample to the first sounding one.
        var leading: Double
        /// Seconds from the last sounding sample to the end.
        var trailing: Double
    }

    func render(_ text: String) async throws -> Rendered {
        let wav = try await daemon.speech(json: try JSONEncoder().encode(["text": text]), raw: true)
        let first = wav.samples.firstIndex { abs(Int($0)) > Int(Self.soundThreshold) } ?? 0
        let last = wav.samples.lastIndex { abs(Int($0)) > Int(Self.soundThreshold) } ?? 0
        let rate = Double(wav.sampleRate)
        return Rendered(
            duration: Double(wav.samples.count) / rate, leading: Double(first) / rate,
            trailing: Double(wav.samples.count - 1 - last) / rate)
    }

    /// A time measured against the recording, as two bounds.
    ///
    /// The null sink renders ahead of its clock (up to its latency) and the monitor passes each
    /// block on when it is rendered, so `MonitorRecorder.playedAt(frame:)`, which takes every
    /// arrival as "due no later than now", places frames early by up to that render-ahead; the
    /// moment the block holding a frame reached the recorder is late by parec's delivery delay
    /// (up to its 20 ms fragment). The truth lies between the two.
    ///
    /// At the start of a stream the sink rewinds what it had rendered ahead to mix the new stream
    /// in sooner, and the monitor does not repeat what it had already passed on: part of the
    /// announcement's leading silence never reaches the recording, so "request → first sample"
    /// can come out below zero. It cannot be resolved below about 10 ms this way; the comparison
    /// with the engine and sink driven in process cancels these artefacts.
    struct Bounds {
        /// With the frame's time from the sink clock that `playedAt(frame:)` rebuilds (early).
        var sinkClock: Double
        /// With the frame's time from when its block reached the recorder (late).
        var arrival: Double
    }

    /// When the block holding `frame` reached the recorder.
    func arrivedAt(frame: Int) -> ContinuousClock.Instant? {
        recorder.arrivalLog.first { $0.1 > frame }?.0
    }

    func bounds(frame: Int, from start: ContinuousClock.Instant, reversed: Bool = false) throws -> Bounds {
        guard let early = recorder.playedAt(frame: frame), let late = arrivedAt(frame: frame) else {
            throw SpeakdProcess.Failure(description: "frame \(frame) is not in the recording")
        }
        return reversed
            ? Bounds(sinkClock: (start - early).seconds, arrival: (start - late).seconds)
            : Bounds(sinkClock: (early - start).seconds, arrival: (late - start).seconds)
    }

    /// What one announcement measures.
    struct Measured {
        /// POST sent → its first sample played.
        var firstSample: Bounds
        /// Its last audible sample played → finished event received.
        var lastAudibleToFinished: Bounds
        /// Where its rendering ends (the engine's trailing silence after the last audible
        /// sample) → finished event received: the figure printed before that silence was left out.
        var renderingEndToFinished: Bounds
    }

    /// One announcement as the recording heard it.
    struct Recorded {
        /// When the POST was sent.
        var sent: ContinuousClock.Instant
        /// Its first and last frames above `soundThreshold` in the recording.
        var first: Int
        var last: Int
        /// When its `finished` event arrived.
        var finishedAt: ContinuousClock.Instant
    }

    /// Posts `body` as an announcement and expects 202; returns its id.
    static func post(_ body: [String: String], to daemon: SpeakdProcess) async throws -> String {
        let response = try await daemon.unixClient.send(
            "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
            body: Array(try JSONSerialization.data(withJSONObject: body)))
        guard response.status == 202 else {
            throw SpeakdProcess.Failure(
                description: "POST answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return try response.decode(AnnouncementAccepted.self).id
    }

    /// Once the sink has been silent and idle, posts `body`, waits for it to complete, and finds
    /// its first and last audible frames in the recording.
    func record(_ body: [String: String], timeout: Duration = .seconds(10)) async throws -> Recorded {
        try await waitForSilence()
        // Idle: the gap after the previous announcement (default 0.25 s) has passed.
        try await Task.sleep(for: idleGap)
        let fromFrame = recorder.recordedFrames
        let sent = ContinuousClock.now
        let id = try await Self.post(body, to: daemon)
        guard let finished = await events.waitFor(.finished, of: id, timeout: timeout),
            finished.event.reason == .completed
        else { throw SpeakdProcess.Failure(description: "\(id) did not complete") }
        // Let the recorder catch up past the last sample (parec delivers in 20 ms blocks).
        try await Task.sleep(for: .milliseconds(150))
        let samples = recorder.samplesSoFar()
        guard let first = samples[fromFrame...].firstIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) }),
            let last = samples[fromFrame...].lastIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) })
        else { throw SpeakdProcess.Failure(description: "\(id) was not heard") }
        return Recorded(sent: sent, first: first, last: last, finishedAt: finished.receivedAt)
    }

    /// Posts the short announcement and measures it.
    func requestToSound(reference: Rendered) async throws -> Measured {
        let heard = try await record(["text": Self.shortText])
        if verbose {
            let log = recorder.arrivalLog
            if let a = log.first, let b = log.last {
                let excess = Double(b.1 - a.1) / Double(recorder.sampleRate) - (b.0 - a.0).seconds
                let sentArrival = log.last { $0.0 <= heard.sent }
                // Frames beyond elapsed time would mean the recording repeats what a rewind re-rendered.
                print(
                    "frames recorded beyond elapsed time: \(ms(excess)); first sound frame \(heard.first), frames at POST \(sentArrival?.1 ?? -1), leading \(Int(reference.leading * Double(recorder.sampleRate)))"
                )
            }
        }
        // The rendering's own leading silence is part of the announcement's audio; its trailing
        // silence was too, until it was left out, which the old figure still counts from.
        let rate = Double(recorder.sampleRate)
        let firstSample = heard.first - Int(reference.leading * rate)
        let lastAudible = try bounds(frame: heard.last, from: heard.finishedAt, reversed: true)
        // Those frames are no longer played, so the rendering's end is timed from the last
        // audible sample: it is the rendering's trailing silence later.
        return Measured(
            firstSample: try bounds(frame: firstSample, from: heard.sent),
            lastAudibleToFinished: lastAudible,
            renderingEndToFinished: Bounds(
                sinkClock: lastAudible.sinkClock - reference.trailing,
                arrival: lastAudible.arrival - reference.trailing))
    }

    /// Once the sink is silent, posts the long announcement and lets it speak for `delay`.
    /// - Returns: its id, and the recorded frame it started after.
    func startLongAnnouncement(speakingFor delay: Duration) async throws -> (id: String, fromFrame: Int) {
        try await waitForSilence()
        let fromFrame = recorder.recordedFrames
        let response = try await daemon.unixClient.send(
            "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
            body: Array(try JSONSerialization.data(withJSONObject: ["text": Self.longText])))
        let id = try response.decode(AnnouncementAccepted.self).id
        _ = await events.waitFor(.started, of: id, timeout: .seconds(10))
        try await Task.sleep(for: delay)
        return (id, fromFrame)
    }

    /// Starts the long announcement, cancels it after `delay`, returns DELETE sent → last sound played.
    func cancelToSilence(after delay: Duration) async throws -> Bounds {
        let (id, fromFrame) = try await startLongAnnouncement(speakingFor: delay)
        let sent = ContinuousClock.now
        _ = try await daemon.unixClient.send("DELETE", "/v1/announcements/\(id)")
        guard let finished = await events.waitFor(.finished, of: id, timeout: .seconds(10)),
            finished.event.reason == .cancelled
        else { throw SpeakdProcess.Failure(description: "\(id) was not cancelled") }
        try await Task.sleep(for: .milliseconds(300))
        let samples = recorder.samplesSoFar()
        guard let last = samples[fromFrame...].lastIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) }) else {
            throw SpeakdProcess.Failure(description: "\(id) was not heard")
        }
        return try bounds(frame: last, from: sent)
    }

    /// Starts the long announcement, pauses it after `delay`, returns POST pause sent → last sound
    /// played; then cancels it.
    func pauseToSilence(after delay: Duration) async throws -> Bounds {
        let (id, fromFrame) = try await startLongAnnouncement(speakingFor: delay)
        let sent = ContinuousClock.now
        let paused = try await daemon.unixClient.send("POST", "/v1/announcements/\(id)/pause")
        guard paused.status == 200 else {
            throw SpeakdProcess.Failure(
                description: "\(id) was not paused: \(paused.status) \(String(decoding: paused.body, as: UTF8.self))")
        }
        try await Task.sleep(for: .milliseconds(300))
        let samples = recorder.samplesSoFar()
        _ = try await daemon.unixClient.send("DELETE", "/v1/announcements/\(id)")
        _ = await events.waitFor(.finished, of: id, timeout: .seconds(10))
        guard let last = samples[fromFrame...].lastIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) }) else {
            throw SpeakdProcess.Failure(description: "\(id) was not heard")
        }
        return try bounds(frame: last, from: sent)
    }

    /// Speaks three words apart, each starting with a sound, and returns each word's first
    /// sample played → its `word` event received.
    func wordOnsetToEvent() async throws -> [Bounds] {
        try await waitForSilence()
        try await Task.sleep(for: .milliseconds(300))
        let fromFrame = recorder.recordedFrames
        let ssml = "<speak>Amsterdam<break time=\"600ms\"/>Madrid<break time=\"600ms\"/>Lisbon</speak>"
        let response = try await daemon.unixClient.send(
            "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
            body: Array(try JSONSerialization.data(withJSONObject: ["ssml": ssml])))
        let id = try response.decode(AnnouncementAccepted.self).id
        guard await events.waitFor(.finished, of: id, timeout: .seconds(10)) != nil else {
            throw SpeakdProcess.Failure(description: "\(id) did not finish")
        }
        try await Task.sleep(for: .milliseconds(150))
        let words = events.received.filter { $0.event.id == id && $0.event.type == .word }
        let onsets = recorder.onsets(from: fromFrame, threshold: Int(Self.soundThreshold))
        guard words.count == 3, onsets.count == 3 else {
            throw SpeakdProcess.Failure(description: "\(words.count) word events, \(onsets.count) onsets")
        }
        return try zip(onsets, words).map { onset, word in
            try bounds(frame: onset, from: word.receivedAt, reversed: true)
        }
    }

    /// The engine and a PulseAudio sink in this process: render call → first sample played.
    func inProcessToSound(pulse: PulseAudioServer, reference: Rendered, repetitions: Int) async throws -> [Bounds] {
        let engine = try await EspeakEngine(configuration: EspeakEngine.Configuration()) { voices in
            VoiceCatalog(voices: voices, overrides: .builtIn, defaultLanguage: try! LanguageTag("en"), fallback: nil)
        }
        let sink = PulseAudioSink(
            format: engine.format, server: pulse.serverString,
            options: AudioSinkOptions(targetLatency: .milliseconds(20)))
        try await sink.reopen()
        let playback = AudioPlayback()
        var results: [Bounds] = []
        for round in 0...repetitions {
            try await waitForSilence()
            let fromFrame = recorder.recordedFrames
            let sent = ContinuousClock.now
            try await playback.play(engine.render(Utterance(Self.shortText)), format: engine.format, on: sink)
            try await Task.sleep(for: .milliseconds(150))
            let samples = recorder.samplesSoFar()
            guard let first = samples[fromFrame...].firstIndex(where: { abs(Int($0)) > Int(Self.soundThreshold) })
            else {
                throw SpeakdProcess.Failure(description: "the in-process rendering was not heard")
            }
            let measured = try bounds(frame: first - Int(reference.leading * Double(recorder.sampleRate)), from: sent)
            if round > 0 { results.append(measured) }
        }
        await sink.close()
        return results
    }

    /// Waits until the last 100 ms recorded are silent, so one measurement does not see the last.
    func waitForSilence() async throws {
        try await recorder.waitForSilence(threshold: Int(Self.soundThreshold))
    }
}

/// Says `message` on standard error and exits with `status`.
func exitSaying(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(status)
}

/// A new directory under /tmp for one run's sockets and logs, named `prefix-` and 8 random characters.
func scratchDirectory(_ prefix: String) throws -> URL {
    let directory = URL(fileURLWithPath: "/tmp/\(prefix)-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

func ms(_ seconds: Double) -> String { String(format: "%.1f ms", seconds * 1000) }

func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let index = min(sorted.count - 1, max(0, Int((Double(sorted.count - 1) * p).rounded())))
    return sorted[index]
}

func row(_ name: String, _ values: [LatencyBenchmark.Bounds], goal: String) {
    func cell(_ value: Double) -> String { String(format: "%8.1f", value * 1000) }
    for (bound, series) in [("sink", values.map(\.sinkClock)), ("arrive", values.map(\.arrival))] {
        print(
            (bound == "sink" ? name : "").padding(toLength: 41, withPad: " ", startingAt: 0)
                + bound.padding(toLength: 6, withPad: " ", startingAt: 0)
                + "\(cell(median(series)))\(cell(percentile(series, 0.9)))\(cell(series.min() ?? .nan))\(cell(series.max() ?? .nan)) ms"
                + (bound == "sink" ? "   \(goal)" : ""))
    }
}
