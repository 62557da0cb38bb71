import SpeechModel

extension SpeechAttributes: RenderKeyEncodable {
    /// Every attribute, set or not, the language as its canonical tag.
    public func write(to key: inout RenderKeyWriter) {
        key.write(pitch)
        key.write(rate)
        key.write(volume)
        key.write(punctuation)
        key.write(language?.canonical)
        key.write(spellOut)
        key.write(ipa)
        key.write(voice)
    }
}

extension Span: RenderKeyEncodable {
    public func write(to key: inout RenderKeyWriter) {
        key.write(text)
        key.write(attributes)
        key.write(pauseAfter)
        key.write(mark)
        key.write(clip)
    }
}

extension Utterance: RenderKeyEncodable {
    /// The spans, the defaults, and the boundaries in the order of their offsets (a dictionary's
    /// own order changes from one process to the next).
    public func write(to key: inout RenderKeyWriter) {
        key.write(spans)
        key.write(defaults)
        key.write(boundaries.count)
        for (offset, boundary) in boundaries.sorted(by: { $0.key < $1.key }) {
            key.write(offset)
            key.write(boundary.rawValue)
        }
    }
}

extension VoiceInfo: RenderKeyEncodable {
    public func write(to key: inout RenderKeyWriter) {
        key.write(identifier)
        key.write(name)
        key.write(languages)
        key.write(variant)
        key.write(engine)
        key.write(sampleRate)
        key.write(quality)
    }
}

extension PreparedUtterance: RenderKeyEncodable {
    /// The utterance, its voices and its engine input, as `==` compares them (not the text map,
    /// which the input decides, nor privacy, which keeps a render out of the cache altogether).
    /// An engine input that is not `RenderKeyEncodable` leaves the key incomplete.
    public func write(to key: inout RenderKeyWriter) {
        key.write(utterance)
        key.write(voices)
        key.write(any: engineInput)
    }
}
