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
    /// Two announcements, the first completed, then a shutdown that finishes the second and ends the stream.
    private func history(_ harness: Harness, client: some TestClientProtocol) async throws -> [String] {
        var ids: [String] = []
        for text in ["first", "second"] {
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "\#(text)"}"#))
            ids.append(try decode(AnnouncementAccepted.self, response).id)
        }
        harness.scheduler.finish(ids[0], reason: .completed)
        harness.scheduler.shutdown()
        return ids
    }

    @Test(.timeLimit(.minutes(1))) func framesCarryTypeSequenceAndJSON() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let ids = try await history(harness, client: client)
            let response = try await client.execute(uri: "/v1/events", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "text/event-stream; charset=utf-8")
            #expect(response.headers[.cacheControl] == "no-cache")
            let raw = String(buffer: response.body)
            #expect(raw.hasPrefix("retry: 1000\n: speakd events\n\n"))
            #expect(raw.contains("event: queued\nid: 1\ndata: {"))

            var parser = ServerSentEventParser()
            let messages = parser.feed(Array(buffer: response.body))
            #expect(messages.map(\.event) == ["queued", "queued", "finished", "finished"])
            #expect(messages.map(\.id) == ["1", "2", "3", "4"])
            let events = try messages.map { try $0.announcementEvent() }
            #expect(events.map(\.id) == [ids[0], ids[1], ids[0], ids[1]])
            #expect(events[2].success == true)
            #expect(events[2].reason == .completed)
            #expect(events[3].success == false)
            #expect(events[3].reason == .shutdown)
            #expect(events[3].text == "second")
            #expect(events[3].priority == .default)
        }
    }

    @Test(.timeLimit(.minutes(1)), arguments: [("Last-Event-ID", "2"), ("query", "2")])
    func resumesAfterLastEventID(_ how: (String, String)) async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
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
            #expect(messages.map(\.id) == ["3", "4"])
            #expect(try messages.map { try $0.announcementEvent().id } == [ids[0], ids[1]])
        }
    }

    @Test func malformedLastEventIDIs400() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: "yesterday"])
            #expect(response.status == .badRequest)
            #expect(try decode(ErrorResponse.self, response).error.field == "Last-Event-ID")
        }
    }

    @Test func parserHandlesLineEndingsCommentsAndMultilineData() {
        var parser = ServerSentEventParser()
        var messages = parser.feed(Array(": hello\r\nevent: started\r\nid: 7\r\ndata: {\"a\":\r\ndata: 1}\r\n\r".utf8))
        messages += parser.feed(Array("\nevent: finished\ndata:x\n\n".utf8))
        #expect(messages == [
            ServerSentEvent(event: "started", id: "7", data: "{\"a\":\n1}"),
            ServerSentEvent(event: "finished", id: "7", data: "x"),
        ])
        #expect(ServerSentEvent(event: "queued", id: "3", data: "a\nb").encoded == "event: queued\nid: 3\ndata: a\ndata: b\n\n")
    }
}
