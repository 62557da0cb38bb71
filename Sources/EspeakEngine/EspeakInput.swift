import SpeechModel
import SpeechRendering

/// An utterance as libespeak-ng takes it: the base voice and parameters to set before synthesis,
/// and SSML for the text with every span's attributes.
///
/// What espeak-ng 1.51 was found to obey, and what the document therefore uses: the base voice is
/// set by name before synthesis; a span in another voice is wrapped in `<voice name="roa/pt">`
/// (the voice identifier, with `+variant`; `<lang>` is ignored and `xml:lang` would go through
/// espeak's own language matcher, which the resolver replaces); pitch and volume as absolute
/// `<prosody>` values; a span's rate relative to the base rate (`<prosody rate>` absolute values
/// run faster than the same words-per-minute parameter); `<tts:style field="punctuation">`;
/// `<say-as interpret-as="characters">`; `<break time>`; `[[…]]` phonemes; and `<s>` around each
/// sentence when there are several spans, because prosody changes leak across sentence
/// boundaries without it, or when markup divides the text (`Utterance.boundaries`), because
/// `</s><s>` is what ends a sentence that has no final punctuation.
///
/// User text never reaches espeak-ng as markup: `escape(_:)` turns it into character data that
/// cannot open a tag, an entity, an embedded command (`\u{01}`) or phoneme input (`[[`).
public struct EspeakInput: Sendable, Hashable {
    /// The voice to load with `espeak_SetVoiceByName` (`gmw/en`, `roa/pt+speakd-kiosk`).
    public let voice: String
    /// Base speaking rate, words per minute.
    public let rate: Int
    /// Base volume, espeak-ng's 0–200 scale (100 normal).
    public let volume: Int
    /// The text to synthesise: an SSML document when `isMarkup` (synthesised with
    /// `espeakSSML | espeakPHONEMES`), otherwise plain text (synthesised with neither).
    public let text: String
    public let isMarkup: Bool
    /// True when a span switches to another voice inside the document.
    public let switchesVoice: Bool

    /// An input as `make` built it, rebuilt field by field where it is received (an engine
    /// worker reading its job frame). Only `make` turns user text into an input: `text` is given
    /// to espeak-ng as it is, markup and all.
    public init(voice: String, rate: Int, volume: Int, text: String, isMarkup: Bool, switchesVoice: Bool) {
        self.voice = voice
        self.rate = rate
        self.volume = volume
        self.text = text
        self.isMarkup = isMarkup
        self.switchesVoice = switchesVoice
    }

    /// espeak-ng's normal rate, which `rate` 1.0 means.
    static let normalWordsPerMinute = 175.0

    /// Builds the input for `utterance`, resolving every span's language with `resolver`; with it,
    /// the voice of each span, in span order.
    ///
    /// - Parameters:
    ///   - defaultPunctuation: whether punctuation is spoken in spans that do not say.
    ///   - variant: the espeak variant for voices that name none (`speakd-kiosk`).
    ///   - marks: whether each span starts with `<mark name="INDEX"/>`, so its audio position is reported.
    /// - Returns: the input; the voice of each span; and where each scalar of the input's text
    ///   came from in `utterance.text`, to map espeak-ng's event positions back to it.
    static func make(
        _ utterance: Utterance, resolver: any VoiceResolving, defaultPunctuation: Bool, variant: String?,
        marks: Bool = false
    ) throws(SpeechInputError) -> (input: EspeakInput, spanVoices: [VoiceInfo], textMap: TextOffsetMap) {
        try utterance.validate()
        let spans = utterance.resolvedSpans
        let voices = try SpanVoices(utterance, spans: spans, resolver: resolver, variant: variant)
        let base = BaseParameters(spans: spans)
        if !marks,
            let (input, textMap) = plainInput(
                utterance, spans: spans, voice: voices.base, base: base, defaultPunctuation: defaultPunctuation)
        {
            return (input, voices.voices, textMap)
        }
        let (text, textMap) = markup(
            utterance, spans: spans, voices: voices, base: base, defaultPunctuation: defaultPunctuation,
            marks: marks)
        let input = EspeakInput(
            voice: voices.base, rate: base.wordsPerMinute, volume: base.espeakVolume, text: text, isMarkup: true,
            switchesVoice: Set(voices.names).count > 1)
        return (input, voices.voices, textMap)
    }

    /// The voice each span resolved to, its espeak-ng name, and the phonemes of spans given in IPA.
    private struct SpanVoices {
        /// The voice `name` (its identifier, as `GET /v1/voices` lists it: `roa/pt`), which must
        /// speak `language` when the span has one (the language subtags match).
        static func named(
            _ name: String, field: String, for language: LanguageTag?, in resolver: any VoiceResolving
        ) throws(SpeechInputError) -> VoiceInfo {
            guard let voice = resolver.servedVoices.first(where: { $0.identifier == name }) else {
                throw .notFound(
                    field: field,
                    "no voice is called '\(name)' (espeak-ng's by their identifier, such as roa/pt, and Piper's by "
                        + "name: GET /v1/voices, speak voices)")
            }
            if let language {
                let wanted = language.canonical.split(separator: "-").first.map { $0.lowercased() }
                let speaks = voice.languages.contains {
                    $0.split(separator: "-").first.map { $0.lowercased() } == wanted
                }
                guard speaks else {
                    throw .unsupported(
                        field: field,
                        "voice '\(name)' speaks \(voice.languages.joined(separator: ", ")), not \(language.canonical)")
                }
            }
            return voice
        }

        var voices: [VoiceInfo] = []
        /// The name to load for each span (`roa/pt+speakd-kiosk`).
        var names: [String] = []
        var phonemes: [String?] = []
        /// The voice espeak-ng is set up with: the first span's, or the utterance's language's.
        var base: String

        init(
            _ utterance: Utterance, spans: [Span], resolver: any VoiceResolving, variant: String?
        ) throws(SpeechInputError) {
            func name(_ voice: VoiceInfo) -> String {
                (voice.variant ?? variant).map { "\(voice.identifier)+\($0)" } ?? voice.identifier
            }
            for (index, span) in spans.enumerated() {
                // A language inherited from the utterance is the utterance's field, not the span's.
                let languageField =
                    utterance.spans[index].attributes.language == nil ? "language" : "spans[\(index)].language"
                if let name = span.attributes.voice {
                    let voiceField = utterance.spans[index].attributes.voice == nil ? "voice" : "spans[\(index)].voice"
                    voices.append(try Self.named(name, field: voiceField, for: span.attributes.language, in: resolver))
                } else {
                    do {
                        voices.append(try resolver.voice(for: span.attributes.language))
                    } catch {
                        throw error.field == nil
                            ? .notFound(field: languageField, error.message)
                            : error.renamed(from: "language", to: languageField)
                    }
                }
                if let ipa = span.attributes.ipa {
                    let ipaField = utterance.spans[index].attributes.ipa == nil ? "ipa" : "spans[\(index)].ipa"
                    do {
                        phonemes.append(try IPATranscriber.espeakPhonemes(ipa))
                    } catch {
                        throw error.renamed(from: "ipa", to: ipaField)
                    }
                } else {
                    phonemes.append(nil)
                }
            }
            names = voices.map(name)
            // An utterance without spans still needs a voice for espeak-ng to be set up with.
            if let first = names.first {
                base = first
            } else {
                do {
                    base = name(try resolver.voice(for: utterance.defaults.language))
                } catch {
                    throw error.field == nil ? .notFound(field: "language", error.message) : error
                }
            }
        }
    }

    /// The rate and volume espeak-ng is set to before the document; spans that differ say so in
    /// `<prosody>` relative to these.
    private struct BaseParameters {
        var rate: Double
        /// espeak-ng saturates its own output above volume 100, so louder is applied after it
        /// (the daemon's limiter, `EngineSpeaker`); here it is capped at 1.0.
        var volume: Double

        init(spans: [Span]) {
            rate = spans.first?.attributes.rate ?? 1
            volume = min(spans.first?.attributes.volume ?? 1, 1)
        }

        var wordsPerMinute: Int { Int((EspeakInput.normalWordsPerMinute * rate).rounded()) }
        var espeakVolume: Int { Int((volume * 100).rounded()) }
    }

    /// The UTF-16 offset in the utterance's text of each character offset the boundaries use.
    private static func utf16Offsets(of spans: [Span]) -> [Int] {
        var offsets = [0]
        for span in spans {
            for character in span.text { offsets.append(offsets.last! + character.utf16.count) }
        }
        return offsets
    }

    /// One span with nothing for markup to say, as plain text: espeak-ng renders it with less CPU
    /// (see speakd-engine-bench), and without `espeakSSML | espeakPHONEMES` it reads `<`, `&` and
    /// `[[` as text. Only the control characters need replacing. Nil when markup is needed.
    private static func plainInput(
        _ utterance: Utterance, spans: [Span], voice: String, base: BaseParameters, defaultPunctuation: Bool
    ) -> (EspeakInput, TextOffsetMap)? {
        guard spans.count == 1, let span = spans.first, span.mark == nil, span.attributes.ipa == nil,
            span.attributes.spellOut != true, !(span.attributes.punctuation ?? defaultPunctuation),
            (span.attributes.pitch ?? 1) == 1, (span.pauseAfter ?? 0) <= 0, utterance.boundaries.isEmpty
        else { return nil }
        let offsets = utf16Offsets(of: spans)
        var textMap = TextOffsetMap(textLength: offsets.last!)
        let input = EspeakInput(
            voice: voice, rate: base.wordsPerMinute, volume: base.espeakVolume, text: plain(span.text),
            isMarkup: false, switchesVoice: false)
        // `plain` replaces scalar for scalar.
        var offset = 0
        for scalar in span.text.unicodeScalars {
            textMap.append(scalars: 1, from: offset..<offset + UTF16.width(scalar))
            offset += UTF16.width(scalar)
        }
        for start in sentenceStarts(in: [span.text]).sorted() { textMap.noteSentenceStart(offsets[start]) }
        return (input, textMap)
    }

    /// An SSML document being written, with where each scalar of it came from in the text.
    private struct MarkupWriter {
        var ssml = ""
        var textMap: TextOffsetMap

        /// Appends to the document, noting where it came from in the text (nil: markup).
        mutating func emit(_ part: String, from source: Range<Int>? = nil) {
            ssml += part
            textMap.append(scalars: part.unicodeScalars.count, from: source)
        }

        /// Appends `piece` of the text, starting at UTF-16 offset `start`, as `content` writes
        /// it, character by character so each maps back to its own place.
        mutating func emitContent(_ piece: Substring, at start: Int, spellsOut: Bool) {
            var location = start
            var wroteAny = false
            for character in piece {
                let width = character.utf16.count
                defer { location += width }
                if spellsOut {
                    if character.isWhitespace { continue }
                    if wroteAny { emit(" ") }
                }
                emit(escape(String(character)), from: location..<location + width)
                wroteAny = true
            }
        }
    }

    /// The tags that open and close a span's text: its voice when it is not the base voice, its
    /// prosody where it differs, punctuation, and spelling out.
    private static func tags(
        for span: Span, voice: String, baseVoice: String, base: BaseParameters, defaultPunctuation: Bool
    ) -> (open: String, close: String) {
        let attributes = span.attributes
        var open = ""
        var close = ""
        if voice != baseVoice {
            open += "<voice name=\"\(escape(voice))\">"
            close = "</voice>" + close
        }
        var prosody: [String] = []
        if let pitch = attributes.pitch, pitch != 1 {
            prosody.append("pitch=\"\(PitchCalibration.espeakPitch(for: pitch))\"")
        }
        if let rate = attributes.rate, rate != base.rate {
            prosody.append("rate=\"\(Int((rate / base.rate * 100).rounded()))%\"")
        }
        if let volume = attributes.volume.map({ min($0, 1) }), volume != base.volume {
            prosody.append("volume=\"\(Int((volume * 100).rounded()))\"")
        }
        if !prosody.isEmpty {
            open += "<prosody \(prosody.joined(separator: " "))>"
            close = "</prosody>" + close
        }
        if attributes.punctuation ?? defaultPunctuation {
            open += "<tts:style field=\"punctuation\" mode=\"all\">"
            close = "</tts:style>" + close
        }
        if attributes.ipa == nil, attributes.spellOut == true {
            open += "<say-as interpret-as=\"characters\">"
            close = "</say-as>" + close
        }
        return (open, close)
    }

    /// The SSML document for `spans`, and where each of its scalars came from in the text.
    private static func markup(
        _ utterance: Utterance, spans: [Span], voices: SpanVoices, base: BaseParameters, defaultPunctuation: Bool,
        marks: Bool
    ) -> (String, TextOffsetMap) {
        let offsets = utf16Offsets(of: spans)
        var writer = MarkupWriter(textMap: TextOffsetMap(textLength: offsets.last!))
        // A sentence or paragraph that markup starts becomes `</s><s>` like one after a full stop:
        // espeak-ng 1.51 then ends the sentence before with falling intonation and pauses 0.59 s
        // at the normal rate, the pause its own `<p>` and `<s>` give (a full stop alone: 0.31 s).
        let boundaries = sentenceStarts(in: spans.map(\.text)).union(utterance.boundaries.keys)
        for start in boundaries.sorted() where start < offsets.count {
            writer.textMap.noteSentenceStart(offsets[start])
        }
        // Sentences are wrapped in <s> only when spans or markup make it matter: espeak-ng 1.51
        // carries prosody across sentence boundaries wrongly otherwise, and plain text parses faster.
        let sentences = spans.count > 1 || !utterance.boundaries.isEmpty
        writer.emit(sentences ? "<speak><s>" : "<speak>")
        var offset = 0
        for (index, span) in spans.enumerated() {
            let spanStart = offsets[offset]
            if sentences, index > 0, boundaries.contains(offset) {
                writer.emit("</s><s>")
            }
            if marks {
                writer.emit("<mark name=\"\(index)\"/>")
            }
            // A client's mark; the prefix keeps it apart from the span-index marks above.
            if let mark = span.mark {
                writer.emit("<mark name=\"\(EngineEvent.clientMarkPrefix)\(escape(mark))\"/>")
            }
            let (open, close) = tags(
                for: span, voice: voices.names[index], baseVoice: voices.base, base: base,
                defaultPunctuation: defaultPunctuation)
            if let phonemes = voices.phonemes[index] {
                // The display text is replaced by its pronunciation; phoneme input ends at `]]`,
                // which the transcriber never produces.
                writer.emit(open)
                writer.emit(" [[\(phonemes)]] ", from: spanStart..<spanStart + span.text.utf16.count)
                writer.emit(close)
            } else {
                let spellsOut = span.attributes.spellOut == true
                // Split the span where a sentence starts, so each sentence is its own <s>.
                var pieceStart = span.text.startIndex
                var position = offset
                for characterIndex in span.text.indices {
                    if sentences, position != offset, boundaries.contains(position) {
                        writer.emit(open)
                        writer.emitContent(
                            span.text[pieceStart..<characterIndex],
                            at: spanStart + span.text.utf16.distance(from: span.text.startIndex, to: pieceStart),
                            spellsOut: spellsOut)
                        writer.emit(close + "</s><s>")
                        pieceStart = characterIndex
                    }
                    position += 1
                }
                writer.emit(open)
                writer.emitContent(
                    span.text[pieceStart...],
                    at: spanStart + span.text.utf16.distance(from: span.text.startIndex, to: pieceStart),
                    spellsOut: spellsOut)
                writer.emit(close)
            }
            offset += span.text.count
            if let pause = span.pauseAfter, pause > 0 {
                writer.emit("<break time=\"\(Int((pause * 1000).rounded()))ms\"/>")
            }
        }
        writer.emit(sentences ? "</s></speak>" : "</speak>")
        return (writer.ssml, writer.textMap)
    }

    /// Character offsets (over the concatenated span texts) where a new sentence begins: after
    /// sentence-final punctuation and the whitespace that follows it.
    static func sentenceStarts(in texts: [String]) -> Set<Int> {
        let characters = Array(texts.joined())
        var starts: Set<Int> = []
        var index = 0
        while index < characters.count {
            if ".!?…。！？".contains(characters[index]) {
                var next = index + 1
                while next < characters.count, ".!?…。！？\"'”’)".contains(characters[next]) { next += 1 }
                var afterSpace = next
                while afterSpace < characters.count, characters[afterSpace].isWhitespace { afterSpace += 1 }
                if afterSpace > next, afterSpace < characters.count { starts.insert(afterSpace) }
                index = max(next, index + 1)
            } else {
                index += 1
            }
        }
        return starts
    }

    /// `text` as plain input: C0 and C1 control characters and DEL become spaces, because
    /// espeak-ng reads `\u{01}` as the start of an embedded command (`\u{01}90P` sets the pitch).
    static func plain(_ text: String) -> String {
        var output = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\t", "\n", "\r": output.append(scalar)
            case "\u{00}"..."\u{1F}", "\u{7F}"..."\u{9F}": output.append(" ")
            default: output.append(scalar)
            }
        }
        return String(output)
    }

    /// A span's text as SSML character data; spelled out, its characters are spaced apart,
    /// because espeak-ng 1.51 reads `<say-as interpret-as="characters">07402</say-as>` as
    /// "zero seven comma four zero two" but `0 7 4 0 2` as the five digit names.
    static func content<S: StringProtocol>(_ text: S, spellsOut: Bool) -> String {
        guard spellsOut else { return escape(text) }
        return text.split(whereSeparator: \.isWhitespace)
            .map { word in word.map { escape(String($0)) }.joined(separator: " ") }
            .joined(separator: " ")
    }

    /// `text` as SSML character data that espeak-ng speaks and never obeys.
    ///
    /// - `& < > " '` become entities, so no tag or entity can be opened.
    /// - C0 and C1 control characters and DEL become spaces: espeak-ng reads `\u{01}` as the start of
    ///   an embedded command (`\u{01}90P` sets the pitch) even in SSML mode.
    /// - `[` is followed by a space: with phoneme input enabled, `[[` starts raw phonemes, and
    ///   espeak-ng decodes entities before looking for it, so `&#91;&#91;` would not help.
    static func escape<S: StringProtocol>(_ text: S) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&apos;"
            case "[": output += "[ "
            case "\t", "\n", "\r": output.unicodeScalars.append(scalar)
            case "\u{00}"..."\u{1F}", "\u{7F}"..."\u{9F}": output += " "
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output
    }
}

extension SpeechInputError {
    /// The same error with its field `old` (or a field ending in `.old`) called `new`.
    fileprivate func renamed(from old: String, to new: String) -> SpeechInputError {
        guard let field, field == old || field.hasSuffix(".\(old)") else { return self }
        switch kind {
        case "outOfRange", "malformed": return .malformed(field: new, message)
        case "unsupported": return .unsupported(field: new, message)
        default: return .notFound(field: new, message)
        }
    }
}
