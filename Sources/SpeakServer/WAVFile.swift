import NIOCore
import SpeechModel
import SpeechRendering

/// A RIFF/WAVE file of 16-bit PCM, as `POST /v1/speech` returns it, built in one buffer as the
/// engine's chunks arrive: each chunk is copied once, in bulk, and the header is written last,
/// when the length is known.
struct WAVFile {
    private(set) var buffer: ByteBuffer
    private let format: AudioFormat

    /// An empty file in `format`; `capacity` is a guess at the sample count.
    init(format: AudioFormat, capacity: Int = 0) {
        self.format = format
        buffer = ByteBufferAllocator().buffer(capacity: WAVHeader.size + 2 * capacity)
        buffer.writeRepeatingByte(0, count: WAVHeader.size)
    }

    /// Appends `samples`, little-endian.
    mutating func append(_ samples: [Int16]) {
        #if _endian(little)
        samples.withUnsafeBytes { _ = buffer.writeBytes($0) }
        #else
        for sample in samples { buffer.writeInteger(sample, endianness: .little) }
        #endif
    }

    /// The whole file, its header giving the length of what was appended.
    mutating func finish() -> ByteBuffer {
        let header = WAVHeader.encode(dataBytes: buffer.writerIndex - WAVHeader.size, format: format)
        buffer.setBytes(header, at: 0)
        return buffer
    }
}
