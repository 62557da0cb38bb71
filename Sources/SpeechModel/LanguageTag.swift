/// A well-formed BCP 47 (RFC 5646) language tag, in canonical casing.
public struct LanguageTag: Sendable, Hashable, CustomStringConvertible {
    /// The canonical form (`pt-PT`, `zh-Hant-HK`, `sr-Latn`).
    public let canonical: String

    /// Parses `string`; a malformed tag is an error that names the tag and what is wrong.
    public init(_ string: String) throws(SpeechInputError) {
        let subtags = string.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = subtags.first, (2...8).contains(first.count),
            first.allSatisfy({ $0.isASCII && $0.isLetter }),
            subtags.dropFirst().allSatisfy({ (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } })
        else {
            throw .malformed(field: "language", "'\(string)' is not a well-formed BCP 47 tag")
        }
        var parts = [first.lowercased()]
        for subtag in subtags.dropFirst() {
            switch subtag.count {
            case 2: parts.append(subtag.uppercased())
            case 4: parts.append(subtag.prefix(1).uppercased() + subtag.dropFirst().lowercased())
            default: parts.append(subtag.lowercased())
            }
        }
        canonical = parts.joined(separator: "-")
    }

    public var description: String { canonical }
}
