import SpeechModel

/// The parts of an utterance prepared apart (`Utterance.part(spans:)`), each by the renderer
/// that speaks or plays it, gathered into what the whole utterance's `PreparedUtterance` carries:
/// one text map and the voices in span order.
public struct PreparedParts: Sendable {
    /// Where each position of the parts' engine inputs, one after another, came from in the
    /// whole utterance's text.
    public private(set) var textMap: TextOffsetMap
    /// The voices of the parts' spans, in order.
    public private(set) var voices: [VoiceInfo] = []
    /// The UTF-16 length of the text of the parts so far.
    private var textBefore = 0

    /// - Parameter utterance: the whole utterance.
    public init(of utterance: Utterance) {
        textMap = TextOffsetMap(textLength: utterance.text.utf16.count)
    }

    /// Records the next part; returns where its engine input starts in `textMap`, which its
    /// events' positions move by when it is rendered (`RenderedPart.positionOffset`).
    public mutating func append(_ prepared: PreparedUtterance) -> Int {
        let offset = textMap.count
        if let map = prepared.textMap { textMap.append(map, at: textBefore) }
        voices += prepared.voices
        textBefore += prepared.utterance.text.utf16.count
        return offset
    }
}

/// One part of an utterance as it is played in order with the others.
public struct RenderedPart: Sendable {
    /// Where the part's engine input starts in the whole utterance's `TextOffsetMap`.
    public var positionOffset: Int
    /// Renders the part.
    public var render: @Sendable () -> AsyncThrowingStream<PCMChunk, any Error>

    public init(positionOffset: Int, render: @escaping @Sendable () -> AsyncThrowingStream<PCMChunk, any Error>) {
        self.positionOffset = positionOffset
        self.render = render
    }
}

extension AsyncThrowingStream where Element == PCMChunk, Failure == any Error {
    /// The parts one after another: each part's events move by the samples before it and by the
    /// engine input of the parts before it, so they stay events of the whole utterance. A part
    /// is rendered only when the one before it has ended, and cancelling the stream stops it.
    /// - Parameters:
    ///   - parts: the parts, in order.
    ///   - channels: the channels of the renderers' format, to count frames.
    public static func concatenating(_ parts: [RenderedPart], channels: Int) -> Self {
        let (stream, continuation) = makeStream(of: PCMChunk.self, throwing: (any Error).self)
        let task = Task {
            do {
                var framesBefore = 0
                for part in parts {
                    // A part's event positions count from its own first frame.
                    let partStart = framesBefore
                    for try await chunk in part.render() {
                        var moved = chunk
                        moved.events = chunk.events.map { event in
                            var event = event
                            event.sample += partStart
                            if event.textPosition > 0 { event.textPosition += part.positionOffset }
                            return event
                        }
                        framesBefore += chunk.samples.count / channels
                        continuation.yield(moved)
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
