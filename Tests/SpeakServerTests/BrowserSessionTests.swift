import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SpeakAPI
import Synchronization
import Testing

@testable import SpeakServer

/// The cookie session a browser signs in to with the token (`POST /v1/login`): what it answers,
/// and each refusal, through the router.
@Suite("Browser sessions", .timeLimit(.minutes(1)))
struct BrowserSessionTests {
    static let token = AccessTests.token
    static let settings = ServerSettings(
        tcpToken: token, tokenFile: "/run/speakd/token", sessionMaxAge: .seconds(600), maxSessions: 3)

    /// A wall clock the test moves.
    final class Wall: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func read() -> Date { now.withLock { $0 } }
        func advance(_ seconds: Double) { now.withLock { $0 += seconds } }
    }

    struct SignedIn {
        let cookie: String
        let csrf: String
        let setCookie: String
    }

    static func signIn(_ client: some TestClientProtocol, headers: HTTPFields = [:]) async throws -> SignedIn {
        var fields = headers
        fields[.contentType] = "application/json"
        let response = try await client.execute(
            uri: "/v1/login", method: .post, headers: fields, body: jsonBody(#"{"token": "\#(token)"}"#))
        #expect(response.status == .ok)
        let setCookie = try #require(response.headers[.setCookie])
        let value = try #require(setCookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
        let csrf = try #require(body["csrfToken"] as? String)
        #expect(body["maxAge"] as? Int == 600)
        return SignedIn(cookie: "speakd-session=\(value)", csrf: csrf, setCookie: setCookie)
    }

    static func headers(_ session: SignedIn, csrf: String? = nil) -> HTTPFields {
        var fields: HTTPFields = [.contentType: "application/json", .cookie: session.cookie]
        if let csrf { fields[.csrfToken] = csrf }
        return fields
    }

    @Test("POST /v1/login sets an HttpOnly, SameSite=Strict cookie and answers its CSRF token; Secure behind TLS")
    func signingIn() async throws {
        let harness = Harness(settings: Self.settings)
        try await harness.test(listener: AccessTests.tcp, raw: true) { client in
            let session = try await Self.signIn(client)
            #expect(session.setCookie.hasPrefix("speakd-session="))
            for part in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=600"] {
                #expect(session.setCookie.contains("; \(part)"), "\(part)")
            }
            #expect(!session.setCookie.contains("Secure"))
            #expect(session.csrf.count == 64 && !session.cookie.contains(session.csrf))
            let secure = try await Self.signIn(client, headers: [.forwardedProto: "https"])
            #expect(secure.setCookie.hasSuffix("; Secure"))

            // The token in Authorization signs in too; a wrong one, or none, does not.
            let header = try await client.execute(
                uri: "/v1/login", method: .post, headers: [.authorization: "Bearer \(Self.token)"])
            #expect(header.status == .ok && header.headers[.setCookie] != nil)
            // A body is checked when there is one, whatever the header says.
            let both = try await client.execute(
                uri: "/v1/login", method: .post, headers: AccessTests.bearer(Self.token),
                body: jsonBody(#"{"token": 7}"#))
            try AccessTests.expectError(both, .unprocessableContent, code: "invalidValue", field: "token")
            let wrong = try await client.execute(
                uri: "/v1/login", method: .post, headers: AccessTests.json, body: jsonBody(#"{"token": "guess"}"#))
            try AccessTests.expectError(wrong, .unauthorized, code: "unauthorized", field: "Authorization")
            #expect(wrong.headers[.setCookie] == nil)
            let unknown = try await client.execute(
                uri: "/v1/login", method: .post, headers: AccessTests.json,
                body: jsonBody(#"{"token": "\#(Self.token)", "user": "x"}"#))
            try AccessTests.expectError(unknown, .unprocessableContent, code: "invalidValue", field: "user")
            let twice = try await client.execute(
                uri: "/v1/login", method: .post, headers: AccessTests.json,
                body: jsonBody(#"{"token": "a", "token": "\#(Self.token)"}"#))
            #expect(twice.status == .badRequest)

            // The cookie reads like the token, and GET /v1/login gives the session back.
            let list = try await client.execute(uri: "/v1/announcements", method: .get, headers: Self.headers(session))
            #expect(list.status == .ok)
            let current = try await client.execute(uri: "/v1/login", method: .get, headers: Self.headers(session))
            #expect(String(buffer: current.body).contains(session.csrf))
            // The bearer token keeps working beside it.
            let bearer = try await client.execute(
                uri: "/v1/announcements", method: .get, headers: AccessTests.bearer(Self.token))
            #expect(bearer.status == .ok)
        }
    }

    @Test("A change with the cookie needs the session's X-CSRF-Token: 403 csrf without it or with another")
    func changesNeedTheCSRFToken() async throws {
        let harness = Harness(settings: Self.settings)
        try await harness.test(listener: AccessTests.tcp, raw: true) { client in
            let session = try await Self.signIn(client)
            let other = try await Self.signIn(client)
            let body = jsonBody(#"{"text": "hello"}"#)
            // One character changed (the last, to another digit or letter), which fails whatever it was.
            let altered = String(session.csrf.dropLast()) + (session.csrf.last == "0" ? "1" : "0")
            for csrf in [nil, "", altered, other.csrf] {
                for (uri, method) in [
                    ("/v1/announcements", HTTPRequest.Method.post), ("/v1/announcements", .delete),
                    ("/v1/schedules/x", .patch), ("/v1/session", .put), ("/v1/logout", .post),
                ] {
                    let response = try await client.execute(
                        uri: uri, method: method, headers: Self.headers(session, csrf: csrf), body: body)
                    try AccessTests.expectError(response, .forbidden, code: "csrf", field: "X-CSRF-Token")
                }
            }
            #expect(await harness.running.queue.snapshot().isEmpty)
            let accepted = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: Self.headers(session, csrf: session.csrf), body: body)
            #expect(accepted.status == .accepted)
        }
    }

    @Test("An expired session is 401 naming Cookie; logout ends one; the oldest go past the limit")
    func sessionsEnd() async throws {
        let wall = Wall()
        let harness = Harness(settings: Self.settings, now: { wall.read() })
        try await harness.test(listener: AccessTests.tcp, raw: true) { client in
            let session = try await Self.signIn(client)
            wall.advance(599)
            let alive = try await client.execute(uri: "/v1/announcements", method: .get, headers: Self.headers(session))
            #expect(alive.status == .ok)
            wall.advance(1)
            let expired = try await client.execute(
                uri: "/v1/announcements", method: .get, headers: Self.headers(session))
            try AccessTests.expectError(expired, .unauthorized, code: "unauthorized", field: "Cookie")
            let expiredChange = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: Self.headers(session, csrf: session.csrf),
                body: jsonBody(#"{"text": "hello"}"#))
            try AccessTests.expectError(expiredChange, .unauthorized, code: "unauthorized", field: "Cookie")

            let second = try await Self.signIn(client)
            let out = try await client.execute(
                uri: "/v1/logout", method: .post, headers: Self.headers(second, csrf: second.csrf))
            #expect(out.status == .noContent)
            #expect(out.headers[.setCookie]?.contains("Max-Age=0") == true)
            let after = try await client.execute(uri: "/v1/announcements", method: .get, headers: Self.headers(second))
            try AccessTests.expectError(after, .unauthorized, code: "unauthorized", field: "Cookie")
            let gone = try await client.execute(uri: "/v1/login", method: .get, headers: Self.headers(second))
            try AccessTests.expectError(gone, .unauthorized, code: "unauthorized", field: "Cookie")

            // At most three: a fourth sign-in ends the one that expires first.
            var sessions: [SignedIn] = []
            for _ in 0..<4 {
                sessions.append(try await Self.signIn(client))
                wall.advance(1)
            }
            #expect(harness.server.sessions.count == 3)
            let first = try await client.execute(
                uri: "/v1/announcements", method: .get, headers: Self.headers(sessions[0]))
            #expect(first.status == .unauthorized)
            let last = try await client.execute(
                uri: "/v1/announcements", method: .get, headers: Self.headers(sessions[3]))
            #expect(last.status == .ok)
        }
    }

    @Test("Five failed sign-ins from one address within a minute: then 429 tooManySignIns with Retry-After")
    func failedSignInsAreLimited() async throws {
        let wall = Wall()
        let harness = Harness(settings: Self.settings, now: { wall.read() })
        try await harness.test(listener: AccessTests.tcp, raw: true) { client in
            // The listener names the peer's address in Speakd-Client (and drops a client's own).
            func attempt(_ token: String, from address: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/login", method: .post,
                    headers: [.contentType: "application/json", .speakdClient: address],
                    body: jsonBody(#"{"token": "\#(token)"}"#))
            }
            for second in 0..<5 {
                let wrong = try await attempt("guess \(second)", from: "192.0.2.7")
                try AccessTests.expectError(wrong, .unauthorized, code: "unauthorized", field: "Authorization")
                wall.advance(10)
            }
            // 50 s after the first failure: 10 s until it leaves the minute. The right token is
            // not even checked.
            let held = try await attempt(Self.token, from: "192.0.2.7")
            try AccessTests.expectError(held, .tooManyRequests, code: "tooManySignIns", field: "token")
            #expect(held.headers[.retryAfter] == "10")
            #expect(held.headers[.setCookie] == nil)
            let message = try decode(ErrorResponse.self, held).error.message
            #expect(message.contains("192.0.2.7") && message.contains("10 s"), "\(message)")
            // Another address signs in.
            #expect(try await attempt(Self.token, from: "192.0.2.8").status == .ok)
            // Once the first failure is a minute old, one more try is allowed; it succeeds and
            // clears the count.
            wall.advance(10)
            #expect(try await attempt(Self.token, from: "192.0.2.7").status == .ok)
            for _ in 0..<4 {
                #expect(try await attempt("guess", from: "192.0.2.7").status == .unauthorized)
            }
            #expect(try await attempt(Self.token, from: "192.0.2.7").status == .ok)
        }
    }

    @Test(
        "The read-only token reads everything and changes nothing: 403 readOnly naming the role, by header or session")
    func readOnlyRole() async throws {
        let reader = String(repeating: "7a", count: 32)
        var settings = Self.settings
        settings.readToken = reader
        let harness = Harness(settings: settings)
        try await harness.test(listener: AccessTests.tcp, raw: true) { client in
            for path in ["/v1/announcements", "/v1/voices", "/v1/chimes", "/metrics"] {
                let read = try await client.execute(uri: path, method: .get, headers: AccessTests.bearer(reader))
                #expect(read.status == .ok, "\(path)")
            }
            for (uri, method) in [
                ("/v1/announcements", HTTPRequest.Method.post), ("/v1/announcements", .delete),
                ("/v1/schedules/x", .patch), ("/v1/clips/x", .put), ("/v1/pause", .post),
            ] {
                var headers = AccessTests.bearer(reader)
                headers[.contentType] = "application/json"
                let refused = try await client.execute(
                    uri: uri, method: method, headers: headers, body: jsonBody(#"{"text": "hello"}"#))
                try AccessTests.expectError(refused, .forbidden, code: "readOnly", field: "Authorization")
                let message = try decode(ErrorResponse.self, refused).error.message
                #expect(message.contains("role 'read'") && message.contains("/run/speakd/token"), "\(message)")
            }
            #expect(await harness.running.queue.snapshot().isEmpty)

            // Signed in with it, the session has the role too; it may still sign itself out.
            let login = try await client.execute(
                uri: "/v1/login", method: .post, headers: AccessTests.json, body: jsonBody(#"{"token": "\#(reader)"}"#))
            #expect(login.status == .ok)
            let answer = try #require(
                try JSONSerialization.jsonObject(with: Data(buffer: login.body)) as? [String: Any])
            #expect(answer["role"] as? String == "read")
            let csrf = try #require(answer["csrfToken"] as? String)
            let setCookie = try #require(login.headers[.setCookie])
            let cookie = String(try #require(setCookie.split(separator: ";").first))
            let session = SignedIn(cookie: cookie, csrf: csrf, setCookie: setCookie)
            let list = try await client.execute(uri: "/v1/announcements", method: .get, headers: Self.headers(session))
            #expect(list.status == .ok)
            let current = try await client.execute(uri: "/v1/login", method: .get, headers: Self.headers(session))
            #expect(String(buffer: current.body).contains(#""role":"read""#))
            let post = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: Self.headers(session, csrf: csrf),
                body: jsonBody(#"{"text": "hello"}"#))
            try AccessTests.expectError(post, .forbidden, code: "readOnly", field: "Cookie")
            // Without the CSRF token it is the CSRF refusal first, as for any session.
            let forged = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: Self.headers(session),
                body: jsonBody(#"{"text": "hello"}"#))
            try AccessTests.expectError(forged, .forbidden, code: "csrf", field: "X-CSRF-Token")
            let out = try await client.execute(
                uri: "/v1/logout", method: .post, headers: Self.headers(session, csrf: csrf))
            #expect(out.status == .noContent)

            // The operator token's session says so, and changes as before.
            let operatorLogin = try await client.execute(
                uri: "/v1/login", method: .post, headers: AccessTests.json,
                body: jsonBody(#"{"token": "\#(Self.token)"}"#))
            #expect(String(buffer: operatorLogin.body).contains(#""role":"operator""#))
            var operatorHeaders = AccessTests.bearer(Self.token)
            operatorHeaders[.contentType] = "application/json"
            let accepted = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: operatorHeaders, body: jsonBody(#"{"text": "hello"}"#)
            )
            #expect(accepted.status == .accepted)
        }
    }

    @Test("A listener without a token has no sign-in, and a cookie changes nothing there")
    func noTokenNoSignIn() async throws {
        let harness = Harness(settings: Self.settings)
        try await harness.test(listener: AccessTests.unix, raw: true) { client in
            let response = try await client.execute(
                uri: "/v1/login", method: .post, headers: AccessTests.json,
                body: jsonBody(#"{"token": "\#(Self.token)"}"#))
            #expect(response.status == .notFound)
            #expect(response.headers[.setCookie] == nil)
        }
    }
}
