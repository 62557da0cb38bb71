import Foundation

/// Reads a PCM s16le RIFF/WAVE file, checking its header the way a strict player would.
public struct WAVReader: Sendable {
    public let sampleRate: Int
    public let channels: Int
    /// Interleaved samples.
    public let samples: [Int16]

    /// What is wrong with a file that is not a valid 16-bit PCM WAV.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The size a stream's header gives for its RIFF and data chunks while their length is not
    /// known (`POST /v1/speech` streams a render over 30 s so): the data runs to the end.
    static let unknownSize = 0xFFFF_FFFF

    /// Reads and checks the file at `url`: RIFF size, a 16-bit PCM `fmt ` chunk, and a `data`
    /// chunk whose size matches the file, or a stream's, both sizes `unknownSize`.
    public init(contentsOf url: URL) throws {
        let bytes = [UInt8](try Data(contentsOf: url))
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func tag(_ at: Int) -> String { String(decoding: bytes[at..<at + 4], as: UTF8.self) }

        guard bytes.count >= 12, tag(0) == "RIFF", tag(8) == "WAVE" else {
            throw Failure(description: "\(url.path): not a RIFF/WAVE file")
        }
        let streamed = u32(4) == Self.unknownSize
        guard streamed || u32(4) == bytes.count - 8 else {
            throw Failure(
                description: "\(url.path): RIFF size \(u32(4)) but the file has \(bytes.count - 8) bytes after it")
        }
        var offset = 12
        var format: (channels: Int, rate: Int)?
        while offset + 8 <= bytes.count {
            let size = u32(offset + 4)
            let body = offset + 8
            switch tag(offset) {
            case "fmt ":
                guard size >= 16, u16(body) == 1, u16(body + 14) == 16 else {
                    throw Failure(description: "\(url.path): not 16-bit PCM")
                }
                format = (u16(body + 2), u32(body + 4))
            case "data":
                guard let format else { throw Failure(description: "\(url.path): data before fmt") }
                // A stream's data runs to the end of the file, a whole number of samples.
                let size = streamed && size == Self.unknownSize ? (bytes.count - body) & ~1 : size
                guard body + size == bytes.count else {
                    throw Failure(description: "\(url.path): data size \(size) but \(bytes.count - body) bytes follow")
                }
                channels = format.channels
                sampleRate = format.rate
                samples = stride(from: body, to: body + size - 1, by: 2).map {
                    Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)
                }
                return
            default:
                break
            }
            offset = body + size + (size & 1)
        }
        throw Failure(description: "\(url.path): no data chunk")
    }
}
