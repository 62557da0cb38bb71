import SpeechModel

/// The sample format of rendered speech: signed 16-bit little-endian PCM, interleaved.
public struct AudioFormat: Sendable, Hashable, CustomStringConvertible {
    public var sampleRate: Int
    public var channels: Int

    public init(sampleRate: Int, channels: Int = 1) {
        self.sampleRate = sampleRate
        self.channels = channels
    }

    public var bytesPerFrame: Int { 2 * channels }

    public var description: String { "s16le \(sampleRate) Hz × \(channels)" }
}

/// A block of rendered audio, in the renderer's `AudioFormat`, with what the engine reported
/// about the speech in it.
public struct PCMChunk: Sendable, Hashable {
    public var samples: [Int16]
    /// Words, sentences and marks the engine reported up to the end of these samples, in order.
    public var events: [EngineEvent]
    /// Whether the samples are already at the output's loudness (a recorded clip, brought there
    /// when it was decoded): the gain that brings the engine's speech there is not applied to them.
    public var isLevelled: Bool

    public init(samples: [Int16], events: [EngineEvent] = [], isLevelled: Bool = false) {
        self.samples = samples
        self.events = events
        self.isLevelled = isLevelled
    }
}

/// Where the engine says a word, a sentence or a mark begins in the audio it renders.
///
/// Positions refer to the engine's own input (for espeak-ng, the text or SSML it was given), not
/// yet to the announcement's text: mapping them back is the caller's part.
public struct EngineEvent: Sendable, Hashable {
    public enum Kind: UInt8, Sendable, Hashable {
        case word = 1, sentence = 2, mark = 3
        /// A recorded clip starts: `name` is the clip's. Engines never report it; the renderer
        /// that plays clips between the engine's speech does.
        case clip = 4
    }

    public var kind: Kind
    /// The first sample of it, counted from the start of the utterance's audio.
    public var sample: Int
    /// Its first character in the engine's input (espeak-ng counts characters from 1); 0 for a mark.
    public var textPosition: Int
    /// Its length in characters of the engine's input (words); 0 when the engine gives none.
    public var length: Int
    /// A mark's or a clip's name; nil for words and sentences.
    public var name: String?

    public init(kind: Kind, sample: Int, textPosition: Int, length: Int = 0, name: String? = nil) {
        self.kind = kind
        self.sample = sample
        self.textPosition = textPosition
        self.length = length
        self.name = name
    }

    /// What an engine prefixes a client's mark name with in its input, to keep it apart from
    /// marks the engine places for itself.
    public static let clientMarkPrefix = "m:"

    /// The name of a mark the client asked for (`mark` on a span, SSML `<mark/>`); nil for a
    /// word, a sentence, or a mark the engine placed for itself.
    public var clientMarkName: String? {
        guard kind == .mark, let name, name.hasPrefix(Self.clientMarkPrefix) else { return nil }
        return String(name.dropFirst(Self.clientMarkPrefix.count))
    }
}

/// Renders utterances to PCM, chunk by chunk as the synthesiser produces them.
///
/// An utterance is prepared once, where it enters (`prepare(_:)` is the validation), and the
/// prepared value travels with it to `render(_:chunking:)`, which does not compile it again.
public protocol SpeechRenderer: Sendable {
    /// The format of every chunk this renderer yields.
    var format: AudioFormat { get }
    /// The engine's name as health reports it (`espeak-ng`).
    var engineName: String { get }
    /// What the engines behind this renderer are, each as it says itself: its name, version,
    /// voices and files (`EngineIdentity`); the render cache's identity is made of them.
    var engineIdentities: [EngineIdentity] { get }

    /// Checks that `utterance` can be rendered (values in range, every language resolves to a
    /// voice, every IPA symbol is supported) and compiles it to the engine's input, without
    /// rendering it; the error names the field.
    func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance

    /// Renders `prepared`, which this renderer (or the engine behind it) prepared, cut into
    /// chunks as `chunking` says. Chunks arrive as they are synthesised; cancelling the
    /// consuming task (or dropping the stream) stops synthesis mid-utterance. Errors are thrown
    /// by the stream.
    func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<PCMChunk, any Error>

    /// The voices available, each with the BCP 47 tags that resolve to it.
    func voices() async throws -> [VoiceInfo]
}

extension SpeechRenderer {
    /// A renderer that does not say which engine it is.
    public var engineName: String { "renderer" }
    /// An engine that says its name only.
    public var engineIdentities: [EngineIdentity] { [EngineIdentity(name: engineName)] }

    /// Renders `prepared` for playback (`.streaming`).
    public func render(_ prepared: PreparedUtterance) -> AsyncThrowingStream<PCMChunk, any Error> {
        render(prepared, chunking: .streaming)
    }
}

extension AsyncThrowingStream where Element == PCMChunk, Failure == any Error {
    /// A render made before (the render cache's, a schedule's rendered ahead of its slot),
    /// played again as the stream a render yields.
    public static func replaying(_ chunks: [PCMChunk]) -> Self {
        Self { continuation in
            for chunk in chunks { continuation.yield(chunk) }
            continuation.finish()
        }
    }

    /// A render refused before it started: the stream fails at once with `error`.
    public static func failing(_ error: any Error) -> Self {
        Self { $0.finish(throwing: error) }
    }

    /// The render `start` begins, or, when `start` throws before it begins (an utterance another
    /// kind of renderer prepared, an input that does not check out), a stream that fails at once
    /// with that error.
    public static func starting(_ start: () throws -> Self) -> Self {
        do {
            return try start()
        } catch {
            return failing(error)
        }
    }
}

/// An utterance a renderer has validated and compiled: what the engine is given, the voices it
/// resolved, and the utterance itself, carried together from the edge to the engine so nothing
/// on the way validates or compiles it again.
public struct PreparedUtterance: Sendable, Hashable {
    /// The utterance as it was given (its text, for events and for mapping engine positions back).
    public let utterance: Utterance
    /// The voice each span is spoken with, in span order.
    public let voices: [VoiceInfo]
    /// The engine's compiled input (espeak-ng: its SSML or text, voice and parameters). Only the
    /// renderer that made it reads it: other layers carry it without knowing its type.
    public let engineInput: any Sendable & Hashable
    /// Where each position of `engineInput` came from in `utterance.text`, to report the engine's
    /// word, sentence and mark events as ranges of the text; nil when the renderer made none.
    /// It stays with the daemon: an engine worker is given only the input.
    public let textMap: TextOffsetMap?
    /// A private announcement's (`"private": true`): no log line may show its text.
    public var isPrivate = false

    /// - Parameters:
    ///   - utterance: the utterance that was prepared.
    ///   - voices: the voice of each span.
    ///   - engineInput: what the renderer compiled it to.
    ///   - textMap: where each position of `engineInput` came from in the utterance's text.
    public init(
        utterance: Utterance, voices: [VoiceInfo], engineInput: any Sendable & Hashable,
        textMap: TextOffsetMap? = nil
    ) {
        self.utterance = utterance
        self.voices = voices
        self.engineInput = engineInput
        self.textMap = textMap
    }

    /// The voice it is spoken with, as the `finished` event reports it: the first span's.
    public var voice: String? { voices.first?.identifier }

    /// The engine input as `type`; a `ForeignPreparationError` when another kind of renderer
    /// prepared it.
    public func input<Input: Sendable & Hashable>(as type: Input.Type) throws(ForeignPreparationError) -> Input {
        guard let input = engineInput as? Input else {
            throw ForeignPreparationError(expected: "\(Input.self)", found: "\(Swift.type(of: engineInput))")
        }
        return input
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.utterance == rhs.utterance && lhs.voices == rhs.voices
            && AnyHashable(lhs.engineInput) == AnyHashable(rhs.engineInput)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(utterance)
        hasher.combine(voices)
        hasher.combine(AnyHashable(engineInput))
    }
}

/// A renderer was given an utterance that a different kind of renderer prepared: a wiring
/// mistake, not bad input.
public struct ForeignPreparationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The engine input the renderer reads.
    public let expected: String
    /// The engine input it was given.
    public let found: String

    public var description: String {
        "the utterance was prepared by another renderer (its input is \(found), not \(expected))"
    }
}

/// How a rendering is cut into chunks.
public enum RenderChunking: Sendable, Hashable {
    /// The first block as soon as it is made (time to first sound), later ones about a second
    /// long: for playback.
    case streaming
    /// As few chunks as the renderer can make: for a caller that needs all of the audio before
    /// it can use any (`POST /v1/speech`), so it is woken a few times, not once per second of
    /// audio. The first sound may come first in a chunk of its own (Piper's), for a caller that
    /// sends it on as it comes (a Wyoming `synthesize`); the samples are the same.
    case whole
}
