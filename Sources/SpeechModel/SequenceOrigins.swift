/// Where each span of an utterance decoded from a `sequence` came from, so an error found after
/// the decoding (an engine's unknown language or voice, an IPA symbol it cannot speak, a clip
/// the library has not) names the field the client wrote, `sequence[1].language` or
/// `sequence[0].spans[2].voice`, rather than the span of the joined whole (`spans[3].language`).
///
/// It takes no part in an utterance's equality or hash: two utterances that say the same are the
/// same, however they were written.
public struct SequenceOrigins: Sendable, Hashable {
    /// One span of the whole: its part, its place in that part, how the part gave its text, and
    /// which attributes the span and its part set themselves.
    struct Origin: Sendable {
        let part: Int
        let span: Int
        /// `text`, `spans` or `ssml`.
        let form: String
        let ownKeys: Set<String>
        let partKeys: Set<String>
    }

    var origins: [Origin] = []

    /// The wire keys of a span's speech attributes.
    static func keys(of attributes: SpeechAttributes) -> Set<String> {
        var keys: Set<String> = []
        if attributes.pitch != nil { keys.insert("pitch") }
        if attributes.rate != nil { keys.insert("rate") }
        if attributes.volume != nil { keys.insert("volume") }
        if attributes.punctuation != nil { keys.insert("punctuation") }
        if attributes.language != nil { keys.insert("language") }
        if attributes.spellOut != nil { keys.insert("spellOut") }
        if attributes.ipa != nil { keys.insert("ipa") }
        if attributes.voice != nil { keys.insert("voice") }
        return keys
    }

    /// `error` with a field of the whole (`spans[3].language`) named in the sequence: an
    /// attribute the span's part gave as `sequence[i].language`, one the span gave itself as
    /// `sequence[i].spans[j].language` (`sequence[i].ssml` for an SSML part), anything else of
    /// the span as `sequence[i].spans[j]…` (`sequence[i].text` for a part given as text). A
    /// field that names no span is kept.
    public func naming(_ error: SpeechInputError) -> SpeechInputError {
        guard let field = error.field, field.hasPrefix("spans["), let close = field.firstIndex(of: "]"),
            let index = Int(field[field.index(field.startIndex, offsetBy: 6)..<close]), origins.indices.contains(index)
        else { return error }
        let origin = origins[index]
        var rest = String(field[field.index(after: close)...])
        if rest.hasPrefix(".") { rest.removeFirst() }
        let key = rest.split(separator: ".", maxSplits: 1).first.map(String.init) ?? ""
        let part = "sequence[\(origin.part)]"
        if !origin.ownKeys.contains(key), origin.partKeys.contains(key) {
            return error.renamed(field: "\(part).\(rest)")
        }
        switch origin.form {
        case "spans": return error.renamed(field: "\(part).spans[\(origin.span)]" + (rest.isEmpty ? "" : ".\(rest)"))
        case "ssml": return error.renamed(field: "\(part).ssml")
        default: return error.renamed(field: "\(part).text")
        }
    }

    public static func == (_: SequenceOrigins, _: SequenceOrigins) -> Bool { true }
    public func hash(into hasher: inout Hasher) {}
}

extension Utterance {
    /// `error` named as the client wrote it: in the sequence this utterance was decoded from, or
    /// as it is when it was not one.
    public func namingInWire(_ error: SpeechInputError) -> SpeechInputError {
        sequenceOrigins.naming(error)
    }
}
