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
