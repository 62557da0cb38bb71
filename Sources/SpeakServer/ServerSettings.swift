/// How the HTTP front limits and decorates requests; the same for every listener. What an
/// announcement may be (body size, text, spans, chimes) is the intake's (`ServiceLimits`).
public struct ServerSettings: Sendable, Hashable {
    /// The longest audio one `POST /v1/speech` renders, in seconds: 413 beyond it naming the field
    /// that carries the text while the render is held, or its stream ended before its last chunk
    /// once it streams (a render longer than `SpeakRoutes.bufferedSeconds` streams).
    public var maxSpeechSeconds: Int
    /// How many `POST /v1/speech` renders hold audio at once; more wait for one of them. Each holds
    /// at most 30 s of audio and what its engine renders ahead (1.3 MB and 0.5 MB at 22050 Hz).
    public var maxConcurrentSpeech: Int
    /// How many `POST /v1/speech` requests may wait for a render slot (429 `tooManyRenders` beyond).
    public var maxWaitingSpeech: Int
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
    /// Host names besides the listener's own address and the loopback names that a request's
    /// `Host` may carry (421 otherwise), lower case, without a port.
    public var allowedHosts: [String]

    /// - Parameters: see the properties of the same names; the defaults are speakd's, except
    ///   that speakd's TCP listener has a token.
    public init(
        maxSpeechSeconds: Int = 20 * 60,
        maxConcurrentSpeech: Int = 2, maxWaitingSpeech: Int = 64,
        heartbeatInterval: Duration = .seconds(15), corsOrigin: String? = nil, tcpToken: String? = nil,
        tokenFile: String? = nil, allowedHosts: [String] = []
    ) {
        self.maxSpeechSeconds = maxSpeechSeconds
        self.maxConcurrentSpeech = maxConcurrentSpeech
        self.maxWaitingSpeech = maxWaitingSpeech
        self.heartbeatInterval = heartbeatInterval
        self.corsOrigin = corsOrigin
        self.tcpToken = tcpToken
        self.tokenFile = tokenFile
        self.allowedHosts = allowedHosts
    }
}
