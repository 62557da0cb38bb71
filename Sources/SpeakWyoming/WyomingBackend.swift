import SpeakAPI
import SpeakService
import SpeechModel
import SpeechRendering

/// What the Wyoming front needs of the daemon: its voices, a render as `POST /v1/speech` makes
/// one, and an announcement of recorded audio. The daemon's service conforms; tests pass a fake.
///
/// Every error is the `ErrorResponse` the HTTP API would answer with, so a Wyoming `error`
/// event carries the same `code` as the HTTP body.
public protocol WyomingBackend: Sendable {
    /// Every voice a `synthesize` may name, espeak-ng's and Piper's.
    func voices() async throws(ErrorResponse) -> [WyomingVoice]

    /// Checks and starts rendering `speech` as `POST /v1/speech` renders a body, at the
    /// output's loudness, and records it where every render is recorded.
    /// - Returns: the format of every chunk, and the chunks as they are rendered; the stream
    ///   throws an `ErrorResponse` (or another error, reported as `internalError`), and
    ///   dropping it stops the render.
    /// - Throws: a refusal before any audio (an unknown voice, an empty text, a full render
    ///   slot), as `POST /v1/speech` would refuse it.
    func render(_ speech: WyomingSpeech) async throws(ErrorResponse) -> SpeechRender

    /// Queues `recording` as one announcement on the output `output` (an output or a zone
    /// group), with that output's priority, chime, ducking and loudness, from `origin`.
    /// - Returns: its `finished` event, once it has finished however it did.
    /// - Throws: a refusal (an unknown output, a full queue), as `POST /v1/announcements`
    ///   would refuse it.
    func announce(
        _ recording: WyomingRecording, output: String, origin: AnnouncementOrigin
    ) async throws(ErrorResponse) -> AnnouncementEvent
}

/// A voice as `describe` lists it.
public struct WyomingVoice: Sendable, Hashable {
    /// The name a `synthesize` gives to choose it: the name `"voice"` takes in a request body.
    public var name: String
    /// The BCP 47 tags it speaks, most specific first.
    public var languages: [String]
    /// A line for a person (its engine, its quality).
    public var description: String
    /// Its engine's version, when known.
    public var version: String?
}

/// What a `synthesize` asks for: a text, and the voice or language of the request body's
/// `voice` and `language`.
public struct WyomingSpeech: Sendable, Hashable {
    public var text: String
    /// A voice by name; nil: the one `language` (or the default language) resolves to.
    public var voice: String?
    /// A BCP 47 tag, as the peer gave it.
    public var language: String?
}

/// Audio a peer sent to be announced: 16-bit PCM in `format`, whole.
public struct WyomingRecording: Sendable, Hashable {
    public var format: AudioFormat
    public var samples: [Int16]

    /// Its length in seconds.
    public var seconds: Double {
        Double(samples.count) / Double(max(1, format.sampleRate * format.channels))
    }
}
