import FoundationEssentials
import NIOCore
import SpeakAPI

/// One Wyoming event: a type, JSON data and an optional binary payload (audio).
///
/// On the wire an event is one JSON header line (`type`, `version`, and `data_length` and
/// `payload_length` when there are data and a payload), then `data_length` bytes of the data as
/// a JSON object, then `payload_length` bytes of payload. Data may also sit in the header's own
/// `data` member (older peers); both are merged, the data section winning.
public struct WyomingEvent: Sendable, Hashable {
    /// The protocol version this server writes in every header.
    public static let protocolVersion = "1.8.0"

    public var type: String
    public var data: [String: JSONValue]
    public var payload: [UInt8]

    public init(_ type: String, data: [String: JSONValue] = [:], payload: [UInt8] = []) {
        self.type = type
        self.data = data
        self.payload = payload
    }

    /// The event as it goes on the wire: header line, data section, payload.
    public func encoded() -> ByteBuffer {
        var header: [String: JSONValue] = ["type": .string(type), "version": .string(Self.protocolVersion)]
        var dataBytes: [UInt8] = []
        if !data.isEmpty {
            // Encoding a tree of plain values cannot fail.
            dataBytes = Array((try? Self.encoder.encode(data)) ?? Data("{}".utf8))
            header["data_length"] = .integer(Int64(dataBytes.count))
        }
        if !payload.isEmpty { header["payload_length"] = .integer(Int64(payload.count)) }
        let line = (try? Self.encoder.encode(header)) ?? Data()
        var buffer = ByteBufferAllocator().buffer(capacity: line.count + 1 + dataBytes.count + payload.count)
        buffer.writeBytes(line)
        buffer.writeInteger(UInt8(ascii: "\n"))
        buffer.writeBytes(dataBytes)
        buffer.writeBytes(payload)
        return buffer
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}
