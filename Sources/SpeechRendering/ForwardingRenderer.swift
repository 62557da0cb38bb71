import SpeechModel

/// A renderer in front of another (`base`) that changes only some of what it does (the render
/// cache, clips): the rest is `base`'s, answered here once.
public protocol ForwardingRenderer: SpeechRenderer {
    /// The renderer behind this one.
    var base: any SpeechRenderer { get }
}

extension ForwardingRenderer {
    public var format: AudioFormat { base.format }
    public var engineName: String { base.engineName }
    public var engineIdentities: [EngineIdentity] { base.engineIdentities }

    public func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        try await base.prepare(utterance)
    }

    public func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<
        PCMChunk, any Error
    > {
        base.render(prepared, chunking: chunking)
    }

    public func voices() async throws -> [VoiceInfo] {
        try await base.voices()
    }
}
