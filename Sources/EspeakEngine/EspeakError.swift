import CEspeakNG

/// A failure reported by libespeak-ng: missing or unreadable data, an unknown voice, a failed synthesis.
///
/// Built from the library's status code and its own message (`espeak_ng_GetStatusCodeMessage`),
/// plus what the engine was doing when it happened.
public struct EspeakError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        /// A status returned by an `espeak_ng_*` call.
        case status(UInt32)
        /// The engine could not prepare its private data directory.
        case dataDirectory
    }

    private let code: Code
    /// What the engine was doing (`initialise /tmp/x`, `set voice roa/pt`).
    public let operation: String
    /// The library's own message for the status.
    public let message: String

    /// The raw `espeak_ng_STATUS` value, when the error came from an `espeak_ng_*` call.
    public var status: UInt32? {
        if case .status(let value) = code { return value }
        return nil
    }

    /// True when libespeak-ng reported that its data (phoneme tables, voices) is missing or unreadable.
    public var isMissingData: Bool {
        guard case .status(let value) = code else { return false }
        // errno-group statuses (ENOENT, EACCES, …) come from opening the data files.
        return value & ENS_GROUP_MASK.rawValue == ENS_GROUP_ERRNO.rawValue
            || value == ENS_VERSION_MISMATCH.rawValue || value == ENS_EMPTY_PHONEME_MANIFEST.rawValue
    }

    public var description: String { "espeak-ng: \(operation): \(message)" }

    static func check(_ status: espeak_ng_STATUS, _ operation: @autoclosure () -> String) throws(EspeakError) {
        guard status != ENS_OK else { return }
        throw EspeakError(code: .status(status.rawValue), operation: operation(), message: message(for: status))
    }

    static func dataDirectory(_ operation: String, _ message: String) -> EspeakError {
        EspeakError(code: .dataDirectory, operation: operation, message: message)
    }

    private static func message(for status: espeak_ng_STATUS) -> String {
        var buffer = [CChar](repeating: 0, count: 512)
        espeak_ng_GetStatusCodeMessage(status, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.isEmpty ? "status 0x\(String(status.rawValue, radix: 16))" : text
    }
}
