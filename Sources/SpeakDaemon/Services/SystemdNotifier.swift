import FoundationEssentials
import Glibc
import Logging
import SpeakAPI

/// Sends state changes to systemd's notification socket (`sd_notify(3)` without libsystemd).
///
/// `Type=notify` units start when `READY=1` arrives; `STOPPING=1` tells systemd that shutdown
/// began. Outside systemd (`NOTIFY_SOCKET` unset) every call does nothing.
public struct SystemdNotifier: Sendable {
    /// The socket path; a leading `@` names an abstract socket.
    public let socketPath: String?

    /// - Parameter environment: where `NOTIFY_SOCKET` is read.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Sends `message` (`READY=1`, `STOPPING=1`, `STATUS=…`) as one datagram.
    /// - Throws: `SystemdNotifyError` when the socket cannot be reached.
    public func notify(_ message: String) throws(SystemdNotifyError) {
        guard let socketPath else { return }
        guard let address = UnixSocketAddress(path: socketPath, allowingAbstract: true) else {
            throw SystemdNotifyError(
                description: "NOTIFY_SOCKET '\(socketPath)' is longer than \(UnixSocketAddress.capacity) bytes")
        }

        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw SystemdNotifyError(description: "socket(): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let bytes = Array(message.utf8)
        let sent = address.withSocketAddress { socketAddress, length in
            bytes.withUnsafeBytes {
                sendto(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, length)
            }
        }
        guard sent == bytes.count else {
            throw SystemdNotifyError(description: "cannot notify \(socketPath): \(String(cString: strerror(errno)))")
        }
    }
}

/// systemd's notification socket could not be reached.
public struct SystemdNotifyError: Error, Sendable, CustomStringConvertible {
    public let description: String
}
