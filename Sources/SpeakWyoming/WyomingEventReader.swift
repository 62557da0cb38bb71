import FoundationEssentials
import NIOCore
import SpeakAPI

/// Splits a byte stream into Wyoming events, each part within its limit: a header line longer
/// than `maxHeaderBytes`, or a `data_length` or `payload_length` over its limit, is refused as
/// soon as it is seen, before its bytes arrive, so a peer costs at most the largest limit of
/// memory whatever it claims. After a refusal the stream cannot be followed: the connection ends.
struct WyomingEventReader: Sendable {
    /// Bounds of one event.
    struct Limits: Sendable, Hashable {
        /// The longest header line, in bytes, its newline not counted.
        var maxHeaderBytes = 64 << 10
        /// The most bytes of an event's data section.
        var maxDataBytes = 1 << 20
        /// The most bytes of an event's payload (one audio chunk).
        var maxPayloadBytes = 1 << 20
    }

    /// Why the stream cannot be read on.
    struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The `ErrorResponse` code the peer is sent: `tooLarge` or `malformedRequest`.
        var code: String
        var description: String

        static func tooLarge(_ text: String) -> Self { Self(code: ErrorResponse.Code.tooLarge, description: text) }
        static func malformed(_ text: String) -> Self {
            Self(code: ErrorResponse.Code.malformedRequest, description: text)
        }
    }

    private struct Header: Decodable {
        var type: String
        var data: [String: JSONValue]?
        var dataLength: Int?
        var payloadLength: Int?

        enum CodingKeys: String, CodingKey {
            case type, data
            case dataLength = "data_length"
            case payloadLength = "payload_length"
        }
    }

    private enum Stage {
        case header
        case data(WyomingEvent, dataLength: Int, payloadLength: Int)
        case payload(WyomingEvent, payloadLength: Int)
    }

    let limits: Limits
    private var pending = ByteBuffer()
    private var stage = Stage.header
    private var failed: Failure?

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Takes `bytes`; returns the events they complete.
    /// - Throws: `Failure` for a part over its limit or not in the protocol's form, then again
    ///   for every later call.
    mutating func read(_ bytes: ByteBuffer) throws(Failure) -> [WyomingEvent] {
        if let failed { throw failed }
        var bytes = bytes
        pending.writeBuffer(&bytes)
        var events: [WyomingEvent] = []
        do throws(Failure) {
            while let event = try next() { events.append(event) }
        } catch {
            failed = error
            pending = ByteBuffer()
            throw error
        }
        if pending.readerIndex > 64 << 10 { pending.discardReadBytes() }
        return events
    }

    private mutating func next() throws(Failure) -> WyomingEvent? {
        while true {
            switch stage {
            case .header:
                let view = pending.readableBytesView
                guard let end = view.firstIndex(of: UInt8(ascii: "\n")) else {
                    guard view.count <= limits.maxHeaderBytes else {
                        throw .tooLarge("an event's header line is longer than \(limits.maxHeaderBytes) bytes")
                    }
                    return nil
                }
                let length = end - view.startIndex
                guard length <= limits.maxHeaderBytes else {
                    throw .tooLarge("an event's header line is longer than \(limits.maxHeaderBytes) bytes")
                }
                let line = pending.readBytes(length: length) ?? []
                pending.moveReaderIndex(forwardBy: 1)
                // Blank lines between events are tolerated.
                if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { continue }
                let header: Header
                do {
                    header = try JSONDecoder().decode(Header.self, from: Data(line))
                } catch {
                    throw .malformed("an event's header is not a JSON object with a string 'type'")
                }
                let dataLength = header.dataLength ?? 0
                let payloadLength = header.payloadLength ?? 0
                guard dataLength >= 0, payloadLength >= 0 else {
                    throw .malformed("an event's 'data_length' and 'payload_length' cannot be negative")
                }
                guard dataLength <= limits.maxDataBytes else {
                    throw .tooLarge(
                        "'\(header.type)': a data_length of \(dataLength) bytes is over the limit of "
                            + "\(limits.maxDataBytes)")
                }
                guard payloadLength <= limits.maxPayloadBytes else {
                    throw .tooLarge(
                        "'\(header.type)': a payload_length of \(payloadLength) bytes is over the limit of "
                            + "\(limits.maxPayloadBytes)")
                }
                stage = .data(
                    WyomingEvent(header.type, data: header.data ?? [:]), dataLength: dataLength,
                    payloadLength: payloadLength)
            case .data(var event, let dataLength, let payloadLength):
                if dataLength > 0 {
                    guard let bytes = pending.readBytes(length: dataLength) else { return nil }
                    let data: [String: JSONValue]
                    do {
                        data = try JSONDecoder().decode([String: JSONValue].self, from: Data(bytes))
                    } catch {
                        throw .malformed("'\(event.type)': its data section is not a JSON object")
                    }
                    event.data.merge(data) { _, section in section }
                }
                stage = .payload(event, payloadLength: payloadLength)
            case .payload(var event, let payloadLength):
                if payloadLength > 0 {
                    guard let bytes = pending.readBytes(length: payloadLength) else { return nil }
                    event.payload = bytes
                }
                stage = .header
                return event
            }
        }
    }
}
