import FoundationEssentials
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// One message of a `text/event-stream` (the WHATWG Server-Sent Events format).
///
/// speakd sends `event: <queued|started|finished>`, `id: <epoch>-<sequence>` (`EventID`) and one
/// `data:` line with the event's JSON; a client that reconnects sends the last id it saw in
/// `Last-Event-ID`.
public struct ServerSentEvent: Sendable, Hashable {
    /// The `event:` field; nil means the default type `message`.
    public var event: String?
    /// The `id:` field.
    public var id: String?
    /// The `data:` field; several lines are joined with `\n`.
    public var data: String

    /// - Parameters: see the properties of the same names.
    public init(event: String? = nil, id: String? = nil, data: String) {
        self.event = event
        self.id = id
        self.data = data
    }

    /// The message framed for the wire, ending with the blank line that dispatches it.
    public var encoded: String {
        var frame = ""
        if let event { frame += "event: \(event)\n" }
        if let id { frame += "id: \(id)\n" }
        for line in data.split(separator: "\n", omittingEmptySubsequences: false) {
            frame += "data: \(line)\n"
        }
        return frame + "\n"
    }

    /// An announcement event as speakd frames it: its type as the SSE event, with its id.
    public init(_ event: AnnouncementEvent, id: EventID) throws {
        let json = try WireFormat.encoder().encode(event)
        self.init(event: event.type.rawValue, id: id.description, data: String(decoding: json, as: UTF8.self))
    }

    /// The `id:` as an `EventID`, when it is one.
    public var eventID: EventID? {
        id.flatMap { EventID($0) }
    }

    /// The announcement event this message carries, when it is one.
    public func announcementEvent() throws -> AnnouncementEvent {
        try WireFormat.decoder().decode(AnnouncementEvent.self, from: Data(data.utf8))
    }

    /// A comment line, which clients ignore; used as a heartbeat that keeps proxies from closing the stream.
    public static func comment(_ text: String) -> String {
        ": \(text)\n\n"
    }
}

/// Splits a `text/event-stream` into messages as bytes arrive, following the WHATWG parsing rules
/// (`\n`, `\r\n` or `\r` line ends, comments, `field:value` with one optional space).
public struct ServerSentEventParser: Sendable {
    private var buffer: [UInt8] = []
    private var event: String?
    private var id: String?
    private var dataLines: [String] = []
    private var hasData = false
    private var lastWasCR = false

    /// A parser at the start of a stream.
    public init() {}

    /// Feeds `bytes` and returns every message they complete.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var messages: [ServerSentEvent] = []
        for byte in bytes {
            if lastWasCR {
                lastWasCR = false
                if byte == UInt8(ascii: "\n") { continue }
            }
            switch byte {
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                lastWasCR = byte == UInt8(ascii: "\r")
                if let message = line(String(decoding: buffer, as: UTF8.self)) {
                    messages.append(message)
                }
                buffer.removeAll(keepingCapacity: true)
            default:
                buffer.append(byte)
            }
        }
        return messages
    }

    private mutating func line(_ line: String) -> ServerSentEvent? {
        if line.isEmpty {
            defer {
                event = nil
                dataLines = []
                hasData = false
            }
            guard hasData else { return nil }
            return ServerSentEvent(event: event, id: id, data: dataLines.joined(separator: "\n"))
        }
        if line.hasPrefix(":") { return nil }
        let field: Substring
        var value: Substring
        if let colon = line.firstIndex(of: ":") {
            field = line[..<colon]
            value = line[line.index(after: colon)...]
            if value.hasPrefix(" ") { value = value.dropFirst() }
        } else {
            field = line[...]
            value = ""
        }
        switch field {
        case "event": event = String(value)
        case "id": id = String(value)
        case "data":
            dataLines.append(String(value))
            hasData = true
        default: break
        }
        return nil
    }
}
