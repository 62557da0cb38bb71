import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle
import SpeakAPI
import SpeakClient
import SpeakServer
import SpeakTestSupport
import SpeechModel
import Testing

/// Runs `front` in a service group until `body` returns, then shuts it down gracefully.
func withRunningFront<T: Sendable>(
    _ front: SpeakFront, _ body: @Sendable ([SpeakEndpoint]) async throws -> T
) async throws -> T {
    let group = ServiceGroup(
        configuration: .init(services: [front], logger: Logger(label: "test")))
    return try await withThrowingTaskGroup(of: T?.self) { tasks in
        tasks.addTask {
            try await group.run()
            return nil
        }
        let bound = try await front.waitUntilListening()
        let result = try await body(bound)
        await group.triggerGracefulShutdown()
        while let next = try await tasks.next() {
            _ = next
        }
        return result
    }
}

@Suite("Listeners", .serialized)
struct ListenerTests {
    @Test(.timeLimit(.minutes(1))) func liveOverTCP() async throws {
        let harness = Harness()
        try await harness.running.waitUntilRunning()
        let listener = SpeakListener(
            address: .tcp(host: "127.0.0.1", port: 0), responder: harness.server.buildRouter().buildResponder(),
            logger: Logger(label: "test"))
        let front = SpeakFront(listeners: [listener]) { await harness.running.shutdown() }
        try await withRunningFront(front) { bound in
            guard case .tcp(let host, let port) = bound[0] else { Issue.record("not TCP"); return }
            #expect(port != 0)
            let client = SpeakHTTPClient(endpoint: .tcp(host: host, port: port), timeout: .seconds(10))
            let response = try await client.send(
                "POST", "/v1/announcements", json: AnnouncementRequest(utterance: Utterance("over TCP"), priority: .low)
            )
            #expect(response.status == 202)
            // Every answer names the server and carries RFC 9110's date (`Sun, 06 Nov 1994 08:49:37 GMT`).
            #expect(response.header("Server") == "speakd")
            let date = try #require(response.header("Date"))
            #expect(date.count == 29 && date.hasSuffix(" GMT") && date.dropFirst(3).hasPrefix(", "), "\(date)")
            let accepted = try response.decode(AnnouncementAccepted.self)
            let status = try await client.send("GET", "/v1/announcements/\(accepted.id)")
            #expect(try status.decode(AnnouncementStatus.self).text == "over TCP")
            #expect(try status.decode(AnnouncementStatus.self).priority == .low)
            let missing = try await client.send("GET", "/v1/announcements/missing")
            #expect(missing.status == 404)
            #expect(missing.error?.error.field == "id")
        }
    }

    @Test(.timeLimit(.minutes(1))) func liveOverUnixSocket() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("speakd.sock").path
        // A stale socket from an earlier run must be replaced.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let bound = UnixSocketAddress(path: path)?.withSocketAddress { bind(stale, $0, $1) }
        #expect(bound == 0)
        close(stale)
        #expect(FileManager.default.fileExists(atPath: path))

        let harness = Harness()
        try await harness.running.waitUntilRunning()
        let listener = SpeakListener(
            address: .unixSocket(path: path), responder: harness.server.buildRouter().buildResponder(),
            logger: Logger(label: "test"))
        let front = SpeakFront(listeners: [listener]) { await harness.running.shutdown() }
        try await withRunningFront(front) { _ in
            var info = stat()
            #expect(lstat(path, &info) == 0)
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            #expect(info.st_mode & 0o777 == 0o660)

            let client = SpeakHTTPClient(endpoint: .unixSocket(path: path), timeout: .seconds(10))
            let response = try await client.send(
                "POST", "/v1/announcements", json: AnnouncementRequest(utterance: Utterance("over the socket")))
            #expect(response.status == 202)
            let list = try await client.send("GET", "/v1/announcements")
            #expect(try list.decode(AnnouncementList.self).announcements.map(\.text) == ["over the socket"])
            let voices = try await client.send("GET", "/v1/voices")
            #expect(voices.status == 200)
        }
        #expect(!FileManager.default.fileExists(atPath: path), "the socket is removed at shutdown")
    }

    @Test func refusesToReplaceAFileThatIsNotASocket() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("speakd.sock").path
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: path))
        let harness = Harness()
        let listener = SpeakListener(
            address: .unixSocket(path: path), responder: harness.server.buildRouter().buildResponder(),
            logger: Logger(label: "test"))
        await #expect(throws: ListenerError.self) { try await listener.run() }
        await harness.running.shutdown()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
    }

    /// A second listener on the path of a live one must not steal its socket.
    @Test(.timeLimit(.minutes(1))) func refusesToReplaceALiveSocket() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("speakd.sock").path
        let harness = Harness()
        try await harness.running.waitUntilRunning()
        let responder = harness.server.buildRouter().buildResponder()
        let first = SpeakListener(address: .unixSocket(path: path), responder: responder, logger: Logger(label: "test"))
        let front = SpeakFront(listeners: [first]) { await harness.running.shutdown() }
        try await withRunningFront(front) { _ in
            let second = SpeakListener(
                address: .unixSocket(path: path), responder: responder, logger: Logger(label: "test"))
            await #expect(throws: ListenerError.self) { try await second.run() }
            let client = SpeakHTTPClient(endpoint: .unixSocket(path: path), timeout: .seconds(10))
            let response = try await client.send("GET", "/v1/voices")
            #expect(response.status == 200)
        }
    }

    /// Live events arrive while the stream is open; shutdown delivers the `shutdown` finish and ends it.
    @Test(.timeLimit(.minutes(1))) func eventStreamIsLiveWithHeartbeats() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("speakd.sock").path
        let harness = Harness(settings: ServerSettings(heartbeatInterval: .milliseconds(50)))
        try await harness.running.waitUntilRunning()
        let listener = SpeakListener(
            address: .unixSocket(path: path), responder: harness.server.buildRouter().buildResponder(),
            logger: Logger(label: "test"))
        let front = SpeakFront(listeners: [listener]) { await harness.running.shutdown() }
        let client = SpeakHTTPClient(endpoint: .unixSocket(path: path), timeout: .seconds(10))
        let group = ServiceGroup(configuration: .init(services: [front], logger: Logger(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            _ = try await front.waitUntilListening()

            var events = client.events(lastEventID: "0").makeAsyncIterator()
            let accepted = try await client.send(
                "POST", "/v1/announcements", json: AnnouncementRequest(utterance: Utterance("live")))
            let id = try accepted.decode(AnnouncementAccepted.self).id
            let queued = try #require(try await events.next())
            #expect(queued.event == "queued")
            #expect(try queued.announcementEvent().id == id)
            let started = try #require(try await events.next())
            #expect(started.event == "started")

            // Heartbeats are comments: the parser skips them, so prove them on the raw wire.
            let raw = try await rawStream(path: path, for: .milliseconds(300))
            #expect(raw.components(separatedBy: ": heartbeat\n\n").count >= 3, "\(raw)")

            // Graceful shutdown: the listener closes, the queue finishes with `shutdown`, the stream ends.
            await group.triggerGracefulShutdown()
            let finished = try #require(try await events.next())
            #expect(finished.event == "finished")
            #expect(try finished.announcementEvent().reason == .shutdown)
            #expect(try await events.next() == nil)
            try await tasks.waitForAll()
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

/// Reads an event stream's raw bytes for `duration`.
private func rawStream(path: String, for duration: Duration) async throws -> String {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    let connected = UnixSocketAddress(path: path)?.withSocketAddress { connect(descriptor, $0, $1) }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    let request = Array("GET /v1/events HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
    try await Task.sleep(for: duration)
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if received <= 0 { break }
        bytes += buffer[..<received]
    }
    return String(decoding: bytes, as: UTF8.self)
}
