/// How many connections a listener holds and how long a connection may sit without progress.
///
/// A kiosk's API must stay answerable while strangers hold connections open: idle ones, ones that
/// send a header one byte at a time (slowloris), ones that trickle a body, ones that never read
/// what they are sent. Each of those is closed after its own timeout; at `maxConnections` the
/// connection idle longest is closed to make room for a new one, and when every connection is
/// busy with a request, new ones wait in the listen backlog instead of taking descriptors the
/// daemon needs.
public struct ConnectionLimits: Sendable, Hashable {
    /// The most connections one listener holds open.
    public var maxConnections: Int
    /// How long a connection may wait for the first byte of its next request.
    public var idleTimeout: Duration
    /// How long a request's header may take, from its first byte to its last.
    public var headerTimeout: Duration
    /// How long a request's body may take, from the end of the header to the end of the body.
    public var bodyTimeout: Duration
    /// How long a response may stay stalled because the client does not read it (more than the
    /// channel's write buffer unsent); event streams of clients that stopped reading end this way.
    public var sendTimeout: Duration

    /// The kernel send buffer an event stream's socket asks for (`SO_SNDBUF`; Linux doubles it
    /// for its bookkeeping): room for a few events, so a client that stops reading has little
    /// queued for it in the kernel.
    public static let eventStreamSendBuffer = 16 * 1024

    /// - Parameters: see the properties of the same names; the defaults are speakd's.
    public init(
        maxConnections: Int = 4_096, idleTimeout: Duration = .seconds(60), headerTimeout: Duration = .seconds(10),
        bodyTimeout: Duration = .seconds(30), sendTimeout: Duration = .seconds(10)
    ) {
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.sendTimeout = sendTimeout
    }
}
