/// The 44-byte header of a RIFF/WAVE file of 16-bit PCM, shared by the WAV file sink and the
/// server's `POST /v1/speech` so both write the same files.
public enum WAVHeader {
    /// Bytes before the first sample.
    public static let size = 44

    /// The header for `dataBytes` bytes of samples in `format`, little-endian.
    public static func encode(dataBytes: Int, format: AudioFormat) -> [UInt8] {
        var header: [UInt8] = []
        header.reserveCapacity(size)
        func append(_ text: String) { header.append(contentsOf: Array(text.utf8)) }
        func append32(_ value: Int) {
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { header.append(contentsOf: $0) }
        }
        func append16(_ value: Int) {
            withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { header.append(contentsOf: $0) }
        }
        append("RIFF")
        append32(36 + dataBytes)
        append("WAVE")
        append("fmt ")
        append32(16)
        append16(1)  // PCM
        append16(format.channels)
        append32(format.sampleRate)
        append32(format.sampleRate * format.bytesPerFrame)
        append16(format.bytesPerFrame)
        append16(16)
        append("data")
        append32(dataBytes)
        return header
    }
}
