import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SpeakAPI
import SpeakServer
import SpeechModel
import Testing

@Suite("Event stream")
struct EventStreamTests {
    /// Two announcements: the first completes, then a shutdown finishes the second and ends the streams.
    private func history(_ harness: Harness, client: some TestClientProtocol) async throws -> [String] {
        let first = try await harness.post(client, #"{"text": "first"}"#)
        let second = try await harness.post(client, #"{"text": "second"}"#)
        harness.running.speaker.complete(first)
        try await harness.running.waitUntilSpoken(2)
        await harness.running.queue.shutdown()
        return [first, second]
    }

    @Test(.timeLimit(.minutes(1))) func framesCarryTypeSequenceAndJSON() async throws {
        let harness = Harness()
        try await harness.test { client in
            let ids = try await history(harness, client: client)
            let response = try await client.execute(
                uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: "0"])
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "text/event-stream; charset=utf-8")
            #expect(response.headers[.cacheControl] == "no-cache")
            let raw = String(buffer: response.body)
            #expect(raw.hasPrefix("retry: 1000\n: speakd events\n\n"))
            #expect(raw.contains("event: queued\nid: "))

            var parser = ServerSentEventParser()
            let messages = parser.feed(Array(buffer: response.body))
            #expect(messages.map { $0.eventID?.sequence } == (1...messages.count).map { UInt64($0) })
            #expect(Set(messages.map { $0.eventID?.epoch }).count == 1)
            #expect(messages.allSatisfy { $0.eventID?.epoch != nil })
            let events = try messages.map { try $0.announcementEvent() }
            #expect(messages.map(\.event) == events.map(\.type.rawValue))
            let summary = events.map { "\($0.type.rawValue) \($0.id == ids[0] ? "first" : "second")" }
            #expect(
                summary == [
                    "queued first", "started first", "queued second", "finished first", "started second",
                    "finished second",
                ])
            #expect(events[3].success == true)
            #expect(events[3].reason == .completed)
            #expect(events[5].success == false)
            #expect(events[5].reason == .shutdown)
            #expect(events[5].text == "second")
            #expect(events[5].priority == .default)
        }
    }

    @Test(.timeLimit(.minutes(1)), arguments: [("Last-Event-ID", "4"), ("query", "4")])
    func resumesAfterLastEventID(_ how: (String, String)) async throws {
        let harness = Harness()
        try await harness.test { client in
            let ids = try await history(harness, client: client)
            let response: TestResponse
            if how.0 == "query" {
                response = try await client.execute(uri: "/v1/events?after=\(how.1)", method: .get)
            } else {
                response = try await client.execute(
                    uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: how.1])
            }
            var parser = ServerSentEventParser()
            let messages = parser.feed(Array(buffer: response.body))
            #expect(messages.map { $0.eventID?.sequence } == [5, 6])
            #expect(messages.map(\.event) == ["started", "finished"])
            #expect(try messages.map { try $0.announcementEvent().id } == [ids[1], ids[1]])
        }
    }

    @Test(.timeLimit(.minutes(1))) func idFromAnotherRunReplaysThisRunAfterAComment() async throws {
        let harness = Harness()
        try await harness.test { client in
            _ = try await history(harness, client: client)
            let response = try await client.execute(
                uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: "1-4"])
            let raw = String(buffer: response.body)
            #expect(raw.contains(": missed events: 1-4 is from an earlier run of speakd; this run is "))
            var parser = ServerSentEventParser()
            let ids = parser.feed(Array(buffer: response.body)).compactMap(\.eventID)
            #expect(ids.map(\.sequence) == [1, 2, 3, 4, 5, 6])
            #expect(ids.allSatisfy { $0.epoch != nil && $0.epoch != 1 })
        }
    }

    @Test(arguments: [
        ("1700000000000-42", EventID(epoch: 1_700_000_000_000, sequence: 42)), ("7", EventID(epoch: nil, sequence: 7)),
        ("1-2-3", nil), ("-3", nil), ("x-1", nil), ("", nil),
    ])
    func eventIDParses(_ text: String, _ expected: EventID?) {
        #expect(EventID(text) == expected)
        if let expected { #expect(expected.description == text) }
    }

    /// A bad resume point is refused the same way from the header and from the query: 422 naming
    /// where it came from, whether it is not an id or names an event of this run not sent yet.
    @Test(
        .timeLimit(.minutes(1)),
        arguments: [("Last-Event-ID", "yesterday"), ("after", "yesterday"), ("Last-Event-ID", "7"), ("after", "7")])
    func badResumePointIs422NamingIt(_ how: (field: String, value: String)) async throws {
        let harness = Harness()
        try await harness.test { client in
            _ = try await history(harness, client: client)
            let response: TestResponse
            if how.field == "after" {
                response = try await client.execute(uri: "/v1/events?after=\(how.value)", method: .get)
            } else {
                response = try await client.execute(
                    uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: how.value])
            }
            #expect(response.status == .unprocessableContent)
            let error = try decode(ErrorResponse.self, response).error
            #expect(error.code == "invalidValue")
            #expect(error.field == how.field, "\(error.message)")
            #expect(error.message.contains("'\(how.value)'"), "\(error.message)")
        }
    }

    /// The newest event's id of this run, bare or with the epoch, is a resume point (nothing to
    /// replay); the next one is not sent yet and is refused.
    @Test(.timeLimit(.minutes(1))) func resumeFromTheNewestEventIsAcceptedAndBeyondItIsNot() async throws {
        let harness = Harness()
        try await harness.test { client in
            _ = try await history(harness, client: client)
            let all = try await client.execute(
                uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: "0"])
            var parser = ServerSentEventParser()
            let newest = try #require(parser.feed(Array(buffer: all.body)).last?.eventID)
            #expect(newest.sequence == 6)
            let bare = try await client.execute(uri: "/v1/events?after=6", method: .get)
            #expect(bare.status == .ok)
            let full = try await client.execute(
                uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: "\(newest)"])
            #expect(full.status == .ok)
            var next = newest
            next.sequence += 1
            let beyond = try await client.execute(
                uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: "\(next)"])
            #expect(beyond.status == .unprocessableContent)
            #expect(try decode(ErrorResponse.self, beyond).error.field == "Last-Event-ID")
        }
    }

    @Test func parserHandlesLineEndingsCommentsAndMultilineData() {
        var parser = ServerSentEventParser()
        var messages = parser.feed(Array(": hello\r\nevent: started\r\nid: 7\r\ndata: {\"a\":\r\ndata: 1}\r\n\r".utf8))
        messages += parser.feed(Array("\nevent: finished\ndata:x\n\n".utf8))
        #expect(
            messages == [
                ServerSentEvent(event: "started", id: "7", data: "{\"a\":\n1}"),
                ServerSentEvent(event: "finished", id: "7", data: "x"),
            ])
        #expect(
            ServerSentEvent(event: "queued", id: "3", data: "a\nb").encoded
                == "event: queued\nid: 3\ndata: a\ndata: b\n\n")
    }
}
