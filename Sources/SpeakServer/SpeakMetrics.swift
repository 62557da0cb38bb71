import CoreMetrics
import FoundationEssentials
import Prometheus
import SpeakAPI
import SpeakService
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// The swift-metrics API; Prometheus and Foundation have types of the same names.
private typealias Counter = CoreMetrics.Counter
private typealias Gauge = CoreMetrics.Gauge
private typealias Meter = CoreMetrics.Meter
private typealias Timer = CoreMetrics.Timer

/// speakd's metrics, recorded through swift-metrics into a swift-prometheus registry of this
/// server's own, which writes `GET /metrics` in the Prometheus text format.
///
/// The registry is per instance rather than the process-wide `MetricsSystem`, so several servers
/// in one process (the tests) keep separate counts. Every label value the API can produce is
/// created at start, so each series reads 0 before it first happens instead of being absent.
/// Gauges that describe the present (queue depth, audio, workers) are set when the page is read.
public final class SpeakMetrics: Sendable {
    private let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory

    private let accepted: [AnnouncementPriority: Counter]
    private let refused: [String: Counter]
    private let started: Counter
    private let finished: [FinishReason: (success: Counter, failure: Counter)]
    private let renders: Counter
    private let eventStreams: Meter
    private let responses = Mutex<[Int: Counter]>([:])
    /// Finished announcements by output and success, made as outputs are first seen.
    private let outputFinished = Mutex<[String: Counter]>([:])

    /// `POST /v1/speech`: from the decoded request to the last sample rendered.
    private let renderTime: Timer
    /// From `queued` to `started`, by the events' timestamps: how long announcements wait until
    /// their first audible sample is heard.
    private let queueWait: Timer
    /// From `started` to `finished`, by reason: how long announcements speak.
    private let speakingTime: [FinishReason: Timer]
    /// When announcements not finished yet were queued and started, for `queueWait` and
    /// `speakingTime`; an entry leaves with the announcement's `finished` event.
    private let pending = Mutex(Pending())
    private struct Pending {
        var queuedAt: [String: Date] = [:]
        var startedAt: [String: Date] = [:]
        /// Queued and not heard yet, for `firstSample`.
        var awaitingSound: [String: Date] = [:]
        /// When the last sound of an announcement still speaking ended, for `finishedDelay`.
        var soundEndedAt: [String: Date] = [:]
    }
    /// From `queued` to the first sample played at the sink: the latency a listener hears.
    private let firstSample: Timer
    /// From the last audible sample played to the `finished` event.
    private let finishedDelay: Timer
    /// Worker restarts as the pool counted them at the last exposition.
    private let restarts: Counter
    private let restartsCounted = Mutex(0)
    /// The render cache, when there is one, and its counts at the last exposition.
    private let renderCache = Mutex<(cache: RenderCache?, counted: RenderCache.Statistics)>((nil, .init()))
    /// What each RTP output had sent at the last scrape, so its counters grow by the difference.
    private let rtpCounted = Mutex<[String: HealthReport.Output.RTP]>([:])
    private let cacheHits: Counter
    private let cacheMisses: Counter
    private let cacheEvictions: Counter
    private let cacheDiskHits: Counter
    private let cacheDiskEvictions: Counter

    /// Why a request to queue an announcement was refused.
    static let refusalReasons = ["queue_full", "shutting_down", "audio_unavailable", "invalid", "too_large"]

    /// Every series at zero.
    public init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Renders take milliseconds, waits and speech take seconds.
        factory.durationHistogramBuckets = [
            "speakd_speech_render_seconds": [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000].map {
                .milliseconds($0)
            },
            "speakd_queue_wait_seconds": [0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300].map { .seconds($0) },
            "speakd_speaking_seconds": [0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120].map { .seconds($0) },
            "speakd_first_sample_seconds": [10, 20, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10000, 60000].map {
                .milliseconds($0)
            },
            "speakd_finished_delay_seconds": [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000].map { .milliseconds($0) },
        ]
        self.factory = factory
        accepted = Dictionary(
            uniqueKeysWithValues: AnnouncementPriority.allCases.map {
                (
                    $0,
                    Counter(
                        label: "speakd_announcements_accepted_total", dimensions: [("priority", $0.rawValue)],
                        factory: factory)
                )
            })
        refused = Dictionary(
            uniqueKeysWithValues: Self.refusalReasons.map {
                (
                    $0,
                    Counter(label: "speakd_announcements_refused_total", dimensions: [("reason", $0)], factory: factory)
                )
            })
        started = Counter(label: "speakd_announcements_started_total", factory: factory)
        finished = Dictionary(
            uniqueKeysWithValues: FinishReason.allCases.map { reason in
                let name = "speakd_announcements_finished_total"
                return (
                    reason,
                    (
                        Counter(
                            label: name, dimensions: [("reason", reason.rawValue), ("success", "true")],
                            factory: factory),
                        Counter(
                            label: name, dimensions: [("reason", reason.rawValue), ("success", "false")],
                            factory: factory)
                    )
                )
            })
        renders = Counter(label: "speakd_speech_renders_total", factory: factory)
        eventStreams = Meter(label: "speakd_event_streams", factory: factory)
        renderTime = Timer(label: "speakd_speech_render_seconds", factory: factory)
        queueWait = Timer(label: "speakd_queue_wait_seconds", factory: factory)
        firstSample = Timer(label: "speakd_first_sample_seconds", factory: factory)
        finishedDelay = Timer(label: "speakd_finished_delay_seconds", factory: factory)
        restarts = Counter(label: "speakd_engine_worker_restarts_total", factory: factory)
        cacheHits = Counter(label: "speakd_render_cache_hits_total", factory: factory)
        cacheMisses = Counter(label: "speakd_render_cache_misses_total", factory: factory)
        cacheEvictions = Counter(label: "speakd_render_cache_evictions_total", factory: factory)
        cacheDiskHits = Counter(label: "speakd_render_cache_disk_hits_total", factory: factory)
        cacheDiskEvictions = Counter(label: "speakd_render_cache_disk_evictions_total", factory: factory)
        speakingTime = Dictionary(
            uniqueKeysWithValues: FinishReason.allCases.map {
                ($0, Timer(label: "speakd_speaking_seconds", dimensions: [("reason", $0.rawValue)], factory: factory))
            })
    }

    /// What the service counts: accepted and refused announcements, whatever front brought them.
    public var serviceCounters: ServiceCounters {
        ServiceCounters(
            accepted: { [self] in countAccepted($0) }, refused: { [self] in countRefused($0) })
    }

    /// Brings an RTP output's counters up to what its sink counted (`/healthz` has the totals):
    /// `speakd_rtp_packets_total`, `speakd_rtp_bytes_total`, `speakd_rtp_late_packets_total`.
    private func countRTP(_ sent: HealthReport.Output.RTP, output: String) {
        let before = rtpCounted.withLock { counted in
            defer { counted[output] = sent }
            return counted[output] ?? HealthReport.Output.RTP(packets: 0, bytes: 0, latePackets: 0)
        }
        let label = [("output", output)]
        for (name, now, then) in [
            ("speakd_rtp_packets_total", sent.packets, before.packets),
            ("speakd_rtp_bytes_total", sent.bytes, before.bytes),
            ("speakd_rtp_late_packets_total", sent.latePackets, before.latePackets),
        ] {
            let counter = Counter(label: name, dimensions: label, factory: factory)
            if now > then { counter.increment(by: now - then) } else { counter.increment(by: 0) }
        }
    }

    func countAccepted(_ priority: AnnouncementPriority) {
        accepted[priority]?.increment()
    }

    func countRefused(_ reason: String) {
        refused[reason]?.increment()
    }

    func countResponse(status: Int) {
        let counter = responses.withLock { counters in
            if let counter = counters[status] { return counter }
            let counter = Counter(
                label: "speakd_http_responses_total", dimensions: [("code", String(status))], factory: factory)
            counters[status] = counter
            return counter
        }
        counter.increment()
    }

    /// A `POST /v1/speech` rendered in `duration`.
    func countRender(duration: Duration) {
        renders.increment()
        renderTime.recordNanoseconds(Self.nanoseconds(duration))
    }

    /// `speakd_output_announcements_finished_total{output, success}`.
    private func countFinished(output: String, success: Bool) {
        let key = "\(output)\u{0}\(success)"
        let counter = outputFinished.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "speakd_output_announcements_finished_total",
                dimensions: [("output", output), ("success", String(success))], factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    func eventStreamOpened() {
        eventStreams.increment()
    }

    func eventStreamClosed() {
        eventStreams.decrement()
    }

    /// Counts a queue event: `started`, `finished` by reason and success, and the time waited
    /// and spoken from the events' own timestamps.
    public func record(_ event: AnnouncementEvent) {
        switch event.type {
        case .queued:
            pending.withLock { pending in
                pending.queuedAt[event.id] = event.timestamp
                pending.awaitingSound[event.id] = event.timestamp
            }
        case .started:
            started.increment()
            let queued = pending.withLock { pending in
                pending.startedAt[event.id] = event.timestamp
                return pending.queuedAt.removeValue(forKey: event.id)
            }
            if let queued { queueWait.recordSeconds(event.timestamp.timeIntervalSince(queued)) }
        case .paused, .resumed, .headset:
            // Speaking time counts from start to finish, pauses included.
            break
        case .finished:
            let reason = event.reason ?? .failed
            let counters = finished[reason]
            (event.success == true ? counters?.success : counters?.failure)?.increment()
            if let output = event.output { countFinished(output: output, success: event.success == true) }
            // One that never started (expired, discarded, cancelled while waiting) waited but did not speak.
            let (started, soundEnded) = pending.withLock { pending in
                pending.queuedAt.removeValue(forKey: event.id)
                pending.awaitingSound.removeValue(forKey: event.id)
                return (
                    pending.startedAt.removeValue(forKey: event.id), pending.soundEndedAt.removeValue(forKey: event.id)
                )
            }
            if let started { speakingTime[reason]?.recordSeconds(event.timestamp.timeIntervalSince(started)) }
            // Timed to now, when the event arrives here: a completed one's timestamp is the end
            // of its last sound itself.
            if let soundEnded { finishedDelay.recordSeconds(max(0, Date().timeIntervalSince(soundEnded))) }
        case .word, .sentence, .mark, .clip, .session, .repeat, .schedule:
            break
        }
    }

    /// Announcement `id`'s first sample was heard at `instant`: `speakd_first_sample_seconds`
    /// from its `queued` event to then. With `lastSoundEnded(id:at:)`, the output's queue is
    /// given these as its playback timing.
    public func firstSampleHeard(id: String, at instant: ContinuousClock.Instant) {
        let heard = Self.date(of: instant)
        let queued = pending.withLock { $0.awaitingSound.removeValue(forKey: id) }
        if let queued { firstSample.recordSeconds(max(0, heard.timeIntervalSince(queued))) }
    }

    /// Announcement `id`'s last sound ended at `instant` (it played to the end): its `finished`
    /// event is timed from then, `speakd_finished_delay_seconds`.
    public func lastSoundEnded(id: String, at instant: ContinuousClock.Instant) {
        let ended = Self.date(of: instant)
        pending.withLock { $0.soundEndedAt[id] = ended }
    }

    /// The wall-clock time of a monotonic instant, to compare with event timestamps.
    private static func date(of instant: ContinuousClock.Instant) -> Date {
        let offset = instant - .now
        return Date().addingTimeInterval(
            Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18)
    }

    /// Counts every event of `events` until it ends; run it for the life of the queue.
    public func observe(_ events: AsyncStream<SequencedAnnouncementEvent>) async {
        for await event in events {
            record(event.event)
        }
    }

    /// Has `/metrics` count the hits, misses, evictions and bytes of `cache`, in memory and on disk.
    public func observe(renderCache cache: RenderCache) {
        renderCache.withLock { $0.cache = cache }
    }

    /// The exposition page, with the gauges given.
    func exposition(health: HealthGauges) -> String {
        // The cache counts for itself; the counters catch up with it.
        let cache = renderCache.withLock { state -> (RenderCache.Statistics, RenderCache.Statistics, Bool)? in
            guard let cache = state.cache else { return nil }
            let now = cache.statistics
            defer { state.counted = now }
            return (now, state.counted, cache.keepsRendersOnDisk)
        }
        if let (now, before, onDisk) = cache {
            if now.hits > before.hits { cacheHits.increment(by: now.hits - before.hits) }
            if now.misses > before.misses { cacheMisses.increment(by: now.misses - before.misses) }
            if now.evictions > before.evictions { cacheEvictions.increment(by: now.evictions - before.evictions) }
            Gauge(label: "speakd_render_cache_bytes", factory: factory).record(now.bytes)
            Gauge(label: "speakd_render_cache_entries", factory: factory).record(now.entries)
            if now.diskHits > before.diskHits { cacheDiskHits.increment(by: now.diskHits - before.diskHits) }
            if now.diskEvictions > before.diskEvictions {
                cacheDiskEvictions.increment(by: now.diskEvictions - before.diskEvictions)
            }
            if onDisk {
                Gauge(label: "speakd_render_cache_disk_bytes", factory: factory).record(now.diskBytes)
                Gauge(label: "speakd_render_cache_disk_entries", factory: factory).record(now.diskEntries)
            }
        }
        Gauge(label: "speakd_queue_waiting", factory: factory).record(health.waiting)
        Gauge(label: "speakd_queue_speaking", factory: factory).record(health.speaking ? 1 : 0)
        Gauge(label: "speakd_queue_capacity", factory: factory).record(health.capacity)
        Gauge(label: "speakd_audio_up", dimensions: [("sink", health.sink)], factory: factory)
            .record(health.audioUp ? 1 : 0)
        Gauge(label: "speakd_engine_up", factory: factory).record(health.engineUp ? 1 : 0)
        // Per output, under their own names: the unlabelled gauges above stay the default output's,
        // as they were before outputs had names.
        for output in health.outputs {
            let label = [("output", output.name)]
            Gauge(label: "speakd_output_up", dimensions: label + [("sink", output.sink)], factory: factory)
                .record(output.state == .ok ? 1 : 0)
            if let queue = output.queue {
                Gauge(label: "speakd_output_waiting", dimensions: label, factory: factory).record(queue.waiting)
                Gauge(label: "speakd_output_speaking", dimensions: label, factory: factory)
                    .record(queue.speaking ? 1 : 0)
            }
            if let rtp = output.rtp { countRTP(rtp, output: output.name) }
        }
        if let workers = health.workers {
            Gauge(label: "speakd_engine_workers", factory: factory).record(workers.running)
            // The pool counts restarts itself; the counter catches up with it.
            let new = restartsCounted.withLock { counted in
                defer { counted = max(counted, workers.restarts) }
                return workers.restarts - counted
            }
            if new > 0 { restarts.increment(by: new) }
        }
        return registry.emitToString()
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// The gauges of one exposition.
struct HealthGauges {
    var waiting: Int
    var speaking: Bool
    var capacity: Int
    var sink: String
    var audioUp: Bool
    var engineUp: Bool
    var workers: HealthReport.Workers?
    /// Every named output, when the health report lists them.
    var outputs: [HealthReport.Output] = []
}
