import Foundation
import Logging
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

@testable import SpeechRendering

/// The render cache's tier on disk, in a directory of each test's own, in front of the engine
/// that counts its renders.
struct RenderCacheDiskTests {

    /// A new, empty directory, removed when `body` returns.
    static func withDirectory(_ body: (String) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("speakd-render-cache-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(directory)
    }

    /// The render files in `directory`.
    static func files(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
            $0.hasSuffix(RenderCacheDisk.suffix)
        }
    }

    static func say(_ text: String, with renderer: CachingRenderer) async throws -> [PCMChunk] {
        try await RenderCacheTests.collect(renderer.render(try await renderer.prepare(Utterance(text))))
    }

    /// A damaged file is removed and the render made afresh, by the engine.
    @Test(arguments: ["cut", "flipped", "empty", "garbage"])
    func aDamagedFileIsRemovedAndRenderedAgain(damage: String) async throws {
        try await Self.withDirectory { directory in
            let engine = FakeRenderer()
            let first = RenderCache(capacity: 0, diskDirectory: directory, diskCapacity: 1 << 20)
            let made = try await Self.say(
                "Platform four", with: CachingRenderer(base: engine, cache: first, identity: "test"))
            let name = try #require(Self.files(in: directory).first)
            let path = directory + "/" + name
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            switch damage {
            case "cut": bytes.removeLast(bytes.count / 3)
            case "flipped": bytes[bytes.count / 2] ^= 1
            case "empty": bytes = []
            default: bytes = Array(repeating: 0xFF, count: bytes.count)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))

            let restarted = RenderCache(capacity: 0, diskDirectory: directory, diskCapacity: 1 << 20)
            let disk = try #require(restarted.disk)
            let key = try #require(restarted.stored(try await Self.key("Platform four", engine: engine)))
            #expect(disk.read(key) == nil)
            #expect(!FileManager.default.fileExists(atPath: path), "removed")
            #expect(restarted.statistics.diskEntries == 0)
            let again = try await Self.say(
                "Platform four", with: CachingRenderer(base: engine, cache: restarted, identity: "test"))
            #expect(again == made)
            #expect(engine.counts.renders == 2, "rendered again")
            #expect(restarted.statistics.diskHits == 0 && restarted.statistics.misses == 1)
            #expect(Self.files(in: directory) == [name], "written afresh")
        }
    }

    /// The memory key `CachingRenderer` makes for `text` under identity `test`.
    static func key(_ text: String, engine: FakeRenderer, identity: String = "test") async throws -> RenderCache.Key {
        RenderCache.Key(
            prepared: try await engine.prepare(Utterance(text)), chunking: .streaming,
            identity: "\(identity) \(engine.format)")
    }

    @Test func aRestartServesTheRenderFromDiskWithTheSameChunksAndEvents() async throws {
        try await Self.withDirectory { directory in
            let engine = FakeRenderer()
            let before = RenderCache(capacity: 1 << 20, diskDirectory: directory, diskCapacity: 1 << 20)
            let made = try await Self.say(
                "Gate twelve", with: CachingRenderer(base: engine, cache: before, identity: "test"))
            #expect(before.statistics.diskEntries == 1 && before.statistics.diskBytes > 6_000)
            #expect(Self.files(in: directory).count == 1)

            let after = RenderCache(capacity: 1 << 20, diskDirectory: directory, diskCapacity: 1 << 20)
            #expect(after.statistics.diskEntries == 1, "listed at the start")
            let renderer = CachingRenderer(base: engine, cache: after, identity: "test")
            let read = try await Self.say("Gate twelve", with: renderer)
            #expect(read == made)
            #expect(read.flatMap(\.events) == made.flatMap(\.events) && read.flatMap(\.events).count == 3)
            #expect(engine.counts.renders == 1, "not rendered again")
            #expect(after.statistics.diskHits == 1 && after.statistics.misses == 0 && after.statistics.hits == 0)
            // Kept in memory again: the next one is a memory hit.
            _ = try await Self.say("Gate twelve", with: renderer)
            #expect(after.statistics.hits == 1 && after.statistics.diskHits == 1 && after.statistics.entries == 1)
        }
    }

    @Test func anotherIdentityOrVoiceIsNeverServedFromDisk() async throws {
        try await Self.withDirectory { directory in
            let engine = FakeRenderer()
            let cache = RenderCache(capacity: 0, diskDirectory: directory, diskCapacity: 1 << 20)
            let old = CachingRenderer(base: engine, cache: cache, identity: "espeak-ng 1.51; files 0a1b")
            _ = try await Self.say("Gate", with: old)
            // After a restart with new data, or another engine version.
            for identity in ["espeak-ng 1.51; files 9f8e", "espeak-ng 1.52; files 0a1b"] {
                let restarted = RenderCache(capacity: 0, diskDirectory: directory, diskCapacity: 1 << 20)
                _ = try await Self.say(
                    "Gate", with: CachingRenderer(base: engine, cache: restarted, identity: identity))
                #expect(restarted.statistics.diskHits == 0 && restarted.statistics.misses == 1)
            }
            // Another voice.
            let restarted = RenderCache(capacity: 0, diskDirectory: directory, diskCapacity: 1 << 20)
            let renderer = CachingRenderer(base: engine, cache: restarted, identity: "espeak-ng 1.51; files 0a1b")
            var defaults = SpeechAttributes()
            defaults.voice = "roa/pt"
            _ = try await RenderCacheTests.collect(
                renderer.render(try await renderer.prepare(Utterance("Gate", defaults: defaults))))
            #expect(restarted.statistics.diskHits == 0)
            #expect(engine.counts.renders == 4)
            // The first, unchanged, is still there.
            _ = try await Self.say("Gate", with: renderer)
            #expect(restarted.statistics.diskHits == 1 && engine.counts.renders == 4)
        }
    }

    /// A file under a key's name that holds another key (a collision of names, or a file put
    /// there by hand) is a miss, never that key's sound.
    @Test func aFileOfAnotherKeyUnderTheNameIsNotServed() async throws {
        try await Self.withDirectory { directory in
            let disk = try #require(
                RenderCacheDisk(directory: directory, capacity: 1 << 20, logger: Logger(label: "test")))
            let gate = RenderCacheDisk.Key(bytes: Array("Gate".utf8))
            let platform = RenderCacheDisk.Key(bytes: Array("Platform".utf8))
            disk.write(RenderCacheFileTests.chunks, for: gate)
            try FileManager.default.copyItem(
                atPath: "\(directory)/\(gate.name).render", toPath: "\(directory)/\(platform.name).render")
            let reopened = try #require(
                RenderCacheDisk(directory: directory, capacity: 1 << 20, logger: Logger(label: "test")))
            #expect(reopened.mayHold(platform))
            #expect(reopened.read(platform) == nil)
            #expect(reopened.read(gate) == RenderCacheFileTests.chunks)
        }
    }

    @Test func aPrivateRenderLeavesNoFile() async throws {
        try await Self.withDirectory { directory in
            let engine = FakeRenderer()
            let cache = RenderCache(capacity: 1 << 20, diskDirectory: directory, diskCapacity: 1 << 20)
            let renderer = CachingRenderer(base: engine, cache: cache, identity: "test")
            var secret = try await renderer.prepare(Utterance("Your code is 4711"))
            secret.isPrivate = true
            _ = try await RenderCacheTests.collect(renderer.render(secret))
            _ = try await RenderCacheTests.collect(renderer.render(secret))
            #expect(engine.counts.renders == 2)
            #expect(Self.files(in: directory).isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty, "no file of any kind")
            #expect(cache.statistics.diskEntries == 0 && cache.statistics.diskHits == 0)
        }
    }

    @Test func theLeastRecentlyUsedFileGoesFirstAcrossARestart() async throws {
        try await Self.withDirectory { directory in
            let engine = FakeRenderer()
            // Each file is a little over 6,000 bytes (3 × 1,000 samples, events, key): room for four.
            let probe = RenderCache(capacity: 0, diskDirectory: directory + "-probe", diskCapacity: 1 << 20)
            defer { try? FileManager.default.removeItem(atPath: directory + "-probe") }
            _ = try await Self.say(
                "One", with: CachingRenderer(base: FakeRenderer(), cache: probe, identity: "test"))
            let size = probe.statistics.diskBytes
            let capacity = size * 4 + size / 2
            func renderer() -> (RenderCache, CachingRenderer) {
                let cache = RenderCache(capacity: 0, diskDirectory: directory, diskCapacity: capacity)
                return (cache, CachingRenderer(base: engine, cache: cache, identity: "test"))
            }
            var (cache, caching) = renderer()
            for text in ["One", "Two", "Three", "Four"] {
                _ = try await Self.say(text, with: caching)
                // File times are as coarse as the kernel's tick.
                try await Task.sleep(for: .milliseconds(30))
            }
            #expect(cache.statistics.diskEntries == 4 && cache.statistics.diskEvictions == 0)
            // "One" is used again, so "Two" is the least recently used, after a restart too.
            _ = try await Self.say("One", with: caching)
            #expect(cache.statistics.diskHits == 1)
            try await Task.sleep(for: .milliseconds(30))
            (cache, caching) = renderer()
            _ = try await Self.say("Five", with: caching)
            #expect(cache.statistics.diskEvictions == 1 && cache.statistics.diskEntries == 4, "\(cache.statistics)")
            #expect(cache.statistics.diskBytes <= capacity)
            #expect(Self.files(in: directory).count == 4)
            let before = engine.counts.renders
            _ = try await Self.say("One", with: caching)
            #expect(engine.counts.renders == before, "One stayed")
            _ = try await Self.say("Two", with: caching)
            #expect(engine.counts.renders == before + 1, "Two was evicted")
            // A smaller bound at the next start evicts the least recently used at once.
            let smaller = RenderCache(capacity: 0, diskDirectory: directory, diskCapacity: size * 2 + size / 2)
            #expect(smaller.statistics.diskEntries == 2 && smaller.statistics.diskEvictions == 2)
            #expect(Self.files(in: directory).count == 2)
        }
    }

    /// A directory that disappears (as a full or read-only disk would fail a write) turns the
    /// tier off with one warning; every render is still spoken, and kept in memory.
    @Test func aDiskErrorLeavesTheCacheInMemoryWithOneWarning() async throws {
        try await Self.withDirectory { directory in
            let engine = FakeRenderer()
            let warnings = Warnings()
            let cache = RenderCache(
                capacity: 1 << 20, diskDirectory: directory, diskCapacity: 1 << 20,
                logger: Logger(label: "test") { _ in warnings })
            let renderer = CachingRenderer(base: engine, cache: cache, identity: "test")
            try FileManager.default.removeItem(atPath: directory)
            for text in ["One", "Two", "One"] {
                #expect(try await Self.say(text, with: renderer).count == 3)
            }
            #expect(engine.counts.renders == 2)
            #expect(cache.statistics.hits == 1 && cache.statistics.entries == 2)
            #expect(warnings.messages.withLock { $0 }.count == 1, "\(warnings.messages.withLock { $0 })")
            #expect(!FileManager.default.fileExists(atPath: directory))
        }
    }

    /// A directory that cannot be made leaves the cache in memory only.
    @Test func anUnusableDirectoryLeavesTheCacheInMemory() async throws {
        try await Self.withDirectory { directory in
            try Data().write(to: URL(fileURLWithPath: directory))
            let cache = RenderCache(
                capacity: 1 << 20, diskDirectory: directory + "/render-cache", diskCapacity: 1 << 20)
            #expect(!cache.keepsRendersOnDisk && cache.isEnabled)
        }
    }

    /// A symbolic link at `render-cache` (to a directory of anyone's) is refused with a warning
    /// naming it, and nothing is written through it; so is a directory others may write to.
    @Test func aSymlinkedOrOpenDirectoryIsNeverWrittenThrough() async throws {
        try await Self.withDirectory { state in
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            let target = state + "/elsewhere"
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: state + "/render-cache", withDestinationPath: target)
            let warnings = Warnings()
            let engine = FakeRenderer()
            let cache = RenderCache(
                capacity: 1 << 20, diskDirectory: state + "/render-cache", diskCapacity: 1 << 20,
                logger: Logger(label: "test") { _ in warnings })
            #expect(!cache.keepsRendersOnDisk && cache.isEnabled)
            _ = try await Self.say("Platform four", with: CachingRenderer(base: engine, cache: cache, identity: "t"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: target).isEmpty)
            #expect(warnings.messages.withLock { $0 }.count == 1)

            let open = state + "/open"
            try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true)
            chmod(open, 0o777)
            let refused = RenderCache(capacity: 1 << 20, diskDirectory: open, diskCapacity: 1 << 20)
            #expect(!refused.keepsRendersOnDisk)
        }
    }

    /// A render's file is opened without following a link: one planted under a render's name is
    /// not read through.
    @Test func aLinkUnderARendersNameIsNotReadThrough() async throws {
        try await Self.withDirectory { directory in
            let outside = directory + ".outside"
            FileManager.default.createFile(atPath: outside, contents: Data(repeating: 7, count: 64))
            defer { try? FileManager.default.removeItem(atPath: outside) }
            #expect(throws: RenderCacheDisk.DiskError.self) {
                _ = try RenderCacheDisk.readFile(outside + "x", limit: 1)
            }
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let link = directory + "/x" + RenderCacheDisk.suffix
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: outside)
            #expect(throws: RenderCacheDisk.DiskError.self) { _ = try RenderCacheDisk.readFile(link, limit: 1 << 20) }
            #expect(throws: RenderCacheDisk.DiskError.self) { try RenderCacheDisk.writeFile(link, [1, 2, 3]) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == Data(repeating: 7, count: 64))
        }
    }
}

/// Counts the warnings logged to it.
final class Warnings: LogHandler, @unchecked Sendable {
    // @unchecked Sendable: `messages` is a Mutex; the rest is set once, before logging starts.
    let messages = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if event.level == .warning { messages.withLock { $0.append("\(event.message)") } }
    }
}
