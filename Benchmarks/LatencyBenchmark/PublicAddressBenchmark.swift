import Foundation
import SpeakAPI
import SpeakTestSupport

/// `speakd-latency-bench --public-address [--pairs N]`: whether the public-address stage
/// (loudness gain and limiter, chime lookup) changes request → first sample when no chime plays.
///
/// Two daemons play on one private null sink, one with the stage neutral (`--loudness off`) and
/// one as shipped (loudness −16 LUFS, no chime), and the same short announcement goes to them in
/// turn (A B A B …, so drift and load spread evenly over both). Each announcement is timed twice:
///
/// - by the daemon's own sink estimate: the change of `speakd_first_sample_seconds` in `/metrics`
///   across it, from `queued` to the instant PulseAudio's stream latency says its first sample is
///   played: sub-millisecond, what the listener hears rather than when code wrote;
/// - from the monitor recording, POST sent → first sound on the sink clock, the way the rest of
///   this benchmark measures: at a stream's start the null sink rewinds what it had rendered
///   ahead (up to the stream's buffer, `--audio-latency`), and the recording does not repeat it,
///   so its absolute figure reads early; the same holds for both daemons, so it checks the
///   difference, independently of the daemon's own estimate.
///
/// The difference (shipped − neutral) of the trimmed means and of the medians is printed with a
/// 95% bootstrap interval; the goal is judged on the trimmed means.
struct PublicAddressBenchmark {
    /// The two configurations compared.
    struct Variant {
        var name: String
        var arguments: [String]
    }

    static let neutral = Variant(name: "loudness off, no chime", arguments: ["--loudness", "off"])
    static let shipped = Variant(name: "loudness -16 LUFS, no chime", arguments: [])
    /// Short, so many fit in the run: only its first sample is timed.
    static let text = "Gate four"
    /// The least time from one announcement of a daemon to its next: well past the release of
    /// its idle stream (0.5 s).
    static let idle = Duration.milliseconds(800)
    /// The goal: first sample latency unchanged within this, with no chime.
    static let tolerance = 0.0005

    /// One daemon of the comparison with what it has reported so far.
    final class Subject {
        let variant: Variant
        let daemon: SpeakdProcess
        let events: EventStreamRecorder
        /// `speakd_first_sample_seconds` sum and count at the last reading.
        var totals: (sum: Double, count: Int) = (0, 0)
        /// Queued → first sample at the sink, by the daemon's estimate, per announcement.
        var estimated: [Double] = []
        /// POST sent → first sound at the sink, from the monitor recording.
        var recorded: [Double] = []
        /// When its last announcement finished.
        var lastFinished: ContinuousClock.Instant?
        /// The first announcement after start, apart (a first use of the voice would show here).
        var firstAfterStart: Double?

        init(variant: Variant, daemon: SpeakdProcess, events: EventStreamRecorder) {
            self.variant = variant
            self.daemon = daemon
            self.events = events
        }
    }

    let recorder: MonitorRecorder
    /// The reference rendering's leading silence, measured with the same relative onset as the recording.
    let leading: Double

    static func run(speakdPath: String, pairs: Int, verbose: Bool) async throws {
        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse)
        var subjects: [Subject] = []
        do {
            for variant in [neutral, shipped] {
                let daemon = try await SpeakdProcess.start(
                    executable: speakdPath, audio: "pulse", arguments: variant.arguments + ["--render-cache-mib", "0"],
                    environment: pulse.environment)
                let events = EventStreamRecorder(client: daemon.unixClient)
                try await daemon.waitForEventStreams(1)
                subjects.append(Subject(variant: variant, daemon: daemon, events: events))
            }
            let leading = try await referenceLeading(subjects[0].daemon)
            let bench = PublicAddressBenchmark(recorder: recorder, leading: leading)
            print(
                "public-address stage: '\(text)', \(pairs) pairs, two speakd on one PulseAudio null sink, in turn"
            )
            for subject in subjects {
                subject.totals = try await firstSampleTotals(subject.daemon)
                subject.firstAfterStart = try await bench.measure(subject, keep: false)
            }
            // A B A B …: each daemon idles through the other's announcement, so its stream has
            // always been released (0.5 s after its last announcement) and every announcement
            // opens one afresh. Back to back, an announcement can meet its own stream closing
            // and wait for it (5–10 ms more), which is the release timer, not this stage.
            for _ in 0..<pairs {
                for subject in subjects { _ = try await bench.measure(subject, keep: true) }
            }
        } catch {
            for subject in subjects { _ = await subject.daemon.stop() }
            _ = await recorder.stop()
            await pulse.stop()
            throw error
        }
        for subject in subjects {
            subject.events.stop()
            _ = await subject.daemon.stop()
        }
        _ = await recorder.stop()
        await pulse.stop()
        report(neutral: subjects[0], shipped: subjects[1], verbose: verbose)
    }

    /// Sends the announcement to `subject`, waits for it to be played, and returns queued →
    /// first sample by the daemon's estimate; `keep` adds both timings to the subject's series.
    func measure(_ subject: Subject, keep: Bool) async throws -> Double {
        try await waitForSilence()
        // The other daemon's announcement has ended; the gap after this daemon's own last one
        // (0.25 s) has passed, and its stream was released after 0.5 s idle, as a kiosk's
        // would be between announcements.
        try await Task.sleep(for: .milliseconds(200))
        if let last = subject.lastFinished {
            try await Task.sleep(until: last + Self.idle)
        }
        let fromFrame = recorder.recordedFrames
        let sent = ContinuousClock.now
        let response = try await subject.daemon.unixClient.send(
            "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
            body: Array(try JSONSerialization.data(withJSONObject: ["text": Self.text])))
        guard response.status == 202 else {
            throw SpeakdProcess.Failure(description: "POST answered \(response.status)")
        }
        let id = try response.decode(AnnouncementAccepted.self).id
        guard let finished = await subject.events.waitFor(.finished, of: id, timeout: .seconds(10)),
            finished.event.reason == .completed
        else { throw SpeakdProcess.Failure(description: "\(id) did not complete") }
        subject.lastFinished = finished.receivedAt
        try await Task.sleep(for: .milliseconds(100))
        let totals = try await Self.firstSampleTotals(subject.daemon)
        guard totals.count == subject.totals.count + 1 else {
            throw SpeakdProcess.Failure(
                description:
                    "speakd_first_sample_seconds counted \(totals.count - subject.totals.count) for one announcement"
            )
        }
        let estimated = totals.sum - subject.totals.sum
        subject.totals = totals

        let samples = Array(recorder.samplesSoFar()[fromFrame...])
        guard let onset = Self.onset(samples) else { throw SpeakdProcess.Failure(description: "\(id) was not heard") }
        let frame = fromFrame + onset - Int(leading * Double(recorder.sampleRate))
        guard let played = recorder.playedAt(frame: frame) else {
            throw SpeakdProcess.Failure(description: "frame \(frame) is not in the recording")
        }
        if keep {
            subject.estimated.append(estimated)
            subject.recorded.append((played - sent).seconds)
        }
        return estimated
    }

    /// Where sound starts: the first sample above a quarter of the RMS of the sounding part.
    ///
    /// Relative rather than absolute, so a gain (the loudness stage's) moves the threshold with
    /// the signal and the onset stays the same sample of the speech.
    static func onset(_ samples: [Int16]) -> Int? {
        let floor = Int(LatencyBenchmark.soundThreshold)
        guard let first = samples.firstIndex(where: { abs(Int($0)) > floor }),
            let last = samples.lastIndex(where: { abs(Int($0)) > floor })
        else { return nil }
        let sounding = samples[first...last]
        let rms = (sounding.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(sounding.count)).squareRoot()
        let threshold = max(Double(floor), rms / 4)
        return samples.firstIndex { abs(Double($0)) > threshold }
    }

    /// Seconds from the rendering's start to its onset, as `onset` finds it.
    static func referenceLeading(_ daemon: SpeakdProcess) async throws -> Double {
        let wav = try await daemon.speech(json: try JSONEncoder().encode(["text": text]), raw: true)
        guard let onset = onset(wav.samples) else {
            throw SpeakdProcess.Failure(description: "the reference is silent")
        }
        return Double(onset) / Double(wav.sampleRate)
    }

    /// `speakd_first_sample_seconds_sum` and `_count` from `/metrics`.
    static func firstSampleTotals(_ daemon: SpeakdProcess) async throws -> (sum: Double, count: Int) {
        let response = try await daemon.unixClient.send("GET", "/metrics")
        var sum: Double?
        var count: Int?
        for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2 else { continue }
            if parts[0] == "speakd_first_sample_seconds_sum" { sum = Double(parts[1]) }
            if parts[0] == "speakd_first_sample_seconds_count" { count = Int(parts[1]) }
        }
        guard let sum, let count else {
            throw SpeakdProcess.Failure(description: "/metrics has no speakd_first_sample_seconds sum and count")
        }
        return (sum, count)
    }

    /// Waits until the last 100 ms recorded are silent.
    func waitForSilence() async throws {
        try await recorder.waitForSilence(threshold: Int(LatencyBenchmark.soundThreshold))
    }

    static func report(neutral: Subject, shipped: Subject, verbose: Bool) {
        print("")
        print("                                          neutral (A)   shipped (B)      B − A   95% interval")
        let rows: [(String, [Double], [Double], ([Double]) -> Double)] = [
            ("queued → first sample, sink, trimmed mean", neutral.estimated, shipped.estimated, trimmedMean),
            ("queued → first sample, sink, median", neutral.estimated, shipped.estimated, median),
            ("request → first sound, monitor, median", neutral.recorded, shipped.recorded, median),
        ]
        for (name, a, b, statistic) in rows {
            let (low, high) = bootstrapInterval(a, b, statistic)
            print(
                name.padding(toLength: 42, withPad: " ", startingAt: 0)
                    + String(
                        format: "%8.2f ms   %8.2f ms  %+7.2f ms  [%+.2f, %+.2f] ms", statistic(a) * 1000,
                        statistic(b) * 1000, (statistic(b) - statistic(a)) * 1000, low * 1000, high * 1000))
        }
        print(
            String(
                format: "spread (median absolute deviation) of the sink estimate: A %.2f ms, B %.2f ms",
                deviation(neutral.estimated) * 1000, deviation(shipped.estimated) * 1000))
        print(
            String(
                format: "first announcement after start, sink estimate: A %.2f ms, B %.2f ms",
                (neutral.firstAfterStart ?? .nan) * 1000, (shipped.firstAfterStart ?? .nan) * 1000))
        if verbose {
            for subject in [neutral, shipped] {
                print(
                    "\(subject.variant.name), sink estimate in run order (ms): "
                        + subject.estimated.map { String(format: "%.2f", $0 * 1000) }.joined(separator: " "))
            }
        }
        let (low, high) = bootstrapInterval(neutral.estimated, shipped.estimated, trimmedMean)
        let met = low >= -tolerance && high <= tolerance
        print("")
        print(
            "goal: unchanged within ±0.5 ms with no chime: "
                + (met ? "met" : "NOT met")
                + String(format: " (trimmed means, [%+.2f, %+.2f] ms)", low * 1000, high * 1000))
        print("A: \(neutral.variant.name); B: \(shipped.variant.name). Trimmed mean: the mean of the middle 80%.")
        print(
            "Intervals: 95% bootstrap of the difference, resampling the A-B pairs (2,000 times). The sink estimate is")
        print("PulseAudio's stream latency as the daemon reads it when writing the first sample, from queued; the")
        print("monitor's absolute figure reads early by the null sink's rewind at a stream's start (up to its buffer),")
        print("alike for both, so its difference is an independent check.")
    }

    /// A 95% interval of statistic(b) − statistic(a), resampling the pairs (a[i], b[i]) with
    /// replacement: each pair was measured back to back, so the machine's drift over the run
    /// (a millisecond here) stays within pairs instead of widening the interval.
    static func bootstrapInterval(
        _ a: [Double], _ b: [Double], _ statistic: ([Double]) -> Double, rounds: Int = 2000
    ) -> (Double, Double) {
        let count = min(a.count, b.count)
        guard count > 0 else { return (.nan, .nan) }
        var generator = SplitMix64(seed: 0x5EED)
        var differences: [Double] = []
        differences.reserveCapacity(rounds)
        for _ in 0..<rounds {
            let picks = (0..<count).map { _ in Int.random(in: 0..<count, using: &generator) }
            differences.append(statistic(picks.map { b[$0] }) - statistic(picks.map { a[$0] }))
        }
        return (percentile(differences, 0.025), percentile(differences, 0.975))
    }

    /// The mean of the middle 80%: as efficient as the mean on this near-normal spread, and a
    /// stray announcement held up by other work on the machine does not move it.
    static func trimmedMean(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let cut = sorted.count / 10
        let middle = sorted[cut..<(sorted.count - cut)]
        return middle.isEmpty ? .nan : middle.reduce(0, +) / Double(middle.count)
    }

    static func deviation(_ values: [Double]) -> Double {
        let center = median(values)
        return median(values.map { abs($0 - center) })
    }
}
