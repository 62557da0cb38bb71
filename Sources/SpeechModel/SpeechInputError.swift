/// An input that cannot be spoken: a value out of range, a malformed tag, unsupported markup.
///
/// `field` names what is wrong in wire-format terms (`pitch`, `spans[1].language`), so the
/// server and the CLI can point at it.
public struct SpeechInputError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case outOfRange
        case malformed
        case unsupported
        case notFound
        case tooLarge
    }

    private let code: Code
    /// The wire-format name of the offending field, if there is one.
    public let field: String?
    public let message: String

    /// A stable, machine-readable name for the kind of problem.
    public var kind: String { code.rawValue }

    /// The same error with its field under `prefix` (`sequence[1].` + `spans[0].pitch`): for a
    /// part checked as a whole of its own and then named where it stands.
    func prefixingField(_ prefix: String) -> SpeechInputError {
        guard !prefix.isEmpty else { return self }
        return SpeechInputError(code: code, field: prefix + (field ?? "text"), message: message)
    }

    public var description: String {
        if let field { return "\(field): \(message)" }
        return message
    }

    public static func outOfRange(field: String, value: Double, range: ClosedRange<Double>) -> SpeechInputError {
        SpeechInputError(
            code: .outOfRange, field: field,
            message: "\(value) is out of range \(range.lowerBound)–\(range.upperBound)")
    }

    /// A value out of range, described in the input's own terms (`prosody pitch="+200%"`).
    public static func outOfRange(field: String, _ message: String) -> SpeechInputError {
        SpeechInputError(code: .outOfRange, field: field, message: message)
    }

    /// Input longer than the configured limits (text length, number of spans).
    public static func tooLarge(field: String, _ message: String) -> SpeechInputError {
        SpeechInputError(code: .tooLarge, field: field, message: message)
    }

    /// Input that does not parse (a tag, SSML, JSON).
    public static func malformed(field: String?, _ message: String) -> SpeechInputError {
        SpeechInputError(code: .malformed, field: field, message: message)
    }

    /// Well-formed input that this service cannot speak (an IPA symbol, an SSML element).
    public static func unsupported(field: String?, _ message: String) -> SpeechInputError {
        SpeechInputError(code: .unsupported, field: field, message: message)
    }

    /// A language or voice that resolves to nothing.
    public static func notFound(field: String?, _ message: String) -> SpeechInputError {
        SpeechInputError(code: .notFound, field: field, message: message)
    }

    /// The same error with its field placed under `prefix` (`spans[2]` + `pitch` → `spans[2].pitch`).
    public func nested(in prefix: String) -> SpeechInputError {
        SpeechInputError(code: code, field: field.map { "\(prefix).\($0)" } ?? prefix, message: message)
    }

    /// The same error for a part of an utterance whose first span is span `first` of the whole
    /// (`Utterance.part(spans:)`): `spans[0].pitch` becomes `spans[first].pitch`. Other fields
    /// are kept.
    public func reindexed(spansFrom first: Int) -> SpeechInputError {
        guard first > 0, let field, field.hasPrefix("spans["), let close = field.firstIndex(of: "]"),
            let index = Int(field[field.index(field.startIndex, offsetBy: 6)..<close])
        else { return self }
        return SpeechInputError(code: code, field: "spans[\(index + first)" + field[close...], message: message)
    }

    /// The same error about another field (a part of an utterance reported as the whole's).
    public func renamed(field: String) -> SpeechInputError {
        SpeechInputError(code: code, field: field, message: message)
    }
}
