import FoundationEssentials
import HTTPTypes
import Hummingbird
import Logging
import SpeakAPI
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Who may use one listener: the `Host` a request names, the web page it comes from, and on TCP
/// the bearer token.
///
/// - `Host` (421 otherwise): the listener's own address, `localhost`, `127.0.0.1` or `[::1]`, or a
///   name in `ServerSettings.allowedHosts`; on TCP with the listener's port or none. A page that
///   rebinds its own DNS name to 127.0.0.1 still sends its own name, so it is refused before
///   anything is read or changed. On the Unix socket the socket's path (also percent-encoded)
///   is its address, and the port is not checked (curl sends `Host: localhost` there).
/// - `Origin` (403 otherwise, on every listener): absent (not a browser), the one
///   `ServerSettings.corsOrigin`, or on TCP the listener's own origin under any of its names
///   (the status page it serves, wherever it was opened). Browsers send `Origin` with every cross-origin request, also
///   the `text/plain` and form posts they make without a CORS preflight.
/// - `Authorization: Bearer <token>` (401 otherwise) on TCP when `ServerSettings.tcpToken` is
///   set, for every route but `GET /healthz`, whose report names no announcement and which
///   probes and the CLI use to find a daemon, `GET /`, the status page, and `GET /console`, the operator console, which hold no data. The token is compared in constant time. It is
///   not accepted in the query: URLs end up in logs.
/// - In place of the header, a browser may carry the `speakd-session` cookie of a session it
///   signed in to with the token (`POST /v1/login`, which itself needs no header, as it checks
///   the token it is given; `BrowserSessions`). A cookie is sent by whichever page makes the
///   browser call, so a request it authorises that changes anything (`POST`, `PUT`, `PATCH`,
///   `DELETE`) must also carry the session's `X-CSRF-Token` (403 `csrf` otherwise), which no other
///   page can read. An expired or ended session is 401 naming `Cookie`.
/// - `ServerSettings.readToken`, when set, is a second token with the role `read`: with it, or a
///   session signed in with it, every `GET` and `HEAD` is answered as with the token, and any
///   `POST`, `PUT`, `PATCH` or `DELETE` is 403 `readOnly` naming the role (but `POST /v1/logout`,
///   which ends the caller's own session).
struct AccessPolicy: Sendable {
    /// The name of the session cookie.
    static let sessionCookie = "speakd-session"

    /// The names every listener answers to.
    static let loopbackNames: Set<String> = ["localhost", "127.0.0.1", "::1"]

    private let isTCP: Bool
    private let listener: SpeakEndpoint
    private let port: BoundPort
    private let token: [UInt8]?
    private let readToken: [UInt8]?
    private let tokenFile: String?
    private let corsOrigin: String?
    private let hostNames: Set<String>
    /// The browsers signed in with the token, shared by every listener of the server.
    let sessions: BrowserSessions
    /// The failed sign-ins of each client address, shared by every listener of the server.
    let signIns: SignInLimiter

    /// - Parameters:
    ///   - listener: the listener these rules guard.
    ///   - settings: the token, the CORS origin and the allowed host names.
    ///   - port: the listener's port once bound.
    ///   - sessions: the cookie sessions, which every listener of one server shares.
    ///   - signIns: the failed sign-ins, which every listener of one server shares.
    init(
        listener: SpeakEndpoint, settings: ServerSettings, port: BoundPort, sessions: BrowserSessions,
        signIns: SignInLimiter
    ) {
        self.listener = listener
        self.sessions = sessions
        self.signIns = signIns
        self.port = port
        self.corsOrigin = settings.corsOrigin?.lowercased()
        self.tokenFile = settings.tokenFile
        var names = Self.loopbackNames.union(settings.allowedHosts.map { $0.lowercased() })
        switch listener {
        case .tcp(let host, _):
            isTCP = true
            token = settings.tcpToken.map { Array($0.utf8) }
            readToken = settings.tcpToken == nil ? nil : settings.readToken.map { Array($0.utf8) }
            names.insert(host.lowercased())
        case .unixSocket(let path):
            isTCP = false
            token = nil
            readToken = nil
            // Clients that name the socket in the URL (requests-unixsocket's
            // http+unix://%2Frun%2Fspeakd%2Fspeakd.sock) send its percent-encoded path as Host.
            names.insert(path.lowercased())
            names.insert(Self.percentEncoded(path).lowercased())
        }
        hostNames = names
    }

    /// The refusal of a request whose `Host` names another service, or nil.
    func checkHost(_ authority: String?) async -> APIError? {
        guard let authority, !authority.isEmpty else {
            return .misdirected("the request has no Host header; name this service, e.g. Host: localhost")
        }
        guard let (name, port) = Self.parseAuthority(authority) else {
            return .misdirected("'\(authority)' is not a host name with an optional port")
        }
        guard hostNames.contains(name) else {
            return .misdirected(
                "'\(authority)' is not a name of this service; it answers to \(hostNames.sorted().joined(separator: ", "))"
                    + " (add names with --allowed-host)")
        }
        if isTCP, let port, let bound = await self.port.value(), port != bound {
            return .misdirected("'\(authority)' names port \(port), but this listener is on port \(bound)")
        }
        return nil
    }

    /// Where a request on this listener comes from, for its announcement's origin: the Unix
    /// peer's uid, or TCP with or without the token.
    func origin(of request: Request) -> AnnouncementOrigin {
        if isTCP { return AnnouncementOrigin(front: "http", detail: token == nil ? "tcp open" : "tcp token") }
        return AnnouncementOrigin(front: "http", detail: "unix " + (request.headers[.speakdPeer] ?? "peer unknown"))
    }

    /// Whether a TCP request must carry the token (false on the Unix socket and with `--tcp-open`).
    var requiresToken: Bool { token != nil }

    /// The refusal of a request from a web page whose origin is not allowed, or nil.
    ///
    /// On TCP a page whose origin is this listener itself is the status page speakd serves, and
    /// may call it: `http://` with any name `checkHost` accepts (the page works whether it was
    /// opened as `localhost`, `127.0.0.1` or an allowed host name, whatever `Host` the call then
    /// carries) and this listener's port, written out (an origin without one is port 80). A
    /// foreign page cannot claim such an origin: browsers set `Origin`, and a page that rebinds
    /// its own name to this address keeps its own name, which is not one of this service's.
    func checkOrigin(_ origin: String?) async -> APIError? {
        guard let origin else { return nil }
        let lowered = origin.lowercased()
        if let corsOrigin, lowered == corsOrigin { return nil }
        if isTCP, await isOwnOrigin(lowered) { return nil }
        let allowed = corsOrigin.map { "only \($0) may call this service" } ?? "no web page may (see --cors-origin)"
        return .forbiddenOrigin("requests from the web page at '\(origin)' are refused; \(allowed)")
    }

    /// Whether `origin` (lower case) is `http://NAME:PORT` with a name of this listener and its
    /// bound port.
    private func isOwnOrigin(_ origin: String) async -> Bool {
        guard origin.hasPrefix("http://") else { return false }
        let authority = String(origin.dropFirst("http://".count))
        guard let (name, port) = Self.parseAuthority(authority), hostNames.contains(name),
            let bound = await self.port.value()
        else { return false }
        return (port ?? 80) == bound
    }

    /// The refusal of a TCP request without the right bearer token or session cookie, or nil.
    func checkToken(_ request: Request) -> APIError? {
        guard token != nil else { return nil }
        // Health names no announcement and the status page and the console hold no data;
        // everything they then read goes through this check. Signing in checks the token it is given.
        if request.method == .get || request.method == .head, ["/healthz", "/", "/console"].contains(request.uri.path) {
            return nil
        }
        if request.method == .post, request.uri.path == "/v1/login" { return nil }
        guard let header = request.headers[.authorization] else {
            if let id = request.cookies[Self.sessionCookie]?.value { return checkSession(id, request) }
            return .unauthorized(
                "requests over TCP need 'Authorization: Bearer <token>' with \(whereToFind), "
                    + "or a browser's session cookie from POST /v1/login")
        }
        switch bearerRole(header) {
        case .failure(let refusal): return refusal
        case .success(let role): return checkRole(role, request, credential: "Authorization")
        }
    }

    /// The methods that change something, which a `read` role may not use.
    static let changes: [HTTPRequest.Method] = [.post, .put, .patch, .delete]

    /// The refusal of a request its role may not make: a change with the `read` role (but ending
    /// its own session), or nil.
    private func checkRole(_ role: AccessRole, _ request: Request, credential: String) -> APIError? {
        guard role == .read, Self.changes.contains(request.method) else { return nil }
        if request.method == .post, request.uri.path == "/v1/logout" { return nil }
        return APIError(
            status: .forbidden, code: ErrorResponse.Code.readOnly,
            message:
                "the read-only token (role 'read') may read but not change anything: \(request.method) "
                + "\(request.uri.path) needs the operator token, \(whereToFind)",
            field: credential)
    }

    /// Where the token is, as a refusal names it.
    private var whereToFind: String { tokenFile.map { "the token in \($0)" } ?? "the daemon's token" }

    /// The role of an `Authorization: Bearer` header's token, or the refusal of a header that
    /// is not `Bearer` with one of this listener's tokens.
    func bearerRole(_ header: String) -> Result<AccessRole, APIError> {
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .failure(.unauthorized("expected 'Authorization: Bearer <token>' with \(whereToFind)"))
        }
        return role(ofGiven: String(parts[1].trimmingWhitespace()))
    }

    /// The role of a token given to sign in or in a header: `operator` for the token, `read` for
    /// the read token; the refusal of any other. Both are compared, each in constant time.
    func role(ofGiven given: String) -> Result<AccessRole, APIError> {
        let bytes = Array(given.utf8)
        let isOperator = token.map { Self.constantTimeEqual($0, bytes) } ?? false
        let isReader = readToken.map { Self.constantTimeEqual($0, bytes) } ?? false
        if isOperator { return .success(.operator) }
        if isReader { return .success(.read) }
        return .failure(.unauthorized("the bearer token is wrong; use \(whereToFind)"))
    }

    /// The refusal of a request authorised by the session cookie `id`: the session is gone, or
    /// the request changes something without the session's CSRF token.
    private func checkSession(_ id: String, _ request: Request) -> APIError? {
        guard let session = sessions.session(id) else {
            return .unauthorized(
                "the session of the \(Self.sessionCookie) cookie has expired or ended; sign in again with "
                    + "POST /v1/login", field: "Cookie")
        }
        guard Self.changes.contains(request.method) else { return nil }
        guard let given = request.headers[.csrfToken] else {
            return .csrf("a \(request.method) authorised by the session cookie needs the session's X-CSRF-Token header")
        }
        guard Self.constantTimeEqual(Array(session.csrfToken.utf8), Array(given.utf8)) else {
            return .csrf("the X-CSRF-Token header is not this session's")
        }
        return checkRole(session.role, request, credential: "Cookie")
    }

    /// Logs a refusal with what the request named, so an operator can see who was turned away.
    func logRefusal(_ refusal: APIError, _ request: Request, logger: Logger) {
        logger.info(
            "request refused",
            metadata: [
                "speakd.listener": "\(listener)",
                "speakd.status": "\(refusal.status.code)",
                "speakd.reason": "\(refusal.body.error.code)",
                "speakd.method": "\(request.method)",
                "speakd.path": "\(request.uri.path)",
                "speakd.host": "\(request.head.authority ?? "")",
                "speakd.origin": "\(request.headers[.origin] ?? "")",
            ])
    }

    /// Splits `host[:port]` or `[v6]:port`; the name is lower case without a final dot.
    static func parseAuthority(_ authority: String) -> (name: String, port: Int?)? {
        var name: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            name = authority[authority.index(after: authority.startIndex)..<close]
            let rest = authority[authority.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            name = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            name = Substring(authority)
        }
        if name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty else { return nil }
        var port: Int?
        if let portText {
            guard portText.allSatisfy(\.isASCII), let number = Int(portText), (1...65535).contains(number) else {
                return nil
            }
            port = number
        }
        return (name.lowercased(), port)
    }

    /// Whether `given` equals `expected`, taking the same time whichever byte differs, so the
    /// answer's timing does not reveal how much of a guess was right.
    /// `text` with every byte but RFC 3986's unreserved ones (letters, digits, `-._~`) written as
    /// `%XX`, as clients write a socket path in a URL's host.
    static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            let scalar = Unicode.Scalar(byte)
            if byte < 0x80,
                scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-._~".unicodeScalars.contains(scalar)
            {
                encoded.unicodeScalars.append(scalar)
            } else {
                encoded +=
                    "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return encoded
    }

    static func constantTimeEqual(_ expected: [UInt8], _ given: [UInt8]) -> Bool {
        var difference: UInt8 = expected.count == given.count ? 0 : 1
        for index in expected.indices {
            difference |= expected[index] ^ (index < given.count ? given[index] : 0)
        }
        return difference == 0
    }
}

/// The port a TCP listener is bound to: the configured one, or for port 0 the one the system
/// picked, read from the listener once it listens.
final class BoundPort: Sendable {
    private struct State {
        var port: Int?
        weak var listener: SpeakListener?
    }

    private let state: Mutex<State>

    init(_ address: SpeakEndpoint) {
        var port: Int?
        if case .tcp(_, let configured) = address, configured != 0 { port = configured }
        state = Mutex(State(port: port))
    }

    /// Lets a port-0 listener report its port; weak, as the listener holds the router that holds this.
    func attach(_ listener: SpeakListener) {
        state.withLock { $0.listener = listener }
    }

    /// The port, or nil while it is not known (port 0 without an attached listener).
    func value() async -> Int? {
        let (port, listener) = state.withLock { ($0.port, $0.listener) }
        if let port { return port }
        guard let bound = try? await listener?.waitUntilListening(), case .tcp(_, let port) = bound else {
            return nil
        }
        state.withLock { $0.port = port }
        return port
    }
}

/// The first check of every request: `Host` and `Origin`. It runs before CORS, so a foreign
/// page's preflight is refused too, and renders its refusal itself, outside the error middleware.
struct RequestSourceMiddleware<Context: RequestContext>: RouterMiddleware {
    let policy: AccessPolicy
    let metrics: SpeakMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        // HTTP/1 puts the first Host header in `authority` and leaves any further one among the
        // fields, where a lenient reader might take it: every one must name this service.
        var refusal = await policy.checkHost(request.head.authority)
        for host in request.headers[values: .host] where refusal == nil {
            refusal = await policy.checkHost(host)
        }
        if refusal == nil { refusal = await policy.checkOrigin(request.headers[.origin]) }
        guard let refusal else { return try await next(request, context) }
        policy.logRefusal(refusal, request, logger: context.logger)
        metrics.countResponse(status: refusal.status.code)
        return try refusal.response(from: request, context: context)
    }
}

/// The bearer token on TCP. It runs inside CORS and the error middleware, so an allowed page
/// can read the 401 and preflights (which never carry credentials) are answered without it.
struct BearerTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let policy: AccessPolicy

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if let refusal = policy.checkToken(request) {
            policy.logRefusal(refusal, request, logger: context.logger)
            throw refusal
        }
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    /// `Host`, which HTTP/1 requests carry and `HTTPRequest` keeps as `authority`.
    static let host = HTTPField.Name("Host")!
    /// The session's CSRF token, on every state change a session cookie authorises.
    static let csrfToken = HTTPField.Name("X-CSRF-Token")!
    /// How the request reached a proxy in front of speakd; `https` makes the session cookie `Secure`.
    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!
}
