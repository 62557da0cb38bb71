import SpeechModel

/// A RIFF/WAVE file of 16-bit PCM, as `POST /v1/speech` returns it.
enum WAVFile {
    /// The whole file: the 44-byte header followed by the samples, little-endian.
    static func encode(_ samples: [Int16], format: AudioFormat) -> [UInt8] {
        let dataBytes = samples.count * 2
        var bytes = WAVHeader.encode(dataBytes: dataBytes, format: format)
        bytes.reserveCapacity(WAVHeader.size + dataBytes)
        for sample in samples {
            withUnsafeBytes(of: sample.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }
}
