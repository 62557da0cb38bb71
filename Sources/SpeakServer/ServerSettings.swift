/// How the HTTP front limits and decorates requests; the same for every listener. What an
/// announcement may be (body size, text, spans, chimes) is the service's (`ServiceLimits`), and
/// so are the bounds on renders (`RenderLimits`), which every front that renders shares.
public struct ServerSettings: Sendable, Hashable {
    /// How often an idle event stream sends a comment so proxies and clients see it is alive.
    public var heartbeatInterval: Duration
    /// The one browser origin allowed to call the API (a kiosk page), or nil for no CORS headers.
    /// A request with any other `Origin` is refused (403), on every listener.
    public var corsOrigin: String?
    /// The bearer token every TCP request but `GET /healthz` must carry (401 without it); nil
    /// leaves TCP open (`--tcp-open`). The Unix socket never needs it.
    public var tcpToken: String?
    /// Where the token lives, named in 401 answers so a client knows where to look.
    public var tokenFile: String?
    /// A second TCP token, read-only (`--read-token-file`): with it every `GET` and the event
    /// stream are answered, and any change is 403 `readOnly`. Only with `tcpToken`.
    public var readToken: String?
    /// Host names besides the listener's own address and the loopback names that a request's
    /// `Host` may carry (421 otherwise), lower case, without a port.
    public var allowedHosts: [String]
    /// How long a browser's cookie session lasts from `POST /v1/login` (12 hours by default).
    public var sessionMaxAge: Duration
    /// The most cookie sessions kept at once; one more ends the one that expires first.
    public var maxSessions: Int

    /// - Parameters: see the properties of the same names; the defaults are speakd's, except
    ///   that speakd's TCP listener has a token.
    public init(
        heartbeatInterval: Duration = .seconds(15), corsOrigin: String? = nil, tcpToken: String? = nil,
        tokenFile: String? = nil, allowedHosts: [String] = [], sessionMaxAge: Duration = .seconds(12 * 3_600),
        maxSessions: Int = 64, readToken: String? = nil
    ) {
        self.readToken = readToken
        self.sessionMaxAge = sessionMaxAge
        self.maxSessions = maxSessions
        self.heartbeatInterval = heartbeatInterval
        self.corsOrigin = corsOrigin
        self.tcpToken = tcpToken
        self.tokenFile = tokenFile
        self.allowedHosts = allowedHosts
    }
}
