import SpeechModel
import SpeechRendering
import Synchronization

/// A fake engine that counts its renders: each utterance is `chunks` chunks of `samples`
/// samples, chunk `n` all of value `n + 1` with a word event at its start; its engine input is
/// the text, so the same text prepared twice is the same preparation (as the render cache keys it).
public struct CountingRenderer: SpeechRenderer {
    public let format = AudioFormat(sampleRate: 22_050)
    /// The chunks of each render.
    public var chunks: Int
    /// The samples of each chunk.
    public var samples: Int
    /// How many renders it started.
    public let counter = RenderCount()

    public init(chunks: Int = 3, samples: Int = 1_000) {
        self.chunks = chunks
        self.samples = samples
    }

    public func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        let voice = VoiceInfo(identifier: utterance.defaults.voice ?? "en", name: "Test", languages: ["en"])
        return PreparedUtterance(utterance: utterance, voices: [voice], engineInput: utterance.text)
    }

    public func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<
        PCMChunk, any Error
    > {
        counter.value.withLock { $0 += 1 }
        let (chunks, samples) = (chunks, samples)
        return AsyncThrowingStream { continuation in
            for index in 0..<chunks {
                continuation.yield(
                    PCMChunk(
                        samples: Array(repeating: Int16(index + 1), count: samples),
                        events: [EngineEvent(kind: .word, sample: index * samples, textPosition: index)]))
            }
            continuation.finish()
        }
    }

    public func voices() async throws -> [VoiceInfo] { [] }

    /// The renders a `CountingRenderer` started, shared by its copies.
    public final class RenderCount: Sendable {
        public let value = Mutex(0)

        public init() {}
    }
}
