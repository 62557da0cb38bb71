import Foundation
import SpeakAPI
import Testing

@testable import SpeechModel

@Suite struct AnnouncementEventTests {
    /// 2026-11-21T11:34:10.125Z
    static let instant = Date(timeIntervalSince1970: 1_795_260_850.125)

    static func event(at date: Date) -> AnnouncementEvent {
        AnnouncementEvent(
            type: .finished, id: "local", text: "Platform four", priority: .default, timestamp: date, success: true,
            reason: .completed)
    }

    static func timestamp(_ data: Data) throws -> String {
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try #require(object["timestamp"] as? String)
    }

    static let encoders: [@Sendable () -> JSONEncoder] = [
        { JSONEncoder() },
        {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            return encoder
        },
        {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .secondsSince1970
            return encoder
        },
    ]

    /// Whoever encodes an event (the daemon's event stream, the CLI speaking in-process), the
    /// timestamp is ISO 8601 in UTC with milliseconds, as DESIGN.md's wire format has it.
    @Test(arguments: 0..<3)
    func timestampsCarryMilliseconds(encoder: Int) throws {
        let data = try Self.encoders[encoder]().encode(Self.event(at: Self.instant))
        #expect(try Self.timestamp(data) == "2026-11-21T11:34:10.125Z")
        let now = try Self.timestamp(Self.encoders[encoder]().encode(Self.event(at: Date())))
        #expect(now.wholeMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/#) != nil, "\(now)")
    }

    @Test func timestampsDecodeWithAndWithoutFractions() throws {
        let data = try JSONEncoder().encode(Self.event(at: Self.instant))
        let decoded = try JSONDecoder().decode(AnnouncementEvent.self, from: data)
        #expect(abs(decoded.timestamp.timeIntervalSince(Self.instant)) < 0.0005)
        #expect(decoded == Self.event(at: decoded.timestamp))

        let whole = try JSONDecoder().decode(
            AnnouncementEvent.self,
            from: Data(
                #"{"type":"queued","id":"a","text":"x","priority":"low","timestamp":"2026-11-21T11:34:10Z"}"#.utf8))
        #expect(whole.timestamp == Date(timeIntervalSince1970: 1_795_260_850))
        #expect(
            throws: DecodingError.self,
            performing: {
                try JSONDecoder().decode(
                    AnnouncementEvent.self,
                    from: Data(#"{"type":"queued","id":"a","text":"x","priority":"low","timestamp":"yesterday"}"#.utf8))
            })
    }
}
