import SpeakAPI
import SpeechModel
import Synchronization

/// Counters behind `GET /metrics`, kept in memory and written in the Prometheus text format.
///
/// Counters only grow while the process lives; gauges (queue depth, audio state) are read
/// when the page is requested.
public final class SpeakMetrics: Sendable {
    private struct Counters {
        var accepted: [AnnouncementPriority: Int] = [:]
        var refused: [String: Int] = [:]
        var started = 0
        var finished: [FinishReason: (success: Int, failure: Int)] = [:]
        var responses: [Int: Int] = [:]
        var renders = 0
        var eventStreams = 0
    }

    private let counters = Mutex(Counters())

    /// Counters at zero.
    public init() {}

    func countAccepted(_ priority: AnnouncementPriority) {
        counters.withLock { $0.accepted[priority, default: 0] += 1 }
    }

    func countRefused(_ reason: String) {
        counters.withLock { $0.refused[reason, default: 0] += 1 }
    }

    func countResponse(status: Int) {
        counters.withLock { $0.responses[status, default: 0] += 1 }
    }

    func countRender() {
        counters.withLock { $0.renders += 1 }
    }

    func eventStreamOpened() {
        counters.withLock { $0.eventStreams += 1 }
    }

    func eventStreamClosed() {
        counters.withLock { $0.eventStreams -= 1 }
    }

    /// Counts a queue event (`started`, `finished` by reason and success).
    public func record(_ event: AnnouncementEvent) {
        counters.withLock { counters in
            switch event.type {
            case .queued:
                break
            case .started:
                counters.started += 1
            case .finished:
                let reason = event.reason ?? .failed
                var tally = counters.finished[reason] ?? (0, 0)
                if event.success == true { tally.success += 1 } else { tally.failure += 1 }
                counters.finished[reason] = tally
            }
        }
    }

    /// Counts every event of `events` until it ends; run it for the life of the queue.
    public func observe(_ events: AsyncStream<SequencedAnnouncementEvent>) async {
        for await event in events {
            record(event.event)
        }
    }

    /// The exposition page, with the gauges given.
    func exposition(health: HealthGauges) -> String {
        let counters = counters.withLock { $0 }
        var page = ExpositionWriter()
        page.family("speakd_announcements_accepted_total", "counter", "Announcements accepted by the queue.")
        for priority in AnnouncementPriority.allCases {
            page.sample(
                "speakd_announcements_accepted_total", ["priority": priority.rawValue], counters.accepted[priority] ?? 0
            )
        }
        page.family(
            "speakd_announcements_refused_total", "counter", "Announcements refused before they were queued, by reason."
        )
        for reason in ["queue_full", "shutting_down", "audio_unavailable", "invalid", "too_large"] {
            page.sample("speakd_announcements_refused_total", ["reason": reason], counters.refused[reason] ?? 0)
        }
        page.family("speakd_announcements_started_total", "counter", "Announcements that started speaking.")
        page.sample("speakd_announcements_started_total", [:], counters.started)
        page.family("speakd_announcements_finished_total", "counter", "Finished announcements by reason and success.")
        for reason in FinishReason.allCases {
            let tally = counters.finished[reason] ?? (0, 0)
            page.sample(
                "speakd_announcements_finished_total", ["reason": reason.rawValue, "success": "true"], tally.success)
            page.sample(
                "speakd_announcements_finished_total", ["reason": reason.rawValue, "success": "false"], tally.failure)
        }
        page.family("speakd_speech_renders_total", "counter", "Utterances rendered to WAV by POST /v1/speech.")
        page.sample("speakd_speech_renders_total", [:], counters.renders)
        page.family("speakd_http_responses_total", "counter", "HTTP responses by status code.")
        for (status, count) in counters.responses.sorted(by: { $0.key < $1.key }) {
            page.sample("speakd_http_responses_total", ["code": String(status)], count)
        }
        page.family("speakd_event_streams", "gauge", "Open Server-Sent Event streams.")
        page.sample("speakd_event_streams", [:], counters.eventStreams)
        page.family("speakd_queue_waiting", "gauge", "Announcements waiting to be spoken.")
        page.sample("speakd_queue_waiting", [:], health.waiting)
        page.family("speakd_queue_speaking", "gauge", "1 while an announcement is speaking.")
        page.sample("speakd_queue_speaking", [:], health.speaking ? 1 : 0)
        page.family("speakd_queue_capacity", "gauge", "The most announcements that may wait.")
        page.sample("speakd_queue_capacity", [:], health.capacity)
        page.family("speakd_audio_up", "gauge", "1 when the audio sink is available.")
        page.sample("speakd_audio_up", ["sink": health.sink], health.audioUp ? 1 : 0)
        page.family("speakd_engine_up", "gauge", "1 when the speech engine is available.")
        page.sample("speakd_engine_up", [:], health.engineUp ? 1 : 0)
        if let workers = health.workers {
            page.family("speakd_engine_workers", "gauge", "Engine worker processes running.")
            page.sample("speakd_engine_workers", [:], workers.running)
            page.family(
                "speakd_engine_worker_restarts_total", "counter",
                "Engine workers started to replace one that died (crashed, killed or stalled).")
            page.sample("speakd_engine_worker_restarts_total", [:], workers.restarts)
        }
        return page.text
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
}

/// Writes the Prometheus text format (version 0.0.4).
private struct ExpositionWriter {
    var text = ""

    mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    mutating func sample(_ name: String, _ labels: [String: String], _ value: Int) {
        if labels.isEmpty {
            text += "\(name) \(value)\n"
            return
        }
        let rendered = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\(Self.escape($0.value))\"" }
        text += "\(name){\(rendered.joined(separator: ","))} \(value)\n"
    }

    private static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
