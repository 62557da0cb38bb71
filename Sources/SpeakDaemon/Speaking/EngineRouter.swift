import PiperEngine
import SpeechModel
import SpeechRendering

/// The daemon's renderer: espeak-ng (`primary`) for every utterance that names no voice, exactly as
/// before, and Piper for utterances whose spans name a Piper voice (`"voice"`).
///
/// A voice by name is a Piper voice's name or an espeak-ng voice's identifier (`roa/pt`); a name
/// that no engine has is refused with 422 naming the field (`voice`, `spans[1].voice`), whether
/// Piper runs or not: a voice is never silently replaced.
///
/// One utterance may be spoken by both engines, in order. A span goes to espeak-ng when it names
/// no Piper voice (neither itself nor the utterance does), or when it inherits the utterance's Piper
/// voice but sets a language of its own that the voice does not speak (an English Piper
/// utterance with a `pt-PT` station name). A span that names a voice and a language the voice
/// does not speak at the same level is refused, as is an utterance-wide language the utterance's
/// voice does not speak. Consecutive spans of one engine are rendered as one part, and the
/// parts' audio and events are joined (`MixedInput`).
///
/// With a default voice (`--default-voice`), an utterance that names none is spoken by it when
/// that voice can speak all of it (every span's language is the voice's or unset, and no attribute
/// it refuses is set); any other utterance is spoken as before, by the language's espeak-ng voice.
struct EngineRouter: SpeechRenderer {
    let primary: any SpeechRenderer
    let piper: PiperRenderer?
    var defaultVoice: String? = nil

    var format: AudioFormat { primary.format }
    var engineName: String { primary.engineName }

    func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        let named = utterance.spans.enumerated().compactMap { index, span -> (String, String)? in
            if let voice = span.attributes.voice { return ("spans[\(index)].voice", voice) }
            if let voice = utterance.defaults.voice { return ("voice", voice) }
            return nil
        }
        guard !named.isEmpty else {
            if let defaultVoice, let piper {
                var voiced = utterance
                voiced.defaults.voice = defaultVoice
                if let prepared = try? await piper.prepare(voiced) {
                    // The prepared utterance stays the request's own, as the queue checks.
                    return PreparedUtterance(
                        utterance: utterance, voices: prepared.voices, engineInput: prepared.engineInput,
                        textMap: prepared.textMap)
                }
            }
            return try await primary.prepare(utterance)
        }
        // A name no Piper voice has is espeak-ng's to find among its voices (`roa/pt`) or refuse.
        let runs = engineRuns(utterance)
        let defaultIsPiper = utterance.defaults.voice.map { piper?.voicesByName[$0] != nil } ?? false
        if runs.count == 1 {
            if runs[0].engine != .espeak { return try await piper!.prepare(utterance) }
            if !defaultIsPiper { return try await primary.prepare(utterance) }
        }
        var parts: [MixedInput.Part] = []
        var gathered = PreparedParts(of: utterance)
        for run in runs {
            var part = utterance.part(spans: run.spans)
            if run.engine == .espeak, defaultIsPiper {
                // Its spans are spoken by espeak-ng: the Piper voice they inherit is not theirs.
                part.defaults.voice = nil
            }
            let prepared: PreparedUtterance
            do {
                prepared = try await (run.engine == .espeak ? primary : piper!).prepare(part)
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

    func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<PCMChunk, any Error> {
        if let mixed = prepared.engineInput as? MixedInput { return render(mixed, chunking: chunking) }
        if let piper, prepared.engineInput is PiperInput { return piper.render(prepared, chunking: chunking) }
        return primary.render(prepared, chunking: chunking)
    }

    func voices() async throws -> [VoiceInfo] {
        let primaryVoices = try await primary.voices().map { voice in
            var voice = voice
            if voice.engine == nil { voice.engine = primary.engineName }
            return voice
        }
        return primaryVoices + (try await piper?.voices() ?? [])
    }

    /// The spans of `utterance` grouped into consecutive runs of one engine.
    private func engineRuns(_ utterance: Utterance) -> [(engine: MixedInput.Engine, spans: Range<Int>)] {
        var runs: [(engine: MixedInput.Engine, spans: Range<Int>)] = []
        for (index, (span, resolved)) in zip(utterance.spans, utterance.resolvedSpans).enumerated() {
            var engine = MixedInput.Engine.espeak
            if let name = resolved.attributes.voice, let voice = piper?.voicesByName[name] {
                let inheritsVoice = span.attributes.voice == nil
                if inheritsVoice, let own = span.attributes.language, !voice.speaks(own) {
                    engine = .espeak
                } else {
                    engine = .piper(name)
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
                let renderer: any SpeechRenderer = part.engine == .espeak ? primary : piper!
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
        case espeak
        case piper(String)
    }

    struct Part: Sendable, Hashable {
        var engine: Engine
        var prepared: PreparedUtterance
        /// Where the part's engine input starts in the utterance's `TextOffsetMap`.
        var positionOffset: Int
    }

    var parts: [Part]
}
