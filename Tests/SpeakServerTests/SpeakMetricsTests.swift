import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeechModel
import SpeechRendering
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

    /// Hits from memory and from disk, misses, and what each tier holds; a cache in memory only
    /// shows no disk gauges.
    @Test func theRenderCacheIsCountedInMemoryAndOnDisk() async throws {
        let directory = try temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            let engine = FakeRenderer()
            func say(_ text: String, with renderer: CachingRenderer) async throws {
                for try await _ in renderer.render(try await renderer.prepare(Utterance(text))) {}
            }
            let before = RenderCache(capacity: 1 << 20, diskDirectory: directory, diskCapacity: 1 << 20)
            try await say("Gate", with: CachingRenderer(base: engine, cache: before, identity: "test"))
            // After a restart: "Gate" from disk, then from memory; "Platform" rendered.
            let cache = RenderCache(capacity: 1 << 20, diskDirectory: directory, diskCapacity: 1 << 20)
            let metrics = SpeakMetrics()
            metrics.observe(renderCache: cache)
            let renderer = CachingRenderer(base: engine, cache: cache, identity: "test")
            for text in ["Gate", "Gate", "Platform"] { try await say(text, with: renderer) }
            let page = metrics.exposition(health: Self.gauges)
            #expect(page.contains("speakd_render_cache_hits_total 1\n"))
            #expect(page.contains("speakd_render_cache_misses_total 1\n"))
            #expect(page.contains("speakd_render_cache_disk_hits_total 1\n"))
            #expect(page.contains("speakd_render_cache_disk_evictions_total 0\n"))
            #expect(page.contains("speakd_render_cache_entries 2.0\n"))
            #expect(page.contains("speakd_render_cache_disk_entries 2.0\n"))
            #expect(page.contains("speakd_render_cache_disk_bytes \(Double(cache.statistics.diskBytes))\n"))

            let inMemory = SpeakMetrics()
            inMemory.observe(renderCache: RenderCache(capacity: 1 << 20))
            #expect(!inMemory.exposition(health: Self.gauges).contains("speakd_render_cache_disk_bytes"))
        }
    }
}
