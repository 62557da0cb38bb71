import Foundation

/// Writes a 32-bit float RIFF/WAVE file (format 3, IEEE float) byte by byte, so a test can put
/// any value in it, NaN and the infinities included, which no encoder would write.
public enum FloatWAV {
    /// A 1 kHz sine at `amplitude` of full scale, `seconds` long, with `values` written over its
    /// samples from `at`: a sound that is fine but for those samples.
    public static func tone(
        seconds: Double = 1, amplitude: Float = 0.25, rate: Int = 22_050, values: [Float] = [], at: Int = 1_000
    ) -> [Float] {
        var samples = (0..<Int(seconds * Double(rate))).map {
            amplitude * Float(sin(2 * Double.pi * 1_000 * Double($0) / Double(rate)))
        }
        for (offset, value) in values.enumerated() where at + offset < samples.count { samples[at + offset] = value }
        return samples
    }

    /// Writes `samples` (interleaved when `channels` > 1) to `url`.
    public static func write(_ samples: [Float], rate: Int = 22_050, channels: Int = 1, to url: URL) throws {
        try Data(bytes(samples, rate: rate, channels: channels)).write(to: url)
    }

    /// The file of `samples` (interleaved when `channels` > 1), as bytes: a body to upload.
    public static func bytes(_ samples: [Float], rate: Int = 22_050, channels: Int = 1) -> [UInt8] {
        var bytes: [UInt8] = []
        func tag(_ text: String) { bytes += Array(text.utf8) }
        func u32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { bytes += $0 } }
        func u16(_ value: Int) { withUnsafeBytes(of: UInt16(value).littleEndian) { bytes += $0 } }
        let data = samples.count * 4
        tag("RIFF")
        u32(4 + 8 + 16 + 8 + data)
        tag("WAVE")
        tag("fmt ")
        u32(16)
        u16(3)
        u16(channels)
        u32(rate)
        u32(rate * channels * 4)
        u16(channels * 4)
        u16(32)
        tag("data")
        u32(data)
        for sample in samples { withUnsafeBytes(of: sample.bitPattern.littleEndian) { bytes += $0 } }
        return bytes
    }
}
