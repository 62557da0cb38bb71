import Logging
import NIOCore
import NIOPosix
import Testing

@testable import SpeakWyoming

/// The listener on loopback TCP with the fake backend: events over a real socket, and a peer
/// that claims a huge payload.
@Suite(.timeLimit(.minutes(1))) struct WyomingServerTests {
    /// Sends `bytes` to a fresh server and reads what comes back until the server closes or
    /// `until` is seen in it.
    private func exchange(_ bytes: ByteBuffer, until marker: String? = nil) async throws -> (text: String, closed: Bool)
    {
        let server = WyomingServer(
            address: .tcp(host: "127.0.0.1", port: 0), backend: FakeBackend(),
            settings: WyomingSettings(version: "test"), logger: Logger(label: "test"))
        let running = Task { try await server.run() }
        defer { running.cancel() }
        try await server.waitUntilListening()
        let port = try #require(server.port)
        let client = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await client.executeThenClose { inbound, outbound in
            try await outbound.write(bytes)
            var received = ""
            do {
                for try await buffer in inbound {
                    received += String(buffer: buffer)
                    if let marker, received.contains(marker) { return (received, false) }
                }
            } catch {
                // Reset: the server closed with what it had not read still unread.
            }
            return (received, true)
        }
    }

    @Test func describeOverTCPIsAnsweredWithInfo() async throws {
        let answer = try await exchange(WyomingEvent("describe").encoded(), until: "en_US-lessac-medium")
        #expect(answer.text.hasPrefix(#"{"data_length":"#))
        #expect(answer.text.contains(#""type":"info""#))
    }

    @Test func aGigabytePayloadIsAnErrorAndTheConnectionCloses() async throws {
        let answer = try await exchange(
            ByteBuffer(string: #"{"type":"audio-chunk","payload_length":1000000000}"# + "\n"))
        #expect(answer.closed)
        #expect(answer.text.contains(#""type":"error""#))
        #expect(answer.text.contains("tooLarge"))
    }

    @Test func aHeaderLineOfTenMegabytesIsAnErrorAndTheConnectionCloses() async throws {
        let answer = try await exchange(ByteBuffer(repeating: UInt8(ascii: "{"), count: 10 << 20))
        // Closed, its `error` ahead of the close unless the reset overtook it.
        #expect(answer.closed)
    }
}
