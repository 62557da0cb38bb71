import Foundation
import SpeechModel
import Testing

@testable import SpeechRendering

/// The render cache's key on disk and its file format, written and read by hand.
struct RenderCacheFileTests {
    static let chunks = [
        PCMChunk(
            samples: [0, 1, -1, .max, .min, 12_345],
            events: [
                EngineEvent(kind: .sentence, sample: 0, textPosition: 1),
                EngineEvent(kind: .word, sample: 0, textPosition: 1, length: 8),
                EngineEvent(kind: .mark, sample: 3, textPosition: 0, name: "m:gate-ä"),
            ]),
        PCMChunk(samples: []),
        PCMChunk(
            samples: Array(repeating: -7, count: 1_000),
            events: [EngineEvent(kind: .word, sample: 9_000, textPosition: 10)]),
        // A clip's: at the output's loudness already, so its gain must not be applied again.
        PCMChunk(
            samples: Array(repeating: 300, count: 50),
            events: [EngineEvent(kind: .clip, sample: 10_000, textPosition: 0, name: "gong")], isLevelled: true),
    ]

    @Test func theFileFormatKeepsSamplesAndEvents() throws {
        let key = Array("a key".utf8)
        let bytes = RenderCacheFile.encode(Self.chunks, key: key)
        #expect(Array(bytes.prefix(8)) == Array("speakdRC".utf8))
        let read = try RenderCacheFile.decode(bytes, key: key)
        #expect(read == Self.chunks)
        #expect(read?.flatMap(\.events) == Self.chunks.flatMap(\.events))
        #expect(read?.map(\.isLevelled) == [false, false, false, true])
        #expect(try RenderCacheFile.decode(bytes, key: Array("another key".utf8)) == nil, "another key is not served")
        #expect(try RenderCacheFile.decode(RenderCacheFile.encode([], key: []), key: []) == [])
    }

    /// Cut short anywhere, or one byte changed anywhere: refused, never served.
    @Test func aCutOrDamagedFileIsRefused() throws {
        let key = Array("a key".utf8)
        let bytes = RenderCacheFile.encode(Self.chunks, key: key)
        for length in [0, 1, 8, 10, 20, bytes.count / 2, bytes.count - 9, bytes.count - 1] {
            #expect(throws: RenderCacheFile.Damage.self) {
                try RenderCacheFile.decode(Array(bytes.prefix(length)), key: key)
            }
        }
        for offset in stride(from: 0, to: bytes.count, by: 97) {
            var damaged = bytes
            damaged[offset] ^= 0x5A
            #expect(throws: RenderCacheFile.Damage.self) { try RenderCacheFile.decode(damaged, key: key) }
        }
        #expect(throws: RenderCacheFile.Damage.self) { try RenderCacheFile.decode(bytes + [0], key: key) }
    }

    /// The key on disk does not depend on the order a dictionary was filled in, and differs
    /// with any value.
    @Test func theKeyIsTheSameBytesForTheSameUtterance() async throws {
        var forward = Utterance(spans: [Span("One. Two. Three. Four. Five.")])
        var backward = forward
        for offset in [5, 10, 17, 23] { forward.boundaries[offset] = offset == 17 ? .paragraph : .sentence }
        backward.boundaries.reserveCapacity(64)
        for offset in [23, 17, 10, 5] { backward.boundaries[offset] = offset == 17 ? .paragraph : .sentence }
        func bytes(_ utterance: Utterance) -> [UInt8] {
            var key = RenderKeyWriter()
            key.write(utterance)
            return key.bytes
        }
        #expect(bytes(forward) == bytes(backward))
        var louder = forward
        louder.defaults.volume = 1.5
        #expect(bytes(louder) != bytes(forward))
        #expect(RenderKeyHash.name(of: bytes(forward)).count == 32)
        #expect(RenderKeyHash.name(of: bytes(forward)) != RenderKeyHash.name(of: bytes(louder)))
        // An engine input that cannot be written keeps the render in memory only.
        struct Opaque: Hashable, Sendable {}
        var key = RenderKeyWriter()
        key.write(PreparedUtterance(utterance: forward, voices: [], engineInput: Opaque()))
        #expect(!key.isComplete)
    }
}
