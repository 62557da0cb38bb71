import CEspeakNG
import FoundationEssentials
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The synth callback: forwards each block of samples to the rendering's stream as it is produced.
///
/// A plain C function: it captures nothing and finds its rendering through `user_data`.
/// Returning 1 makes espeak-ng abort the synthesis (no end event follows).
private func espeakSynthCallback(
    _ samples: UnsafeMutablePointer<CShort>?, _ count: CInt, _ events: UnsafeMutablePointer<espeak_EVENT>?
) -> CInt {
    guard let events, let userData = events.pointee.user_data else { return 0 }
    let context = Unmanaged<RenderContext>.fromOpaque(userData).takeUnretainedValue()
    if context.shouldAbort() { return 1 }
    var event = events
    while event.pointee.type != espeakEVENT_LIST_TERMINATED {
        let sample = Int(event.pointee.audio_position) * context.sampleRate / 1000
        let position = Int(event.pointee.text_position)
        switch event.pointee.type {
        case espeakEVENT_WORD:
            context.record(
                EngineEvent(kind: .word, sample: sample, textPosition: position, length: Int(event.pointee.length)))
        case espeakEVENT_SENTENCE:
            context.record(EngineEvent(kind: .sentence, sample: sample, textPosition: position))
        case espeakEVENT_MARK:
            let name = event.pointee.id.name.map { String(cString: $0) }
            if let name, let index = Int(name) {
                context.marks.withLock { $0[index] = Int(event.pointee.audio_position) }
            }
            context.record(EngineEvent(kind: .mark, sample: sample, textPosition: position, name: name))
        default:
            break
        }
        event += 1
    }
    if let samples, count > 0 {
        context.deliver(UnsafeBufferPointer(start: samples, count: Int(count)))
    }
    return context.isCancelled ? 1 : 0
}

/// libespeak-ng's process-global state, as seen from the espeak thread: which data directory it
/// was initialised with and which voice is loaded. Only ever used on `EspeakThread`.
final class EspeakSession {
    private(set) var dataPath: String?
    private(set) var sampleRate = 22050
    private var bufferMilliseconds = 50
    private var loadedVoice: String?

    /// The data directory libespeak-ng picks when given none.
    func defaultDataPath() -> String {
        espeak_ng_InitializePath(nil)
        var path: UnsafePointer<CChar>?
        _ = espeak_Info(&path)
        let found = path.map { String(cString: $0) } ?? "/usr/share/espeak-ng-data"
        // The next `prepare` must initialise again: the path global now points at the default.
        dataPath = nil
        return found
    }

    /// Initialises libespeak-ng with the data at `path`, unless it already is.
    func prepare(dataPath path: String, bufferMilliseconds: Int) throws(EspeakError) {
        if dataPath == path, self.bufferMilliseconds == bufferMilliseconds { return }
        dataPath = nil
        loadedVoice = nil
        espeak_ng_InitializePath(path)
        var context: espeak_ng_ERROR_CONTEXT?
        let status = espeak_ng_Initialize(&context)
        espeak_ng_ClearErrorContext(&context)
        try EspeakError.check(status, "initialise with data at \(path)")
        try EspeakError.check(
            espeak_ng_InitializeOutput(ENOUTPUT_MODE_SYNCHRONOUS, CInt(bufferMilliseconds), nil),
            "initialise synchronous output")
        espeak_SetSynthCallback(espeakSynthCallback)
        sampleRate = Int(espeak_ng_GetSampleRate())
        dataPath = path
        self.bufferMilliseconds = bufferMilliseconds
    }

    /// Points libespeak-ng at the data in `path` for listing its voices only: its synthesis data
    /// is loaded by the next `prepare`. `sampleRate` stays espeak-ng's rate for its own voices.
    func prepareVoiceList(dataPath path: String) {
        if dataPath == path { return }
        dataPath = nil
        loadedVoice = nil
        espeak_ng_InitializePath(path)
    }

    /// Loads `voice` (`roa/pt`, `gmw/en+speakd-kiosk`) unless it is known to be loaded.
    ///
    /// Loading re-reads the voice and dictionary files (about 4% of the CPU time of a short
    /// announcement), so it is skipped when the previous utterance ended normally on this voice.
    func setVoice(_ voice: String) throws(EspeakError) {
        if loadedVoice == voice { return }
        loadedVoice = nil
        try EspeakError.check(espeak_ng_SetVoiceByName(voice), "set voice \(voice)")
        loadedVoice = voice
    }

    /// Forgets the loaded voice: after an aborted synthesis, an SSML voice switch, an error or
    /// direct use of libespeak-ng, espeak-ng may be left on another voice.
    func invalidateVoice() { loadedVoice = nil }

    /// Reinstalls the engine's synth callback, after code that called libespeak-ng directly.
    func restore() {
        espeak_SetSynthCallback(espeakSynthCallback)
        loadedVoice = nil
    }

    /// Sets a synthesis parameter to an absolute value.
    func set(_ parameter: espeak_PARAMETER, _ value: Int) throws(EspeakError) {
        try EspeakError.check(
            espeak_ng_SetParameter(parameter, CInt(value), 0), "set parameter \(parameter.rawValue) to \(value)")
    }

    /// Renders `input` (espeak-ng must be prepared) into `context`: loads its voice, sets every
    /// parameter (espeak_Cancel and SSML change them), synthesises and passes on what is still
    /// pending. Returns false when the consumer cancelled and synthesis was aborted.
    func render(_ input: EspeakInput, context: RenderContext) throws(EspeakError) -> Bool {
        do throws(EspeakError) {
            try setVoice(input.voice)
            try set(espeakRATE, input.rate)
            try set(espeakVOLUME, input.volume)
            try set(espeakPITCH, 50)
            try set(espeakRANGE, 50)
            let flags = (input.isMarkup ? Int32(espeakSSML | espeakPHONEMES) : 0) | Int32(espeakENDPAUSE)
            let ended = try synthesize(input.text, flags: flags, context: context)
            if input.switchesVoice { invalidateVoice() }
            if ended { context.flush() }
            return ended
        } catch {
            invalidateVoice()
            throw error
        }
    }

    /// Synthesises `text` (UTF-8, with `flags`), feeding `context`'s stream from the callback.
    /// Returns false when the consumer cancelled and synthesis was aborted.
    func synthesize(_ text: String, flags: Int32, context: RenderContext) throws(EspeakError) -> Bool {
        let unmanaged = Unmanaged.passRetained(context)
        defer { unmanaged.release() }
        let status = text.withCString { pointer in
            espeak_ng_Synthesize(
                pointer, strlen(pointer) + 1, 0, POS_CHARACTER, 0,
                UInt32(bitPattern: flags) | UInt32(espeakCHARS_UTF8), nil, unmanaged.toOpaque())
        }
        if context.isCancelled {
            // An aborted synthesis leaves its unspoken text and samples queued inside espeak-ng,
            // and they would open the next utterance: clear them (this resets the parameters,
            // which every rendering sets again anyway).
            _ = espeak_ng_Cancel()
            loadedVoice = nil
            return false
        }
        try EspeakError.check(status, "synthesise")
        return true
    }

    /// The voices in the data directory.
    func listVoices() -> [(identifier: String, name: String, languages: [String])] {
        guard let list = espeak_ListVoices(nil) else { return [] }
        var voices: [(identifier: String, name: String, languages: [String])] = []
        var index = 0
        while let voice = list[index] {
            index += 1
            let identifier = voice.pointee.identifier.map { String(cString: $0) } ?? ""
            let name = voice.pointee.name.map { String(cString: $0) } ?? identifier
            var languages: [String] = []
            if var cursor = voice.pointee.languages {
                // Pairs of (priority byte, NUL-terminated name), ended by a zero priority byte.
                while cursor.pointee != 0 {
                    cursor += 1
                    let language = String(cString: cursor)
                    languages.append(language)
                    cursor += strlen(cursor) + 1
                }
            }
            voices.append((identifier, name, languages))
        }
        return voices
    }
}
