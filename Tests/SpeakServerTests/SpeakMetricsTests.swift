import Foundation
import SpeakAPI
import SpeechModel
import Testing

@testable import SpeakServer

/// The histograms of `/metrics`, from events with known timestamps.
struct SpeakMetricsTests {
    static let gauges = HealthGauges(
        waiting: 2, speaking: true, capacity: 8, sink: "null", audioUp: true, engineUp: true,
        workers: HealthReport.Workers(running: 2, configured: 2, restarts: 3))

    static func event(
        _ type: AnnouncementEvent.Kind, _ id: String, at seconds: Double, reason: FinishReason? = nil
    ) -> AnnouncementEvent {
        AnnouncementEvent(
            type: type, id: id, text: "Mind the gap", priority: .default,
            timestamp: Date(timeIntervalSince1970: 1_800_000_000 + seconds),
            success: type == .finished ? reason == .completed : nil, reason: reason)
    }

    @Test func queueWaitAndSpeakingTimeComeFromTheEventsTimestamps() {
        let metrics = SpeakMetrics()
        metrics.record(Self.event(.queued, "a", at: 0))
        metrics.record(Self.event(.queued, "b", at: 0.5))
        metrics.record(Self.event(.started, "a", at: 1.5))
        metrics.record(Self.event(.finished, "a", at: 4, reason: .completed))
        // Expired while waiting: it waited, but neither started nor spoke.
        metrics.record(Self.event(.finished, "b", at: 5, reason: .expired))
        let page = metrics.exposition(health: Self.gauges)
        #expect(page.contains("# TYPE speakd_queue_wait_seconds histogram"))
        #expect(page.contains("speakd_queue_wait_seconds_count 1\n"))
        #expect(page.contains("speakd_queue_wait_seconds_sum 1.5\n"))
        #expect(page.contains(#"speakd_speaking_seconds_count{reason="completed"} 1"#))
        #expect(page.contains(#"speakd_speaking_seconds_sum{reason="completed"} 2.5"#))
        #expect(page.contains(#"speakd_speaking_seconds_count{reason="expired"} 0"#))
        #expect(page.contains(#"speakd_announcements_finished_total{reason="expired",success="false"} 1"#))
        #expect(page.contains("speakd_announcements_started_total 1\n"))
    }

    @Test func rendersAreCountedAndTimed() {
        let metrics = SpeakMetrics()
        metrics.countRender(duration: .milliseconds(30))
        metrics.countRender(duration: .milliseconds(3))
        let page = metrics.exposition(health: Self.gauges)
        #expect(page.contains("speakd_speech_renders_total 2\n"))
        #expect(page.contains("speakd_speech_render_seconds_count 2\n"))
        #expect(page.contains("speakd_speech_render_seconds_sum 0.033\n"))
    }

    @Test func gaugesAndWorkerRestartsFollowTheHealthReport() {
        let metrics = SpeakMetrics()
        var page = metrics.exposition(health: Self.gauges)
        #expect(page.contains("speakd_queue_waiting 2.0\n"))
        #expect(page.contains("speakd_engine_workers 2.0\n"))
        #expect(page.contains("# TYPE speakd_engine_worker_restarts_total counter"))
        #expect(page.contains("speakd_engine_worker_restarts_total 3\n"))
        var later = Self.gauges
        later.workers?.restarts = 5
        later.waiting = 0
        page = metrics.exposition(health: later)
        #expect(page.contains("speakd_engine_worker_restarts_total 5\n"))
        #expect(page.contains("speakd_queue_waiting 0.0\n"))
        // Every label value exists from the start, at zero.
        #expect(page.contains(#"speakd_announcements_refused_total{reason="too_large"} 0"#))
        #expect(page.contains(#"speakd_announcements_accepted_total{priority="high"} 0"#))
    }
}
