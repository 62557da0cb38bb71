import Foundation
import SpeakAPI
import SpeakDaemon
import Testing

/// A datagram socket standing in for systemd's notification socket.
final class NotifySocket: Sendable {
    let path: String
    let descriptor: Int32

    init() throws {
        path = "/tmp/speakd-notify-\(UUID().uuidString.prefix(8))"
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        let bound = UnixSocketAddress(path: path)?.withSocketAddress { bind(descriptor, $0, $1) }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The next datagram, or nil after 10 s.
    func receive() async -> String? {
        let descriptor = descriptor
        return await withCheckedContinuation { continuation in
            Thread {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                continuation.resume(returning: count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil)
            }.start()
        }
    }

    deinit {
        close(descriptor)
        unlink(path)
    }
}

@Suite("systemd notification")
struct SystemdNotifierTests {
    @Test(.timeLimit(.minutes(1))) func sendsDatagramsToNotifySocket() async throws {
        let socket = try NotifySocket()
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path])
        try notifier.notify("READY=1")
        #expect(await socket.receive() == "READY=1")
        try notifier.notify("STOPPING=1")
        #expect(await socket.receive() == "STOPPING=1")
    }

    @Test func doesNothingOutsideSystemd() throws {
        let notifier = SystemdNotifier(environment: [:])
        #expect(notifier.socketPath == nil)
        try notifier.notify("READY=1")
    }

    @Test func unreachableSocketIsAnError() {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/notify"])
        #expect(throws: SystemdNotifyError.self) { try notifier.notify("READY=1") }
    }
}
