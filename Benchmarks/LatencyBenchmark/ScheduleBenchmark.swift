import Foundation
import SpeakAPI
import SpeakTestSupport

/// The state directory's two timing figures, heard at a private PulseAudio null sink's monitor.
///
/// `speakd-latency-bench --schedules [--slots N]`: one daemon with `--state-dir` speaks "Gate four"
/// on a rule of N slots 3 s apart (`FREQ=SECONDLY;INTERVAL=3;COUNT=N` in UTC, from a whole second
/// at least 3 s ahead), so every slot finds the output free and its stream released. Each slot is
/// timed to the announcement's first audible sample twice:
///
/// - from the recording: the first sound after the slot, on the sink clock that
///   `MonitorRecorder.playedAt(frame:)` rebuilds (early: at a stream's start the null sink rewinds
///   what it rendered ahead and the recording does not repeat it) and by when its block reached
///   the recorder (late by parec's delivery), both placed on the wall clock through one
///   (`Date`, `ContinuousClock.now`) reading taken before the schedule is made;
/// - by the daemon: the `queued` event's timestamp − the slot, plus the change of
///   `speakd_first_sample_seconds` across the announcement (queued → its first sample, by
///   PulseAudio's stream latency), plus the rendering's own silence before its first audible
///   sample (that metric times the first sample, audible or not).
///
/// Goal (DESIGN): slot → first audible sample ≤ 50 ms when the output is free, on every slot.
///
/// `speakd-latency-bench --audit [--pairs N]`: two daemons on one null sink, A without state and
/// B with `--state-dir` (B's every `finished` waits until its audit row is on disk, SQLite with
/// `synchronous = FULL`), speak the same short announcement in turn (A B A B …), each after an
/// idle gap. Each is timed from its last audible sample to its `finished` event's arrival, on the
/// sink clock (which reads late for this figure) and by the recorder's arrival (which reads
/// early). Goal: ≤ 20 ms with the log; the log's cost is B − A, with a 95% bootstrap interval
/// over the pairs.
///
/// Each mode ends with one JSON line holding its figures in milliseconds.
struct ScheduleBenchmark {
    static let text = PublicAddressBenchmark.text
    /// Seconds between slots: the announcement (about 0.7 s) is over, and its stream released
    /// (0.5 s idle), well before the next slot.
    static let interval = 3
    /// Slot → first audible sample.
    static let slotGoal = 0.050
    /// Last audible sample → `finished`, with the audit log.
    static let finishedGoal = 0.020

    // MARK: Schedules

    /// One slot as heard.
    struct Slot {
        /// The slot, from its `fired` event.
        var slot: Date
        /// The announcement's first audible frame in the recording.
        var firstFrame: Int
        /// `queued`'s timestamp − the slot (the timestamp has millisecond resolution).
        var queuedAfterSlot: Double
        /// Queued → first sample at the sink, by the daemon's estimate.
        var queuedToFirstSample: Double
    }

    static func schedules(speakdPath: String, slots count: Int) async throws {
        let state = try scratchDirectory("speakd-schedule-bench")
        defer { try? FileManager.default.removeItem(at: state) }
        let loadBefore = loadAverage()
        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse)
        var started: SpeakdProcess?
        let heard: [Slot]
        let recorded: [LatencyBenchmark.Bounds]
        let leading: Double
        let clockDrift: Double
        let rule = "FREQ=SECONDLY;INTERVAL=\(interval);COUNT=\(count)"
        do {
            let daemon = try await SpeakdProcess.start(
                executable: speakdPath, audio: "pulse",
                arguments: ["--state-dir", state.path, "--render-cache-mib", "0"],
                environment: pulse.environment)
            started = daemon
            let events = EventStreamRecorder(client: daemon.unixClient)
            defer { events.stop() }
            try await daemon.waitForEventStreams(1)
            let bench = LatencyBenchmark(recorder: recorder, daemon: daemon, events: events, verbose: false)
            leading = try await audibleLeading(daemon)
            // Warm the engine, the voice and the sink once, as a daemon that has been running would be.
            _ = try await bench.record(["text": text])
            var totals = try await PublicAddressBenchmark.firstSampleTotals(daemon)

            let wallOrigin = Date()
            let origin = ContinuousClock.now
            let first = Date(timeIntervalSince1970: (wallOrigin.timeIntervalSince1970 + 3).rounded(.up))
            let created = try await daemon.unixClient.send(
                "POST", "/v1/schedules", headers: [("Content-Type", "application/json")],
                body: Array(
                    try JSONSerialization.data(withJSONObject: [
                        "announcement": ["text": text], "rrule": rule, "start": rfc3339(first), "timeZone": "UTC",
                    ])))
            guard created.status == 201,
                let resource = try JSONSerialization.jsonObject(with: Data(created.body)) as? [String: Any],
                let schedule = resource["id"] as? String
            else {
                throw SpeakdProcess.Failure(
                    description:
                        "POST /v1/schedules answered \(created.status): \(String(decoding: created.body, as: UTF8.self))"
                )
            }
            print(
                "scheduled '\(text)': \(rule) from \(rfc3339(first)), one speakd with --state-dir on a PulseAudio null sink"
            )

            var slots: [Slot] = []
            for index in 0..<count {
                let due = first.addingTimeInterval(Double(index * interval))
                let changes = { slotChanges(events, schedule: schedule) }
                let wait = max(0, due.timeIntervalSinceNow) + 5
                guard await events.wait(timeout: .seconds(wait), until: { _ in changes().count > index }) else {
                    throw SpeakdProcess.Failure(description: "slot \(rfc3339(due)) did not come")
                }
                let change = changes()[index]
                guard change.change == .fired, let announcement = change.announcement,
                    let slot = change.slot.flatMap(parseTimestamp)
                else {
                    throw SpeakdProcess.Failure(description: "slot \(index + 1) was not spoken: \(change)")
                }
                guard let finished = await events.waitFor(.finished, of: announcement, timeout: .seconds(10)),
                    finished.event.reason == .completed, let queued = events.first(.queued, of: announcement)
                else { throw SpeakdProcess.Failure(description: "\(announcement) did not complete") }
                // Let the recorder catch up past the last sample (parec delivers in 20 ms blocks).
                try await Task.sleep(for: .milliseconds(150))
                let now = try await PublicAddressBenchmark.firstSampleTotals(daemon)
                guard now.count == totals.count + 1 else {
                    throw SpeakdProcess.Failure(
                        description:
                            "speakd_first_sample_seconds counted \(now.count - totals.count) for slot \(rfc3339(slot))")
                }
                let firstFrame = try firstSound(
                    recorder, after: origin + .seconds(slot.timeIntervalSince(wallOrigin)))
                slots.append(
                    Slot(
                        slot: slot, firstFrame: firstFrame,
                        queuedAfterSlot: queued.event.timestamp.timeIntervalSince(slot),
                        queuedToFirstSample: now.sum - totals.sum))
                totals = now
            }
            heard = slots
            // The sink clock is fixed by the earliest bound over the whole recording: read every
            // slot against the same one, once all have been heard.
            recorded = try slots.map { slot in
                try bench.bounds(
                    frame: slot.firstFrame, from: origin + .seconds(slot.slot.timeIntervalSince(wallOrigin)))
            }
            clockDrift = Date().timeIntervalSince(wallOrigin) - (ContinuousClock.now - origin).seconds
        } catch {
            if let started { await started.stop() }
            _ = await recorder.stop()
            await pulse.stop()
            throw error
        }
        let drift = sinkClockDrift(recorder)
        await started?.stop()
        _ = await recorder.stop()
        await pulse.stop()

        let estimated = heard.map { $0.queuedAfterSlot + $0.queuedToFirstSample + leading }
        reportSchedules(heard: heard, recorded: recorded, estimated: estimated, leading: leading)
        print(
            "over the run the wall clock moved \(ms(clockDrift)) against the monotonic clock, and the sink clock"
                + " \(ms(drift)) against the recorder's (both should be about zero)")
        print("load average before the run: \(loadBefore), after: \(loadAverage())")
        summary([
            "benchmark": "speakd-latency-bench --schedules", "build": build, "date": rfc3339(Date()),
            "cores": ProcessInfo.processInfo.activeProcessorCount, "load": [loadBefore, loadAverage()],
            "rule": rule, "text": text, "slots": heard.count, "goalMs": slotGoal * 1000,
            "slotToFirstAudibleMs": [
                "recordingSinkClock": figures(recorded.map(\.sinkClock)),
                "recordingArrival": figures(recorded.map(\.arrival)),
                "daemonEstimate": figures(estimated),
            ],
            "queuedAfterSlotMs": figures(heard.map(\.queuedAfterSlot)),
            "queuedToFirstSampleMs": figures(heard.map(\.queuedToFirstSample)),
            "leadingSilenceMs": rounded(leading * 1000),
            "verdict": [
                "recording": verdict(low: recorded.map(\.sinkClock), high: recorded.map(\.arrival), goal: slotGoal),
                "daemonEstimate": verdict(low: estimated, high: estimated, goal: slotGoal),
            ],
        ])
    }

    static func reportSchedules(
        heard: [Slot], recorded: [LatencyBenchmark.Bounds], estimated: [Double], leading: Double
    ) {
        func cell(_ value: Double, _ width: Int = 9) -> String {
            String(format: "%\(width).1f", value * 1000)
        }
        print("")
        print("slot → first audible sample (ms)")
        print("slot                  recording: sink   arrival   daemon: queued−slot  queued→first  + leading  = heard")
        for (index, slot) in heard.enumerated() {
            print(
                rfc3339(slot.slot).padding(toLength: 30, withPad: " ", startingAt: 0) + cell(recorded[index].sinkClock)
                    + cell(recorded[index].arrival, 10) + cell(slot.queuedAfterSlot, 21)
                    + cell(slot.queuedToFirstSample, 14) + cell(leading, 11) + cell(estimated[index], 8))
        }
        print("")
        print("                                              median      p90      max")
        let rows: [(String, [Double])] = [
            ("recording, sink clock (reads early)", recorded.map(\.sinkClock)),
            ("recording, arrival (reads late)", recorded.map(\.arrival)),
            ("daemon's estimate", estimated),
            ("  queued − slot", heard.map(\.queuedAfterSlot)),
            ("  queued → first sample (sink estimate)", heard.map(\.queuedToFirstSample)),
        ]
        for (name, values) in rows {
            print(
                name.padding(toLength: 42, withPad: " ", startingAt: 0) + cell(median(values))
                    + cell(percentile(values, 0.9)) + cell(values.max() ?? .nan) + " ms")
        }
        print("  + the rendering's silence before its first audible sample: \(ms(leading))")
        print("")
        print(
            "goal, slot → first audible sample ≤ 50 ms on every slot with the output free: by the recording "
                + verdict(low: recorded.map(\.sinkClock), high: recorded.map(\.arrival), goal: slotGoal)
                + ", by the daemon's estimate " + verdict(low: estimated, high: estimated, goal: slotGoal))
        print("The recording's two bounds bracket the truth: the sink clock reads early (the null sink rewinds what it")
        print("rendered ahead when a stream starts, up to --audio-latency), the arrival late (parec's 20 ms blocks).")
        print("The daemon's estimate is its own: `queued` has millisecond resolution, and the first sample's time is")
        print("PulseAudio's stream latency as the daemon reads it.")
    }

    /// The changes of `schedule` that answer a slot (`fired` or `skipped`), in order.
    static func slotChanges(_ events: EventStreamRecorder, schedule: String) -> [ScheduleChange] {
        events.events.lazy.filter { $0.type == .schedule && $0.id == schedule }.compactMap(\.schedule)
            .filter { $0.change == .fired || $0.change == .skipped }
    }

    /// The first recorded frame above `LatencyBenchmark.soundThreshold` from half a second before
    /// `instant` (the recording places a stream's start early) to 2.5 s after it.
    static func firstSound(_ recorder: MonitorRecorder, after instant: ContinuousClock.Instant) throws -> Int {
        guard let zero = recorder.playedAt(frame: 0) else {
            throw SpeakdProcess.Failure(description: "nothing recorded")
        }
        let rate = Double(recorder.sampleRate)
        let at = Int((instant - zero).seconds * rate)
        let samples = recorder.samplesSoFar()
        let window = max(0, at - Int(0.5 * rate))..<min(samples.count, at + Int(2.5 * rate))
        guard !window.isEmpty,
            let first = samples[window].firstIndex(where: { abs(Int($0)) > Int(LatencyBenchmark.soundThreshold) })
        else { throw SpeakdProcess.Failure(description: "nothing was heard after the slot") }
        return first
    }

    /// Seconds from the start of the announcement as the hall hears it (`POST /v1/speech`, with
    /// the loudness stage) to its first sample above `LatencyBenchmark.soundThreshold`.
    static func audibleLeading(_ daemon: SpeakdProcess) async throws -> Double {
        let wav = try await daemon.speech(json: try JSONEncoder().encode(["text": text]))
        guard let first = wav.samples.firstIndex(where: { abs(Int($0)) > Int(LatencyBenchmark.soundThreshold) }) else {
            throw SpeakdProcess.Failure(description: "the reference is silent")
        }
        return Double(first) / Double(wav.sampleRate)
    }

    // MARK: Audit

    /// One daemon of the audit comparison and what it measured.
    final class AuditSubject {
        let daemon: SpeakdProcess
        let events: EventStreamRecorder
        let bench: LatencyBenchmark
        /// When its last announcement's `finished` arrived.
        var lastFinished: ContinuousClock.Instant?
        /// Each kept announcement's last audible frame and its `finished` event's arrival.
        var heard: [(last: Int, finishedAt: ContinuousClock.Instant)] = []

        init(daemon: SpeakdProcess, events: EventStreamRecorder, recorder: MonitorRecorder) {
            self.daemon = daemon
            self.events = events
            self.bench = LatencyBenchmark(recorder: recorder, daemon: daemon, events: events, verbose: false)
        }

        /// Last audible sample → `finished` of every kept announcement.
        func measured() throws -> [LatencyBenchmark.Bounds] {
            try heard.map { try bench.bounds(frame: $0.last, from: $0.finishedAt, reversed: true) }
        }
    }

    static func audit(speakdPath: String, pairs: Int) async throws {
        let state = try scratchDirectory("speakd-audit-bench")
        defer { try? FileManager.default.removeItem(at: state) }
        let loadBefore = loadAverage()
        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse)
        var subjects: [AuditSubject] = []
        var rows = 0
        do {
            for arguments in [[], ["--state-dir", state.path]] {
                let daemon = try await SpeakdProcess.start(
                    executable: speakdPath, audio: "pulse", arguments: arguments + ["--render-cache-mib", "0"],
                    environment: pulse.environment)
                let events = EventStreamRecorder(client: daemon.unixClient)
                try await daemon.waitForEventStreams(1)
                subjects.append(AuditSubject(daemon: daemon, events: events, recorder: recorder))
            }
            print(
                "audit log: '\(text)', \(pairs) pairs, speakd without state (A) and with --state-dir (B) on one"
                    + " PulseAudio null sink, in turn")
            for round in 0...pairs {
                for subject in subjects {
                    if let last = subject.lastFinished {
                        try await Task.sleep(until: last + PublicAddressBenchmark.idle)
                    }
                    let heard = try await subject.bench.record(["text": text])
                    subject.lastFinished = heard.finishedAt
                    // Round 0 warms each daemon up.
                    if round > 0 { subject.heard.append((heard.last, heard.finishedAt)) }
                }
            }
            // Every announcement of B has its row, closed as it finished.
            let page = try await subjects[1].daemon.unixClient.send("GET", "/v1/audit?limit=1000")
            rows = try page.decode(AuditPage.self).entries.filter { $0.reason == FinishReason.completed.rawValue }.count
        } catch {
            for subject in subjects { await subject.daemon.stop() }
            _ = await recorder.stop()
            await pulse.stop()
            throw error
        }
        let measured = try subjects.map { try $0.measured() }
        for subject in subjects {
            subject.events.stop()
            await subject.daemon.stop()
        }
        _ = await recorder.stop()
        await pulse.stop()

        let (a, b) = (measured[0], measured[1])
        print("")
        print("last audible sample → finished              A: no state  B: --state-dir      B − A   95% interval")
        let statistics: [(String, KeyPath<LatencyBenchmark.Bounds, Double>, ([Double]) -> Double)] = [
            ("sink clock (reads late), trimmed mean", \.sinkClock, PublicAddressBenchmark.trimmedMean),
            ("sink clock, median", \.sinkClock, median),
            ("sink clock, p90", \.sinkClock, { percentile($0, 0.9) }),
            ("arrival (reads early), trimmed mean", \.arrival, PublicAddressBenchmark.trimmedMean),
            ("arrival, median", \.arrival, median),
        ]
        var differences: [String: Any] = [:]
        for (name, bound, statistic) in statistics {
            let (x, y) = (a.map { $0[keyPath: bound] }, b.map { $0[keyPath: bound] })
            let (low, high) = PublicAddressBenchmark.bootstrapInterval(x, y, statistic)
            differences[name] = [
                "a": rounded(statistic(x) * 1000), "b": rounded(statistic(y) * 1000),
                "bMinusA": rounded((statistic(y) - statistic(x)) * 1000),
                "interval95": [rounded(low * 1000), rounded(high * 1000)],
            ]
            print(
                name.padding(toLength: 42, withPad: " ", startingAt: 0)
                    + String(
                        format: "%8.2f ms   %8.2f ms  %+7.2f ms  [%+.2f, %+.2f] ms", statistic(x) * 1000,
                        statistic(y) * 1000, (statistic(y) - statistic(x)) * 1000, low * 1000, high * 1000))
        }
        let early = measured.map { $0.filter { $0.sinkClock < 0 }.count }
        print(
            "finished received before the last audible sample was played (by the sink clock): A \(early[0]) of \(a.count), "
                + "B \(early[1]) of \(b.count)")
        print("B's audit log holds \(rows) completed rows for its \(b.count + 1) announcements")
        let (low, high) = PublicAddressBenchmark.bootstrapInterval(
            a.map(\.sinkClock), b.map(\.sinkClock), PublicAddressBenchmark.trimmedMean)
        let withLog = b.map(\.sinkClock)
        let met = percentile(withLog, 0.9) <= finishedGoal && early[1] == 0
        print("")
        print(
            "goal, finished ≤ 20 ms after the last audible sample with the log, never before it: "
                + (met ? "met" : "NOT met")
                + String(
                    format: " (B by the sink clock, which reads late: median %.1f, p90 %.1f, max %.1f ms)",
                    median(withLog) * 1000, percentile(withLog, 0.9) * 1000, (withLog.max() ?? .nan) * 1000))
        print(
            String(
                format: "the log's cost (B − A, trimmed means, sink clock): %+.2f ms, 95%% interval [%+.2f, %+.2f] ms",
                (PublicAddressBenchmark.trimmedMean(withLog) - PublicAddressBenchmark.trimmedMean(a.map(\.sinkClock)))
                    * 1000, low * 1000, high * 1000))
        print("The sink clock reads late for this figure and the arrival early (parec's 20 ms blocks): the truth lies")
        print("between. Intervals: 95% bootstrap of the difference, resampling the A-B pairs (2,000 times). Trimmed")
        print("mean: the mean of the middle 80%.")
        print("B's state directory: \(state.path), on \(fileSystem(of: state.path)).")
        print("load average before the run: \(loadBefore), after: \(loadAverage())")
        summary([
            "benchmark": "speakd-latency-bench --audit", "build": build, "date": rfc3339(Date()),
            "cores": ProcessInfo.processInfo.activeProcessorCount, "load": [loadBefore, loadAverage()],
            "text": text, "pairs": pairs, "goalMs": finishedGoal * 1000,
            "lastAudibleToFinishedMs": [
                "noState": ["sinkClock": figures(a.map(\.sinkClock)), "arrival": figures(a.map(\.arrival))],
                "stateDir": ["sinkClock": figures(withLog), "arrival": figures(b.map(\.arrival))],
            ],
            "comparison": differences, "finishedBeforeSound": ["noState": early[0], "stateDir": early[1]],
            "auditRowsCompleted": rows, "met": met,
        ])
    }

    // MARK: Reporting

    #if DEBUG
    static let build = "debug"
    #else
    static let build = "release"
    #endif

    /// "met" when every value's upper bound is within `goal`, "missed" when a lower bound is
    /// beyond it, else "not resolved".
    static func verdict(low: [Double], high: [Double], goal: Double) -> String {
        if (high.max() ?? .infinity) <= goal { return "met" }
        if (low.max() ?? -.infinity) > goal { return "missed" }
        return "not resolved"
    }

    /// Median, p90 and max in milliseconds.
    static func figures(_ values: [Double]) -> [String: Double] {
        [
            "median": rounded(median(values) * 1000), "p90": rounded(percentile(values, 0.9) * 1000),
            "max": rounded((values.max() ?? .nan) * 1000),
            "trimmedMean": rounded(PublicAddressBenchmark.trimmedMean(values) * 1000),
        ]
    }

    static func rounded(_ value: Double) -> Double { (value * 100).rounded() / 100 }

    /// Prints `object` as one JSON line.
    static func summary(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        print(String(decoding: data, as: UTF8.self))
    }

    static func rfc3339(_ date: Date) -> String { date.formatted(Date.ISO8601FormatStyle()) }

    static func parseTimestamp(_ text: String) -> Date? {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text))
            ?? (try? Date.ISO8601FormatStyle().parse(text))
    }

    /// The 1-minute load average.
    static func loadAverage() -> Double {
        let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.flatMap { Double($0) } ?? .nan
    }

    /// The device and type of the file system `path` is on, from /proc/self/mounts.
    static func fileSystem(of path: String) -> String {
        let mounts = ((try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? "")
            .split(separator: "\n").map { $0.split(separator: " ") }.filter { $0.count > 2 }
        let best = mounts.filter { path.hasPrefix(String($0[1])) }.max { $0[1].count < $1[1].count }
        return best.map { "\($0[0]) (\($0[2]))" } ?? "an unknown file system"
    }

    /// How far the sink clock has drifted from the recorder's by the end of the recording: the
    /// least delay of the last 100 blocks after the sink clock says their first frame played.
    /// About zero when the recording keeps time; it grows when the recording loses frames.
    static func sinkClockDrift(_ recorder: MonitorRecorder) -> Double {
        let log = recorder.arrivalLog
        guard log.count > 1 else { return .nan }
        let lags = zip(log.dropFirst(), log).suffix(100).compactMap { arrival, previous in
            recorder.playedAt(frame: previous.1).map { (arrival.0 - $0).seconds }
        }
        return lags.min() ?? .nan
    }
}
