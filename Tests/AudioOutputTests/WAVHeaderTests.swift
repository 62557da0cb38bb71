import SpeechModel
import SpeechRendering
import Testing

@Suite struct WAVHeaderTests {
    /// Reads a little-endian integer of `width` bytes at `offset`.
    private func integer(_ bytes: [UInt8], at offset: Int, width: Int) -> Int {
        (0..<width).reduce(0) { value, index in value | Int(bytes[offset + index]) << (8 * index) }
    }

    @Test(arguments: [(22_050, 1, 0), (16_000, 2, 4_000)])
    func headerDescribesFormatAndLength(sampleRate: Int, channels: Int, dataBytes: Int) {
        let header = WAVHeader.encode(
            dataBytes: dataBytes, format: AudioFormat(sampleRate: sampleRate, channels: channels))
        #expect(header.count == WAVHeader.size)
        #expect(Array(header[0..<4]) == Array("RIFF".utf8))
        #expect(integer(header, at: 4, width: 4) == 36 + dataBytes)
        #expect(Array(header[8..<16]) == Array("WAVEfmt ".utf8))
        #expect(integer(header, at: 16, width: 4) == 16)
        #expect(integer(header, at: 20, width: 2) == 1)
        #expect(integer(header, at: 22, width: 2) == channels)
        #expect(integer(header, at: 24, width: 4) == sampleRate)
        #expect(integer(header, at: 28, width: 4) == sampleRate * 2 * channels)
        #expect(integer(header, at: 32, width: 2) == 2 * channels)
        #expect(integer(header, at: 34, width: 2) == 16)
        #expect(Array(header[36..<40]) == Array("data".utf8))
        #expect(integer(header, at: 40, width: 4) == dataBytes)
    }
}
