import PiperEngine
import SpeechModel
import SpeechRendering

/// The daemon's renderer: espeak-ng (`primary`) for every utterance that names no voice, exactly as
/// before, and Piper for utterances whose spans name a Piper voice (`"voice"`).
///
/// A voice name that no engine has is refused with 422 naming the field (`voice`,
/// `spans[1].voice`), whether Piper runs or not: a voice is never silently replaced.
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
        for (field, name) in named where piper?.voicesByName[name] == nil {
            let known = piper.map { $0.voicesByName.keys.sorted().joined(separator: ", ") } ?? ""
            throw .notFound(
                field: field,
                "no voice is called '\(name)'"
                    + (known.isEmpty
                        ? " (voices are chosen by name among Piper voices, and Piper is off: speakd --piper)"
                        : "; voices by name: \(known)"))
        }
        return try await piper!.prepare(utterance)
    }

    func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<PCMChunk, any Error> {
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
}
