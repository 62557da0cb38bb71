import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The JSON coders every speakd endpoint and client uses.
///
/// Timestamps are ISO 8601 with milliseconds (`2026-11-21T11:34:10.123Z`), so event timings can be
/// compared across processes; keys are sorted so bodies are stable for tests and logs.
public enum WireFormat {
    /// A fresh encoder with speakd's settings.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(timestampStyle))
        }
        return encoder
    }

    /// A fresh decoder with speakd's settings; timestamps with or without fractional seconds are accepted.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let string = try container.decode(String.self)
            if let date = try? timestampStyle.parse(string) { return date }
            if let date = try? Date.ISO8601FormatStyle().parse(string) { return date }
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(string)' is not an ISO 8601 timestamp")
        }
        return decoder
    }

    /// The media type of every JSON body.
    public static let jsonContentType = "application/json; charset=utf-8"

    private static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}
