import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a Unix socket connection, as the kernel says (`SO_PEERCRED`).
struct PeerCredentials: Sendable, CustomStringConvertible {
    let uid: UInt32
    let pid: Int32

    var description: String { "uid=\(uid)" }

    /// The peer of `channel`, or nil when it is not a Unix socket or the kernel does not say.
    static func read(from channel: any Channel) async -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        do {
            let credentials: KernelCredentials = try await provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)
            ).get()
            return PeerCredentials(uid: credentials.uid, pid: credentials.pid)
        } catch {
            return nil
        }
    }
}

/// The kernel's `struct ucred`, which Glibc's module shows only under `_GNU_SOURCE`: the same
/// three 32-bit fields in the same order.
private struct KernelCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
