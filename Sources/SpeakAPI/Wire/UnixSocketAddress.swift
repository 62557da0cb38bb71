import Glibc

/// A Unix-domain socket address (`sockaddr_un`) for a path, checked against what `sun_path` holds.
public struct UnixSocketAddress {
    /// The longest path, in bytes, that fits (one byte is kept for the terminating NUL).
    public static let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    private var address = sockaddr_un()
    private let length: socklen_t

    /// The address of `path`; nil when the path is longer than `capacity` bytes.
    /// - Parameters:
    ///   - path: a file-system path, or with `allowingAbstract` an abstract name written `@name`.
    ///   - allowingAbstract: whether a leading `@` names Linux's abstract namespace (as
    ///     systemd's `NOTIFY_SOCKET` may); otherwise `@` is an ordinary file-name character.
    public init?(path: String, allowingAbstract: Bool = false) {
        var bytes = Array(path.utf8)
        let abstract = allowingAbstract && bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        guard bytes.count <= Self.capacity else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        // Abstract names are not NUL-terminated: the length says where they end.
        length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
    }

    /// Calls `body` with the address as a `sockaddr` and its length, for `bind`, `connect` or `sendto`.
    public func withSocketAddress<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> T) rethrows -> T {
        try withUnsafePointer(to: address) {
            try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, length) }
        }
    }
}
