import SpeechRendering

extension EspeakInput: RenderKeyEncodable {
    /// Every field espeak-ng is given, so a render of this input can be kept on disk.
    public func write(to key: inout RenderKeyWriter) {
        key.write(voice)
        key.write(rate)
        key.write(volume)
        key.write(text)
        key.write(isMarkup)
        key.write(switchesVoice)
    }
}
