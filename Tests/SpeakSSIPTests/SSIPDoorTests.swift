import Foundation
import Logging
import SpeakAPI
import SpeakSSIP
import SpeakService
import SpeakTestSupport
import SpeechModel
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The SSIP front against a fake service: a message goes through the door's `accept`, and each
/// refusal code becomes its SSIP reply in one place.
@Suite(.timeLimit(.minutes(1))) struct SSIPDoorTests {
    /// A full queue or a sound that is down is the server's trouble (300); a value the service
    /// refuses is the client's (514).
    @Test(arguments: [
        (SpeakError.Code.queueFull, "300"), (.audioUnavailable, "300"), (.shuttingDown, "300"), (.invalid, "514"),
        (.notFound, "514"), (.malformed, "514"), (.tooLarge, "514"), (.conflict, "514"), (.stateUnavailable, "514"),
        (.engineUnavailable, "514"), (.forbidden, "514"),
    ])
    func aRefusalIsItsReply(_ code: SpeakError.Code, _ reply: String) async throws {
        let service = FakeSpeakService()
        service.refuse("accept", with: SpeakError(code, name: "someCode", "refused by the test"))
        try await withListener(service) { client in
            #expect(try client.ask("SPEAK").hasPrefix("230"))
            let answer = try client.ask("Platform four\r\n.")
            #expect(answer.hasPrefix(reply), "\(answer)")
        }
        #expect(service.calls.map(\.description) == ["accept Platform four from ssip"])
    }

    @Test func anAcceptedMessageIsQueuedThroughTheDoor() async throws {
        let service = FakeSpeakService()
        try await withListener(service) { client in
            #expect(try client.ask("SET SELF PRIORITY important").hasPrefix("2"))
            #expect(try client.ask("SPEAK").hasPrefix("230"))
            let answer = try client.ask("Doors closing\r\n.")
            #expect(answer.hasPrefix("225-"), "\(answer)")
        }
        #expect(service.calls.map(\.description) == ["accept Doors closing from ssip"])
    }

    /// `PAUSE`, `RESUME`, `STOP` and `CANCEL` go through the door for the client's own messages,
    /// each after asking the announcement's state: a pause only of a speaking one, a resume only
    /// of a paused one, a stop of one that is sounding, a cancel of any.
    @Test func controlsGoThroughTheDoorByState() async throws {
        let service = FakeSpeakService()
        try await withListener(service) { client throws in
            #expect(try client.ask("SPEAK").hasPrefix("230"))
            #expect(try client.ask("Doors closing\r\n.").hasPrefix("225-"))
            // Waiting: nothing to pause, resume or stop.
            #expect(try client.ask("PAUSE SELF").hasPrefix("211"))
            service.setState(.speaking, of: "fake-1")
            #expect(try client.ask("PAUSE SELF").hasPrefix("211"))
            #expect(try client.ask("RESUME SELF").hasPrefix("212"))
            service.setState(.paused, of: "fake-1")
            #expect(try client.ask("RESUME SELF").hasPrefix("212"))
            #expect(try client.ask("STOP SELF").hasPrefix("210"))
            #expect(try client.ask("CANCEL SELF").hasPrefix("213"))
        }
        #expect(
            service.calls.map(\.description) == [
                "accept Doors closing from ssip", "status fake-1", "status fake-1", "pause fake-1", "status fake-1",
                "status fake-1", "resume fake-1", "status fake-1", "cancel fake-1", "status fake-1", "cancel fake-1",
            ])
    }

    /// A voice named by `SET SELF SYNTHESIS_VOICE` is looked up among the service's voices, and
    /// its language goes with the next message.
    @Test func aVoiceIsLookedUpThroughTheDoor() async throws {
        let service = FakeSpeakService(voices: [
            VoiceInfo(identifier: "gmw/de", name: "gmw/de", languages: ["de"], engine: "espeak-ng")
        ])
        try await withListener(service) { client throws in
            #expect(try client.ask("SET SELF SYNTHESIS_VOICE gmw/de").hasPrefix("209"))
            #expect(try client.ask("LIST SYNTHESIS_VOICES").hasPrefix("2"))
        }
        #expect(service.calls.map(\.description) == ["voices", "voices"])
    }

    private func withListener(
        _ service: FakeSpeakService, _ body: @escaping @Sendable (LineClient) throws -> Void
    ) async throws {
        let path = "/tmp/speakd-ssip-door-\(UUID().uuidString.prefix(8)).sock"
        let listener = SSIPListener(path: path, service: service, logger: Logger(label: "test"))
        let running = Task { try await listener.run() }
        defer {
            running.cancel()
            unlink(path)
        }
        try await listener.waitUntilListening()
        let client = try LineClient(path: path)
        defer { client.close() }
        // The client blocks on its socket: on a thread of its own, so the front's tasks on the
        // cooperative pool are never kept waiting by it.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread {
                continuation.resume(with: Result { try body(client) })
            }.start()
        }
    }
}

/// A blocking SSIP client on a Unix socket: sends a line, reads the reply up to its last line
/// (`NNN ` after any `NNN-` lines).
final class LineClient: Sendable {
    let descriptor: Int32

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() where index < raw.count - 1 { raw[index] = byte }
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw Failure(description: "connect \(path): errno \(errno)") }
    }

    /// Sends `line` (CRLF added) and returns the reply's lines joined by newlines.
    func ask(_ line: String) throws -> String {
        let bytes = Array((line + "\r\n").utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else { throw Failure(description: "write") }
        var reply = ""
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let lines = reply.split(separator: "\r\n", omittingEmptySubsequences: true)
            if reply.hasSuffix("\r\n"), let last = lines.last, last.count >= 4,
                last[last.index(last.startIndex, offsetBy: 3)] == " "
            {
                return lines.joined(separator: "\n")
            }
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { throw Failure(description: "no reply to '\(line)'; so far: \(reply)") }
            reply += String(decoding: buffer[..<count], as: UTF8.self)
        }
    }

    func close() { _ = Glibc.close(descriptor) }
}
