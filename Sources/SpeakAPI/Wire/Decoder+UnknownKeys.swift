extension Decoder {
    /// The keys of the JSON object being decoded that are not in `known`, sorted: a strict
    /// decoder refuses them by name rather than ignore a misspelt field without a word.
    func unknownKeys(known: Set<String>) throws -> [String] {
        try container(keyedBy: AnyCodingKey.self).allKeys.map(\.stringValue).filter { !known.contains($0) }.sorted()
    }
}

/// Any key of a JSON object: for a decoder that lists a body's keys, known or not.
public struct AnyCodingKey: CodingKey, Hashable, Sendable {
    public let stringValue: String
    public var intValue: Int? { nil }
    public init(_ string: String) { stringValue = string }
    public init(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { nil }
}
