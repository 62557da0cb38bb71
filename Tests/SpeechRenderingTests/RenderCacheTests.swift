import Foundation
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

/// The render cache in front of an engine that counts its renders.
struct RenderCacheTests {
    static func collect(_ stream: AsyncThrowingStream<PCMChunk, any Error>) async throws -> [PCMChunk] {
        var chunks: [PCMChunk] = []
        for try await chunk in stream { chunks.append(chunk) }
        return chunks
    }

    @Test func aSecondRenderComesFromMemoryWithTheSameAudioAndEvents() async throws {
        let engine = FakeRenderer()
        let cache = RenderCache(capacity: 1 << 20)
        let renderer = CachingRenderer(base: engine, cache: cache, identity: "test 1")
        let prepared = try await renderer.prepare(Utterance("Platform four"))
        let first = try await Self.collect(renderer.render(prepared))
        let second = try await Self.collect(renderer.render(try await renderer.prepare(Utterance("Platform four"))))
        #expect(first == second)
        #expect(first.flatMap(\.events).count == 3)
        #expect(engine.counts.renders == 1)
        #expect(cache.statistics.hits == 1 && cache.statistics.misses == 1)
        #expect(cache.statistics.bytes == 3 * 1_000 * 2 && cache.statistics.entries == 1)
    }

    /// `POST /v1/speech` renders whole: a second one of the same text is answered from the cache,
    /// under a key of its own, since a whole render's chunks are cut otherwise than playback's.
    @Test func aWholeRenderIsKeptApartFromPlaybackAndAnsweredFromTheCache() async throws {
        let engine = FakeRenderer()
        let cache = RenderCache(capacity: 1 << 20)
        let renderer = CachingRenderer(base: engine, cache: cache, identity: "test 1")
        let prepared = try await renderer.prepare(Utterance("Email refreshed, 4 new items"))
        let played = try await Self.collect(renderer.render(prepared, chunking: .streaming))
        let first = try await Self.collect(renderer.render(prepared, chunking: .whole))
        #expect(engine.counts.renders == 2, "a whole render does not take playback's chunks")
        let second = try await Self.collect(renderer.render(prepared, chunking: .whole))
        #expect(second == first && first == played)
        #expect(engine.counts.renders == 2, "the second whole render came from the cache")
        #expect(cache.statistics.hits == 1 && cache.statistics.misses == 2 && cache.statistics.entries == 2)
    }

    @Test func anotherVoiceTextOrEngineIdentityMisses() async throws {
        let engine = FakeRenderer()
        let cache = RenderCache(capacity: 1 << 20)
        let renderer = CachingRenderer(base: engine, cache: cache, identity: "espeak-ng 1.51")
        var defaults = SpeechAttributes()
        _ = try await Self.collect(renderer.render(try await renderer.prepare(Utterance("Gate", defaults: defaults))))
        defaults.voice = "roa/pt"
        _ = try await Self.collect(renderer.render(try await renderer.prepare(Utterance("Gate", defaults: defaults))))
        _ = try await Self.collect(renderer.render(try await renderer.prepare(Utterance("Gate two"))))
        // Another engine version (or data, or sample rate) behind the same cache.
        let upgraded = CachingRenderer(base: engine, cache: cache, identity: "espeak-ng 1.52")
        _ = try await Self.collect(upgraded.render(try await upgraded.prepare(Utterance("Gate"))))
        #expect(engine.counts.renders == 4)
        #expect(cache.statistics.hits == 0)
    }

    @Test func privateCancelledAndOversizedRendersAreNotKept() async throws {
        let engine = FakeRenderer()
        let cache = RenderCache(capacity: 64 << 10)
        let renderer = CachingRenderer(base: engine, cache: cache, identity: "test")
        var secret = try await renderer.prepare(Utterance("Your code is 4711"))
        secret.isPrivate = true
        _ = try await Self.collect(renderer.render(secret))
        _ = try await Self.collect(renderer.render(secret))
        // Stopped after its first chunk, as an interrupted announcement is.
        let cut = try await renderer.prepare(Utterance("Cut short"))
        for try await _ in renderer.render(cut) { break }
        _ = try await Self.collect(renderer.render(cut))
        // Over a quarter of the cache: 3 × 6,000 samples × 2 bytes = 36 KB > 16 KiB.
        let long = CachingRenderer(base: FakeRenderer(sound: .steps(samples: 6_000)), cache: cache, identity: "test")
        let big = try await long.prepare(Utterance("A long text"))
        _ = try await Self.collect(long.render(big))
        _ = try await Self.collect(long.render(big))
        #expect(engine.counts.renders == 4, "the private twice, the cut one twice")
        #expect(cache.statistics.entries == 1, "only the cut one, rendered whole the second time")
        #expect(cache.statistics.hits == 0)
    }

    @Test func theLeastRecentlyUsedGoesFirst() async throws {
        let engine = FakeRenderer()
        // Room for four renders of 6,000 bytes (one may take a quarter of it).
        let cache = RenderCache(capacity: 24_100)
        let renderer = CachingRenderer(base: engine, cache: cache, identity: "test")
        func say(_ text: String) async throws {
            _ = try await Self.collect(renderer.render(try await renderer.prepare(Utterance(text))))
        }
        for text in ["One", "Two", "Three", "Four"] { try await say(text) }
        // "One" is used again, so "Two" is the least recently used when "Five" comes.
        try await say("One")
        try await say("Five")
        #expect(cache.statistics.evictions == 1 && cache.statistics.entries == 4, "\(cache.statistics)")
        let before = engine.counts.renders
        try await say("One")
        #expect(engine.counts.renders == before, "One stayed")
        try await say("Two")
        #expect(engine.counts.renders == before + 1, "Two was evicted")
    }
}
