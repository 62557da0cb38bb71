extension Decoder {
    /// The keys of the JSON object being decoded that are not in `known`, sorted: a strict
    /// decoder refuses them by name rather than ignore a misspelt field without a word.
    func unknownKeys(known: Set<String>) throws -> [String] {
        try container(keyedBy: AnyCodingKey.self).allKeys.map(\.stringValue).filter { !known.contains($0) }.sorted()
    }
}

/// Any key of a JSON object.
private struct AnyCodingKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
