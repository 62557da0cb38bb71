/// How the HTTP front limits and decorates requests; the same for every listener.
public struct ServerSettings: Sendable, Hashable {
    /// The largest request body accepted, in bytes (413 beyond).
    public var maxBodyBytes: Int
    /// The longest plain text of one utterance, in characters (413 beyond).
    public var maxTextLength: Int
    /// The most spans one utterance may have (413 beyond).
    public var maxSpans: Int
    /// How often an idle event stream sends a comment so proxies and clients see it is alive.
    public var heartbeatInterval: Duration
    /// The one browser origin allowed to call the API (a kiosk page), or nil for no CORS headers.
    public var corsOrigin: String?

    /// - Parameters: see the properties of the same names; the defaults are speakd's.
    public init(
        maxBodyBytes: Int = 64 * 1024, maxTextLength: Int = 5_000, maxSpans: Int = 100,
        heartbeatInterval: Duration = .seconds(15), corsOrigin: String? = nil
    ) {
        self.maxBodyBytes = maxBodyBytes
        self.maxTextLength = maxTextLength
        self.maxSpans = maxSpans
        self.heartbeatInterval = heartbeatInterval
        self.corsOrigin = corsOrigin
    }
}
