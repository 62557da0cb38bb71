/// Where speakd listens, and so where a client connects: a TCP host and port, or a Unix socket.
public enum SpeakEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// A TCP socket. A listener on port 0 takes a free port and reports which once it is bound.
    case tcp(host: String, port: Int)
    /// A Unix-domain stream socket at `path`; speakd creates it with mode 0660.
    case unixSocket(path: String)

    /// Which side reads an address: both take the same syntax, but only a listener may leave the
    /// host or the port to be chosen.
    public enum Side: Sendable, Hashable {
        /// speakd's `--http`: `:PORT` listens on loopback, port 0 on a free port.
        case listener
        /// The CLI's `--http`: a client must name the host and the port it connects to.
        case client
    }

    /// Parses `HOST:PORT` or `[IPV6]:PORT`, and for a listener also `:PORT` (loopback) and port 0.
    /// - Parameters:
    ///   - value: the text of the flag, variable or setting.
    ///   - side: who reads it, which decides whether the host and port may be left open.
    /// - Throws: `SpeakEndpointError`, naming the value and what is wrong with it.
    public init(hostPort value: String, for side: Side) throws(SpeakEndpointError) {
        let host: Substring
        let port: Substring
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]"), value[value.index(after: close)...].hasPrefix(":") else {
                throw SpeakEndpointError(value: value, side: side, reason: "expected [ADDRESS]:PORT")
            }
            host = value[value.index(after: value.startIndex)..<close]
            port = value[value.index(close, offsetBy: 2)...]
        } else {
            guard let colon = value.lastIndex(of: ":") else {
                throw SpeakEndpointError(value: value, side: side, reason: "expected HOST:PORT")
            }
            host = value[..<colon]
            port = value[value.index(after: colon)...]
            // `::1:80` could be an address with a port or an address alone: brackets decide.
            if host.contains(":") {
                throw SpeakEndpointError(
                    value: value, side: side, reason: "write an IPv6 address in brackets, [::1]:7770")
            }
        }
        let ports = side == .listener ? 0...65535 : 1...65535
        guard let number = Int(port), ports.contains(number) else {
            throw SpeakEndpointError(
                value: value, side: side,
                reason: "'\(port)' is not a port number \(ports.lowerBound)–\(ports.upperBound)")
        }
        if host.isEmpty && side == .client {
            throw SpeakEndpointError(value: value, side: side, reason: "the host is empty")
        }
        self = .tcp(host: host.isEmpty ? "127.0.0.1" : String(host), port: number)
    }

    /// `HOST:PORT` (`[IPV6]:PORT`), as `init(hostPort:for:)` reads it and an HTTP `Host` header
    /// carries it, or `unix:PATH`.
    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unixSocket(let path): "unix:\(path)"
        }
    }
}

/// A `HOST:PORT` value that does not parse.
public struct SpeakEndpointError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text that did not parse.
    public let value: String
    /// Who read it.
    public let side: SpeakEndpoint.Side
    /// What is wrong with it.
    public let reason: String

    public var description: String {
        "'\(value)' is not a \(side == .listener ? "listen" : "daemon") address: \(reason)"
    }
}
