import SpeechModel

/// An engine whose voices are chosen by name (Piper's): the engine router sends it the spans
/// that name one of its voices.
public protocol NamedVoiceRenderer: SpeechRenderer {
    /// Whether it has a voice called `name`.
    func hasVoice(named name: String) -> Bool
    /// Whether its voice `name` speaks `language`.
    func voice(named name: String, speaks language: LanguageTag) -> Bool
    /// Whether it prepared `prepared` (so it renders it).
    func preparedItself(_ prepared: PreparedUtterance) -> Bool
}

/// The daemon's renderer: the primary engine (espeak-ng) for every utterance that names no voice,
/// and the engine of named voices (Piper) for utterances whose spans name one of its voices
/// (`"voice"`). It stands beside the renderer seam and knows the engines only through it.
///
/// A voice by name is a named engine's voice or a primary voice's identifier (espeak-ng's
/// `roa/pt`); a name that no engine has is refused with 422 naming the field (`voice`,
/// `spans[1].voice`), whether the named engine runs or not: a voice is never silently replaced.
///
/// One utterance may be spoken by both engines, in order. A span goes to the primary engine when
/// it names no named voice (neither itself nor the utterance does), or when it inherits the
/// utterance's named voice but sets a language of its own that the voice does not speak (an
/// English Piper utterance with a `pt-PT` station name). A span that names a voice and a language
/// the voice does not speak at the same level is refused, as is an utterance-wide language the
/// utterance's voice does not speak. Consecutive spans of one engine are rendered as one part,
/// and the parts' audio and events are joined (`MixedInput`).
///
/// With a default voice (`--default-voice`), an utterance that names none is spoken by it when
/// that voice can speak all of it (every span's language is the voice's or unset, and no attribute
/// it refuses is set); any other utterance is spoken as before, by the primary engine.
public struct EngineRouter: SpeechRenderer {
    let primary: any SpeechRenderer
    let named: (any NamedVoiceRenderer)?
    let defaultVoice: String?

    /// - Parameters:
    ///   - primary: the engine of every utterance that names no voice of `named`.
    ///   - named: the engine of named voices, if it runs.
    ///   - defaultVoice: a voice of `named` for utterances that name none (`--default-voice`).
    public init(primary: any SpeechRenderer, named: (any NamedVoiceRenderer)?, defaultVoice: String? = nil) {
        self.primary = primary
        self.named = named
        self.defaultVoice = defaultVoice
    }

    public var format: AudioFormat { primary.format }
    public var engineName: String { primary.engineName }
    public var engineIdentities: [EngineIdentity] { primary.engineIdentities + (named?.engineIdentities ?? []) }

    public func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        let namesVoice = utterance.defaults.voice != nil || utterance.spans.contains { $0.attributes.voice != nil }
        guard namesVoice else {
            if let defaultVoice, let named {
                var voiced = utterance
                voiced.defaults.voice = defaultVoice
                if let prepared = try? await named.prepare(voiced) {
                    // The prepared utterance stays the request's own, as the queue checks.
                    return PreparedUtterance(
                        utterance: utterance, voices: prepared.voices, engineInput: prepared.engineInput,
                        textMap: prepared.textMap)
                }
            }
            return try await primary.prepare(utterance)
        }
        // A name no named voice has is the primary engine's to find among its voices (`roa/pt`)
        // or refuse.
        let runs = engineRuns(utterance)
        let defaultIsNamed = utterance.defaults.voice.map { named?.hasVoice(named: $0) ?? false } ?? false
        if runs.count == 1 {
            if let named, runs[0].engine != .primary { return try await named.prepare(utterance) }
            if !defaultIsNamed { return try await primary.prepare(utterance) }
        }
        var parts: [MixedInput.Part] = []
        var gathered = PreparedParts(of: utterance)
        for run in runs {
            var part = utterance.part(spans: run.spans)
            if run.engine == .primary, defaultIsNamed {
                // Its spans are spoken by the primary engine: the named voice they inherit is
                // not theirs.
                part.defaults.voice = nil
            }
            let prepared: PreparedUtterance
            do {
                prepared = try await renderer(of: run.engine).prepare(part)
            } catch {
                throw error.reindexed(spansFrom: run.spans.lowerBound)
            }
            parts.append(
                MixedInput.Part(engine: run.engine, prepared: prepared, positionOffset: gathered.append(prepared)))
        }
        return PreparedUtterance(
            utterance: utterance, voices: gathered.voices, engineInput: MixedInput(parts: parts),
            textMap: gathered.textMap)
    }

    public func render(
        _ prepared: PreparedUtterance, chunking: RenderChunking
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        if let mixed = prepared.engineInput as? MixedInput { return render(mixed, chunking: chunking) }
        if let named, named.preparedItself(prepared) { return named.render(prepared, chunking: chunking) }
        return primary.render(prepared, chunking: chunking)
    }

    public func voices() async throws -> [VoiceInfo] {
        let primaryVoices = try await primary.voices().map { voice in
            var voice = voice
            if voice.engine == nil { voice.engine = primary.engineName }
            return voice
        }
        return primaryVoices + (try await named?.voices() ?? [])
    }

    /// The engine of a run: only `engineRuns` makes `.named` runs, and only when `named` runs.
    private func renderer(of engine: MixedInput.Engine) -> any SpeechRenderer {
        if case .named = engine, let named { return named }
        return primary
    }

    /// The spans of `utterance` grouped into consecutive runs of one engine.
    private func engineRuns(_ utterance: Utterance) -> [(engine: MixedInput.Engine, spans: Range<Int>)] {
        var runs: [(engine: MixedInput.Engine, spans: Range<Int>)] = []
        for (index, (span, resolved)) in zip(utterance.spans, utterance.resolvedSpans).enumerated() {
            var engine = MixedInput.Engine.primary
            if let name = resolved.attributes.voice, let named, named.hasVoice(named: name) {
                let inheritsVoice = span.attributes.voice == nil
                if inheritsVoice, let own = span.attributes.language, !named.voice(named: name, speaks: own) {
                    engine = .primary
                } else {
                    engine = .named(name)
                }
            }
            if let last = runs.last, last.engine == engine {
                runs[runs.count - 1].spans = last.spans.lowerBound..<(index + 1)
            } else {
                runs.append((engine, index..<(index + 1)))
            }
        }
        return runs
    }

    /// The parts one after another, each by its engine.
    private func render(_ mixed: MixedInput, chunking: RenderChunking) -> AsyncThrowingStream<PCMChunk, any Error> {
        .concatenating(
            mixed.parts.map { part in
                let renderer = renderer(of: part.engine)
                return RenderedPart(positionOffset: part.positionOffset) {
                    renderer.render(part.prepared, chunking: chunking)
                }
            }, channels: format.channels)
    }
}

/// An utterance spoken by more than one engine: each part is one engine's run of spans,
/// prepared by that engine, rendered in order.
struct MixedInput: Sendable, Hashable {
    enum Engine: Sendable, Hashable {
        /// The primary engine (espeak-ng).
        case primary
        /// The named engine, in its voice of that name.
        case named(String)
    }

    struct Part: Sendable, Hashable {
        var engine: Engine
        var prepared: PreparedUtterance
        /// Where the part's engine input starts in the utterance's `TextOffsetMap`.
        var positionOffset: Int
    }

    var parts: [Part]
}
