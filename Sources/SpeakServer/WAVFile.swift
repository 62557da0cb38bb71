import SpeechModel

/// A RIFF/WAVE file of 16-bit PCM, as `POST /v1/speech` returns it.
enum WAVFile {
    /// The whole file: the 44-byte header followed by the samples, little-endian.
    static func encode(_ samples: [Int16], format: AudioFormat) -> [UInt8] {
        let dataBytes = samples.count * 2
        var bytes: [UInt8] = []
        bytes.reserveCapacity(44 + dataBytes)
        func append(_ string: String) { bytes.append(contentsOf: Array(string.utf8)) }
        func append32(_ value: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { bytes.append(contentsOf: $0) } }
        func append16(_ value: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { bytes.append(contentsOf: $0) } }
        append("RIFF")
        append32(36 + dataBytes)
        append("WAVE")
        append("fmt ")
        append32(16)
        append16(1)
        append16(format.channels)
        append32(format.sampleRate)
        append32(format.sampleRate * format.bytesPerFrame)
        append16(format.bytesPerFrame)
        append16(16)
        append("data")
        append32(dataBytes)
        for sample in samples {
            withUnsafeBytes(of: sample.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }
}
