import SpeechRendering

extension PiperInput: RenderKeyEncodable {
    /// The voice and every segment a Piper worker is given, so a render of this input can be
    /// kept on disk.
    public func write(to key: inout RenderKeyWriter) {
        key.write(voice)
        key.write(segments.count)
        for segment in segments {
            key.write(segment.text)
            key.write(segment.position)
            key.write(segment.lengthScale)
            key.write(segment.volume)
            key.write(segment.pauseAfter)
        }
    }
}
