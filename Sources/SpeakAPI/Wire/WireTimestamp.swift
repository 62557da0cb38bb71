import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A date as the wire has it: written as ISO 8601 in UTC with milliseconds
/// (`2026-11-21T11:34:10.123Z`) whatever the encoder's date strategy, so every process that writes
/// it (the daemon, the CLI speaking in-process) writes the same format and event timings can be
/// compared across them; read with or without fractional seconds.
@propertyWrapper
public struct WireTimestamp: Sendable, Hashable, Codable {
    /// The date.
    public var wrappedValue: Date

    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// - Parameter wrappedValue: the date.
    public init(wrappedValue: Date) {
        self.wrappedValue = wrappedValue
    }

    /// Reads the date from a string, with or without fractional seconds.
    /// - Throws: `DecodingError.dataCorrupted` when the string is not an ISO 8601 timestamp.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        guard let date = (try? Self.style.parse(string)) ?? (try? Date.ISO8601FormatStyle().parse(string)) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(string)' is not an ISO 8601 timestamp")
        }
        wrappedValue = date
    }

    /// Writes the date as a string, with milliseconds.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(wrappedValue.formatted(Self.style))
    }
}
