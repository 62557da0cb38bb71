import FoundationEssentials
import HTTPTypes
import Hummingbird
import SpeakAPI
import SpeechModel

/// What `POST /v1/login` and `GET /v1/login` answer: the session's CSRF token and when it ends.
struct LoginAnswer: Encodable {
    /// The value every `POST`, `PUT`, `PATCH` and `DELETE` the cookie authorises carries in `X-CSRF-Token`.
    let csrfToken: String
    /// When the session ends, RFC 3339 in UTC.
    let expires: String
    /// Its length in seconds from sign-in, as the cookie's `Max-Age` says.
    let maxAge: Int
    /// The role of the token it was signed in with: `operator`, or `read` for the read token,
    /// whose session may not change anything (403 `readOnly`).
    let role: String
}

extension SpeakRoutes {
    // MARK: Browser sessions

    /// `POST /v1/login`: signs a browser in with the bearer token, given as `{"token": "…"}` or,
    /// with no body, in `Authorization`; 200 with `LoginAnswer` and the `speakd-session` cookie.
    @Sendable func login(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard access.requiresToken else {
            throw APIError(
                status: .notFound, code: ErrorResponse.Code.notFound,
                message:
                    "this listener needs no token (the Unix socket, or --tcp-open), so there is nothing to sign in to")
        }
        // Failures are counted by the client's address: past the limit the token is not checked.
        let address = request.headers[.speakdClient] ?? "unknown"
        if let wait = access.signIns.wait(for: address) {
            throw APIError(
                status: .tooManyRequests, code: ErrorResponse.Code.tooManySignIns,
                message:
                    "\(access.signIns.maxFailures) sign-ins from \(address) failed within "
                    + "\(access.signIns.window.components.seconds) s; try again in \(wait) s",
                field: "token", headers: [.retryAfter: String(wait)])
        }
        // A body, when there is one, is what is checked (strictly, like every body); without
        // one, the header.
        let hasBody =
            request.headers[.contentType] != nil || (request.headers[.contentLength].flatMap(Int.init) ?? 0) > 0
        let role: Result<AccessRole, APIError>
        if !hasBody, let header = request.headers[.authorization] {
            role = access.bearerRole(header)
        } else {
            role = access.role(ofGiven: try Self.token(from: try await jsonBody(request)))
        }
        let signedIn: AccessRole
        switch role {
        case .failure(let refusal):
            access.signIns.fail(address)
            throw refusal
        case .success(let value): signedIn = value
        }
        access.signIns.succeed(address)
        let (id, session) = access.sessions.start(role: signedIn)
        var response = try json(answer(session))
        response.headers[.setCookie] = Self.cookie(
            id, maxAge: access.sessions.maxAgeSeconds, secure: Self.isSecure(request))
        return response
    }

    /// `GET /v1/login`: the session the cookie names, so a page that reloads finds its CSRF token.
    @Sendable func currentLogin(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard let id = request.cookies[AccessPolicy.sessionCookie]?.value, let session = access.sessions.session(id)
        else {
            throw APIError(
                status: .notFound, code: ErrorResponse.Code.notFound,
                message: "this request carries no session cookie; sign in with POST /v1/login", field: "Cookie")
        }
        return try json(answer(session))
    }

    /// `POST /v1/logout`: ends the session the cookie names, and clears the cookie; 204.
    @Sendable func logout(_ request: Request, context: BasicRequestContext) async throws -> Response {
        if let id = request.cookies[AccessPolicy.sessionCookie]?.value { access.sessions.end(id) }
        var response = Response(status: .noContent)
        response.headers[.setCookie] = Self.cookie("", maxAge: 0, secure: Self.isSecure(request))
        return response
    }

    private func answer(_ session: BrowserSessions.Session) -> LoginAnswer {
        LoginAnswer(
            csrfToken: session.csrfToken,
            expires: session.expires.formatted(Date.ISO8601FormatStyle()),
            maxAge: access.sessions.maxAgeSeconds, role: session.role.rawValue)
    }

    /// The token of a `{"token": "…"}` body, read as strictly as every body.
    static func token(from body: Data) throws(APIError) -> String {
        do {
            try StrictJSON.check(body)
        } catch {
            throw .malformed(error.message, field: error.field ?? "body")
        }
        let value: JSONValue
        do {
            value = try WireFormat.decoder().decode(JSONValue.self, from: body)
        } catch {
            throw .malformed("the body must be a JSON object", field: "body")
        }
        guard case .object(let object) = value else {
            throw .malformed("the body must be a JSON object", field: "body")
        }
        if let unknown = object.keys.filter({ $0 != "token" }).sorted().first {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "unknown field '\(unknown)'; the body has only 'token'", field: unknown)
        }
        guard case .string(let token) = object["token"] else {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "'token' is required: the bearer token, as a string", field: "token")
        }
        return token
    }

    /// The `Set-Cookie` value: only sent back to this service, never readable by a script or
    /// sent along by another site's page; `Secure` when the browser reached a TLS front.
    static func cookie(_ value: String, maxAge: Int, secure: Bool) -> String {
        "\(AccessPolicy.sessionCookie)=\(value); HttpOnly; SameSite=Strict; Path=/; Max-Age=\(maxAge)"
            + (secure ? "; Secure" : "")
    }

    /// Whether the browser's connection was TLS: a proxy in front of speakd says
    /// `X-Forwarded-Proto: https`. speakd speaks plain HTTP itself; a client that claims https
    /// falsely only gets a cookie its browser will not send back over plain HTTP.
    static func isSecure(_ request: Request) -> Bool {
        request.headers[.forwardedProto]?.trimmingWhitespace().lowercased() == "https"
    }
}
