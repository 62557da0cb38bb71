import FoundationEssentials
import NIOCore

/// A JSON value as an event's data carries it: the Wyoming protocol's data is free-form JSON.
public enum WyomingValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([WyomingValue])
    case object([String: WyomingValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([WyomingValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: WyomingValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The string, or nil for any other value.
    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer (a whole double too), or nil for any other value.
    public var int: Int? {
        switch self {
        case .int(let value): value
        case .double(let value) where value.rounded() == value && abs(value) < 1e15: Int(value)
        default: nil
        }
    }

    /// The members, or nil for any other value.
    public var object: [String: WyomingValue]? {
        if case .object(let value) = self { return value }
        return nil
    }
}

extension WyomingValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: WyomingValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, WyomingValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

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
    public var data: [String: WyomingValue]
    public var payload: [UInt8]

    public init(_ type: String, data: [String: WyomingValue] = [:], payload: [UInt8] = []) {
        self.type = type
        self.data = data
        self.payload = payload
    }

    /// The event as it goes on the wire: header line, data section, payload.
    public func encoded() -> ByteBuffer {
        var header: [String: WyomingValue] = ["type": .string(type), "version": .string(Self.protocolVersion)]
        var dataBytes: [UInt8] = []
        if !data.isEmpty {
            // Encoding a tree of plain values cannot fail.
            dataBytes = Array((try? Self.encoder.encode(data)) ?? Data("{}".utf8))
            header["data_length"] = .int(dataBytes.count)
        }
        if !payload.isEmpty { header["payload_length"] = .int(payload.count) }
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
