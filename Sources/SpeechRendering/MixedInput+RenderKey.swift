extension MixedInput: RenderKeyEncodable {
    /// Each part in order: its engine (which engines they are is the cache's fingerprint), its
    /// prepared utterance (whose own input is written as that engine's) and where its positions start. A part whose input cannot be written
    /// leaves the key incomplete, and the render is kept in memory only.
    func write(to key: inout RenderKeyWriter) {
        key.write(parts.count)
        for part in parts {
            switch part.engine {
            case .primary: key.write("primary")
            case .named(let voice): key.write("named:" + voice)
            }
            key.write(part.prepared)
            key.write(part.positionOffset)
        }
    }
}
