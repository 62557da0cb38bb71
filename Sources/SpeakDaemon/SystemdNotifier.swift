import Foundation
import Glibc
import Logging

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
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        let abstract = pathBytes.first == UInt8(ascii: "@")
        if abstract { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else {
            throw SystemdNotifyError(description: "NOTIFY_SOCKET '\(socketPath)' is longer than \(capacity - 1) bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }
        // Abstract names are not NUL-terminated: the length says where they end.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (abstract ? 0 : 1))

        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw SystemdNotifyError(description: "socket(): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bytes.withUnsafeBytes {
                    sendto(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
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
