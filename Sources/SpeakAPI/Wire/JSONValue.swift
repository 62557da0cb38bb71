import FoundationEssentials

/// A JSON value as `JSONDecoder` read it: what a schedule keeps of the fields it checks itself,
/// and of its announcement as the client wrote it, so that `GET` gives back what was posted; a
/// Wyoming event's free-form data.
///
/// Decoding one is part of the decode of the body it sits in, not a parse of its own; encoding
/// it with sorted keys gives a schedule's canonical JSON.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    /// A number without a fraction that fits 64 bits.
    case integer(Int64)
    /// Any other number.
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The value as compact JSON with sorted keys and unescaped slashes.
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Only finite numbers are ever decoded (the strict check refuses the rest), so this cannot fail.
        return (try? encoder.encode(self)) ?? Data("null".utf8)
    }
}

extension JSONValue {
    /// The string, or nil for any other value.
    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The whole number (a number without a fraction too), or nil for any other value.
    public var int: Int? {
        switch self {
        case .integer(let value): Int(exactly: value)
        case .number(let value) where value.rounded() == value && abs(value) < 1e15: Int(value)
        default: nil
        }
    }

    /// The members, or nil for any other value.
    public var object: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .integer(Int64(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
