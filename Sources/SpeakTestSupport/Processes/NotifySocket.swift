import Foundation
import SpeakAPI

/// A datagram socket standing in for systemd's notification socket.
public final class NotifySocket: Sendable {
    /// Where it is bound: the `NOTIFY_SOCKET` to give.
    public let path: String
    private let descriptor: Int32

    public init() throws {
        path = "/tmp/speakd-notify-\(UUID().uuidString.prefix(8))"
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        let bound = UnixSocketAddress(path: path)?.withSocketAddress { bind(descriptor, $0, $1) }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The next datagram, or nil after 10 s.
    public func receive() async -> String? {
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
