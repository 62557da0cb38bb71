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
            try WireTimestamp(wrappedValue: date).encode(to: encoder)
        }
        return encoder
    }

    /// A fresh decoder with speakd's settings; timestamps with or without fractional seconds are accepted.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            try WireTimestamp(from: decoder).wrappedValue
        }
        return decoder
    }

    /// The media type of every JSON body.
    public static let jsonContentType = "application/json; charset=utf-8"
}
