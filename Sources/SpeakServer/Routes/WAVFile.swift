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
        Self.write(samples, to: &buffer)
    }

    private static func write(_ samples: [Int16], to buffer: inout ByteBuffer) {
        #if _endian(little)
        samples.withUnsafeBytes { _ = buffer.writeBytes($0) }
        #else
        for sample in samples { buffer.writeInteger(sample, endianness: .little) }
        #endif
    }

    /// What was appended, behind a header for a stream whose length is not known yet: its RIFF
    /// and data sizes are 0xFFFFFFFF, as WAV streams (a pipe, a radio encoder) write them.
    mutating func streamingStart() -> ByteBuffer {
        var header = WAVHeader.encode(dataBytes: 0, format: format)
        for offset in [4, 40] { header.replaceSubrange(offset..<offset + 4, with: [0xFF, 0xFF, 0xFF, 0xFF]) }
        buffer.setBytes(header, at: 0)
        return buffer
    }

    /// `samples` as a WAV body's bytes, little-endian.
    static func bytes(of samples: [Int16]) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 2 * samples.count)
        write(samples, to: &buffer)
        return buffer
    }

    /// The whole file, its header giving the length of what was appended.
    mutating func finish() -> ByteBuffer {
        let header = WAVHeader.encode(dataBytes: buffer.writerIndex - WAVHeader.size, format: format)
        buffer.setBytes(header, at: 0)
        return buffer
    }
}
