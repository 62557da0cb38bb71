/// Where a listener accepts connections.
public enum ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A TCP socket; port 0 picks a free port (see `SpeakListener.waitUntilListening()`).
    case tcp(host: String, port: Int)
    /// A Unix-domain stream socket at `path`, created with mode 0660.
    case unixSocket(path: String)

    /// Parses `HOST:PORT`, `[IPV6]:PORT` or `:PORT` (loopback); the error names the value.
    public init(hostPort value: String) throws(ListenAddressError) {
        let host: Substring
        let port: Substring
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]"), value[value.index(after: close)...].hasPrefix(":") else {
                throw ListenAddressError(value: value, reason: "expected [ADDRESS]:PORT")
            }
            host = value[value.index(after: value.startIndex)..<close]
            port = value[value.index(close, offsetBy: 2)...]
        } else {
            guard let colon = value.lastIndex(of: ":") else {
                throw ListenAddressError(value: value, reason: "expected HOST:PORT")
            }
            host = value[..<colon]
            port = value[value.index(after: colon)...]
            if host.contains(":") {
                throw ListenAddressError(value: value, reason: "write an IPv6 address in brackets, [::1]:7770")
            }
        }
        guard let number = Int(port), (0...65535).contains(number) else {
            throw ListenAddressError(value: value, reason: "'\(port)' is not a port number 0–65535")
        }
        self = .tcp(host: host.isEmpty ? "127.0.0.1" : String(host), port: number)
    }

    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unixSocket(let path): "unix:\(path)"
        }
    }
}

/// A listen address that does not parse.
public struct ListenAddressError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text that did not parse.
    public let value: String
    /// What is wrong with it.
    public let reason: String

    public var description: String { "'\(value)' is not a listen address: \(reason)" }
}
