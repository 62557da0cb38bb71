import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import SpeakAPI
import SpeakClient
import Testing

@testable import SpeakServer

/// The access rules of `AccessPolicy` and the media type of bodies, through the router.
@Suite("Access")
struct AccessTests {
    static let token = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
    static let tcp = SpeakEndpoint.tcp(host: "127.0.0.1", port: 7770)
    static let unix = SpeakEndpoint.unixSocket(path: "/run/speakd/speakd.sock")
    static let json: HTTPFields = [.contentType: "application/json"]

    static func bearer(_ token: String) -> HTTPFields {
        [.contentType: "application/json", .authorization: "Bearer \(token)"]
    }

    static func expectError(
        _ response: TestResponse, _ status: HTTPResponse.Status, code: String, field: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(response.status == status, sourceLocation: sourceLocation)
        #expect(response.headers[.contentType] == WireFormat.jsonContentType, sourceLocation: sourceLocation)
        let error = try decode(ErrorResponse.self, response).error
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
        #expect(error.field == field, "\(error.message)", sourceLocation: sourceLocation)
        #expect(!error.message.isEmpty, sourceLocation: sourceLocation)
    }

    // MARK: Bearer token

    @Test(.timeLimit(.minutes(1))) func tcpNeedsTheToken() async throws {
        let harness = Harness(settings: ServerSettings(tcpToken: Self.token, tokenFile: "/run/speakd/token"))
        try await harness.test(listener: Self.tcp, raw: true) { client in
            let body = jsonBody(#"{"text": "hello"}"#)
            let requests: [(String, HTTPRequest.Method, ByteBuffer?)] = [
                ("/v1/announcements", .post, body), ("/v1/announcements", .get, nil),
                ("/v1/announcements", .delete, nil), ("/v1/announcements/a1", .delete, nil),
                ("/v1/events", .get, nil), ("/v1/speech", .post, body), ("/v1/voices", .get, nil),
                ("/v1/chimes", .get, nil),
                ("/metrics", .get, nil), ("/no/such/route", .get, nil),
            ]
            for (uri, method, body) in requests {
                let missing = try await client.execute(uri: uri, method: method, headers: Self.json, body: body)
                try Self.expectError(missing, .unauthorized, code: "unauthorized", field: "Authorization")
                #expect(missing.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true, "\(uri)")
                #expect(try decode(ErrorResponse.self, missing).error.message.contains("/run/speakd/token"))
                for wrong in [String(Self.token.dropLast()) + "1", "short", Self.token + "0", ""] {
                    let response = try await client.execute(
                        uri: uri, method: method, headers: Self.bearer(wrong), body: body)
                    try Self.expectError(response, .unauthorized, code: "unauthorized", field: "Authorization")
                }
                var basic = Self.json
                basic[.authorization] = "Basic \(Self.token)"
                let otherScheme = try await client.execute(uri: uri, method: method, headers: basic, body: body)
                try Self.expectError(otherScheme, .unauthorized, code: "unauthorized", field: "Authorization")
            }
            #expect(await harness.running.queue.snapshot().isEmpty)

            let accepted = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: Self.bearer(Self.token),
                body: jsonBody(#"{"text": "hello"}"#))
            #expect(accepted.status == .accepted)
            var lowerCaseScheme = Self.json
            lowerCaseScheme[.authorization] = "bearer \(Self.token)"
            let list = try await client.execute(uri: "/v1/announcements", method: .get, headers: lowerCaseScheme)
            #expect(list.status == .ok)
            #expect(try decode(AnnouncementList.self, list).announcements.count == 1)
            let cancelled = try await client.execute(
                uri: "/v1/announcements", method: .delete, headers: Self.bearer(Self.token))
            #expect(try decode(CancelResult.self, cancelled).cancelled == 1)
            // Probes and the CLI's daemon discovery use /healthz without a token.
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
        }
    }

    @Test(.timeLimit(.minutes(1))) func unixSocketNeedsNoToken() async throws {
        let harness = Harness(settings: ServerSettings(tcpToken: Self.token))
        try await harness.test(listener: Self.unix, raw: true) { client in
            let accepted = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: Self.json, body: jsonBody(#"{"text": "hello"}"#))
            #expect(accepted.status == .accepted)
            let cancelled = try await client.execute(uri: "/v1/announcements", method: .delete)
            #expect(try decode(CancelResult.self, cancelled).cancelled == 1)
        }
    }

    @Test func tokenComparison() {
        let token = Array(Self.token.utf8)
        #expect(AccessPolicy.constantTimeEqual(token, token))
        #expect(!AccessPolicy.constantTimeEqual(token, Array(token.dropLast())))
        #expect(!AccessPolicy.constantTimeEqual(token, token + [0x30]))
        #expect(!AccessPolicy.constantTimeEqual(token, []))
        var flipped = token
        flipped[0] ^= 1
        #expect(!AccessPolicy.constantTimeEqual(token, flipped))
        flipped = token
        flipped[token.count - 1] ^= 1
        #expect(!AccessPolicy.constantTimeEqual(token, flipped))
    }

    // MARK: Content-Type

    @Test(.timeLimit(.minutes(1))) func bodiesMustBeJSON() async throws {
        let harness = Harness()
        try await harness.test(raw: true) { client in
            let body = jsonBody(#"{"text": "hello"}"#)
            for route in ["/v1/announcements", "/v1/speech"] {
                for type in [
                    nil, "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                    "multipart/form-data; boundary=x", "application/json; charset=iso-8859-1", "application/jsonp",
                ] {
                    var headers: HTTPFields = [:]
                    if let type { headers[.contentType] = type }
                    let response = try await client.execute(uri: route, method: .post, headers: headers, body: body)
                    try Self.expectError(
                        response, .unsupportedMediaType, code: "unsupportedMediaType", field: "Content-Type")
                }
            }
            #expect(await harness.running.queue.snapshot().isEmpty)
            for type in ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=\"UTF-8\""] {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .post, headers: [.contentType: type], body: body)
                #expect(response.status == .accepted, "\(type)")
            }
        }
    }

    // MARK: Origin

    @Test(.timeLimit(.minutes(1))) func foreignOriginIsRefused() async throws {
        let harness = Harness()
        try await harness.test(listener: Self.unix, raw: true) { client in
            for origin in ["http://evil.example", "null", "http://localhost:7770"] {
                var headers: HTTPFields = [.origin: origin, .contentType: "text/plain"]
                let post = try await client.execute(
                    uri: "/v1/announcements", method: .post, headers: headers, body: jsonBody(#"{"text": "pwned"}"#))
                try Self.expectError(post, .forbidden, code: "forbiddenOrigin", field: "Origin")
                headers[.contentType] = "application/json"
                let json = try await client.execute(
                    uri: "/v1/announcements", method: .post, headers: headers, body: jsonBody(#"{"text": "pwned"}"#))
                try Self.expectError(json, .forbidden, code: "forbiddenOrigin", field: "Origin")
                let cancel = try await client.execute(
                    uri: "/v1/announcements", method: .delete, headers: [.origin: origin])
                try Self.expectError(cancel, .forbidden, code: "forbiddenOrigin", field: "Origin")
                let read = try await client.execute(uri: "/v1/events", method: .get, headers: [.origin: origin])
                try Self.expectError(read, .forbidden, code: "forbiddenOrigin", field: "Origin")
            }
            #expect(await harness.running.queue.snapshot().isEmpty)
        }
    }

    @Test(.timeLimit(.minutes(1))) func configuredOriginIsAllowed() async throws {
        let harness = Harness(settings: ServerSettings(corsOrigin: "http://kiosk.local:8080", tcpToken: Self.token))
        try await harness.test(listener: Self.tcp, raw: true) { client in
            let kiosk: HTTPFields = [.origin: "http://kiosk.local:8080"]
            let foreign: HTTPFields = [.origin: "http://evil.example", .accessControlRequestMethod: "POST"]
            let refusedPreflight = try await client.execute(
                uri: "/v1/announcements", method: .options, headers: foreign)
            try Self.expectError(refusedPreflight, .forbidden, code: "forbiddenOrigin", field: "Origin")
            // A preflight carries no credentials; it is answered without the token, and allows it.
            var preflight = kiosk
            preflight[.accessControlRequestMethod] = "POST"
            preflight[.accessControlRequestHeaders] = "authorization, content-type"
            let allowed = try await client.execute(uri: "/v1/announcements", method: .options, headers: preflight)
            #expect(allowed.status == .noContent || allowed.status == .ok)
            #expect(allowed.headers[.accessControlAllowOrigin] == "http://kiosk.local:8080")
            #expect(allowed.headers[.accessControlAllowHeaders]?.lowercased().contains("authorization") == true)

            var headers = Self.bearer(Self.token)
            headers[.origin] = "http://kiosk.local:8080"
            let post = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: headers, body: jsonBody(#"{"text": "hello"}"#))
            #expect(post.status == .accepted)
            #expect(post.headers[.accessControlAllowOrigin] == "http://kiosk.local:8080")
            // The page can read why it was refused.
            let noToken = try await client.execute(uri: "/v1/announcements", method: .get, headers: kiosk)
            try Self.expectError(noToken, .unauthorized, code: "unauthorized", field: "Authorization")
            #expect(noToken.headers[.accessControlAllowOrigin] == "http://kiosk.local:8080")
        }
    }

    /// The status page may act under every name it is served on: its origin is this listener
    /// under any of the listener's names and its port, whatever `Host` the call carries. Any
    /// other origin (another port, another scheme, another name) is still refused.
    @Test(.timeLimit(.minutes(1))) func ownOriginUnderEveryNameIsAllowed() async throws {
        let harness = Harness(settings: ServerSettings(tcpToken: Self.token, allowedHosts: ["kiosk.local"]))
        try await harness.test(listener: Self.tcp, raw: true) { client in
            for host in ["127.0.0.1:7770", "localhost:7770", "localhost"] {
                for origin in [
                    "http://localhost:7770", "http://127.0.0.1:7770", "http://[::1]:7770", "http://LocalHost:7770",
                    "http://kiosk.local:7770",
                ] {
                    var headers = Self.bearer(Self.token)
                    headers[.origin] = origin
                    headers[HTTPField.Name("Host")!] = host
                    let post = try await client.execute(
                        uri: "/v1/announcements", method: .post, headers: headers,
                        body: jsonBody(#"{"text": "From the status page"}"#))
                    #expect(post.status == .accepted, "Host \(host), Origin \(origin)")
                    headers[.contentType] = nil
                    let cancel = try await client.execute(uri: "/v1/announcements", method: .delete, headers: headers)
                    #expect(cancel.status == .ok, "Host \(host), Origin \(origin)")
                }
                for origin in [
                    "http://localhost:7771", "http://localhost", "https://localhost:7770", "http://evil.example:7770",
                    "http://localhost:7770/", "http://localhost:7770.evil.example", "http://user@localhost:7770",
                ] {
                    var headers = Self.bearer(Self.token)
                    headers[.origin] = origin
                    headers[HTTPField.Name("Host")!] = host
                    let post = try await client.execute(
                        uri: "/v1/announcements", method: .post, headers: headers, body: jsonBody(#"{"text": "pwned"}"#)
                    )
                    try Self.expectError(post, .forbidden, code: "forbiddenOrigin", field: "Origin")
                }
            }
        }
    }

    // MARK: Host

    @Test(.timeLimit(.minutes(1))) func foreignHostIsRefused() async throws {
        let harness = Harness(settings: ServerSettings(allowedHosts: ["kiosk.local"]))
        try await harness.test(listener: Self.tcp, raw: true) { client in
            for host in [
                "evil.example:7770", "evil.example", "localhost:7771", "127.0.0.1:80", "kiosk.local:7771",
                "localhost.evil.example:7770", "127.0.0.1.nip.io:7770", "", "localhost:x",
            ] {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .get, headers: [HTTPField.Name("Host")!: host])
                try Self.expectError(response, .misdirectedRequest, code: "misdirectedRequest", field: "Host")
                let post = try await client.execute(
                    uri: "/v1/announcements", method: .post,
                    headers: [HTTPField.Name("Host")!: host, .contentType: "application/json"],
                    body: jsonBody(#"{"text": "rebound"}"#))
                try Self.expectError(post, .misdirectedRequest, code: "misdirectedRequest", field: "Host")
            }
            #expect(await harness.running.queue.snapshot().isEmpty)
            for host in [
                "localhost:7770", "127.0.0.1:7770", "[::1]:7770", "LOCALHOST:7770", "localhost.:7770", "localhost",
                "kiosk.local:7770", "Kiosk.Local",
            ] {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .get, headers: [HTTPField.Name("Host")!: host])
                #expect(response.status == .ok, "\(host)")
            }
        }
    }

    @Test(.timeLimit(.minutes(1))) func unixSocketHostIsLocalhost() async throws {
        let harness = Harness()
        try await harness.test(listener: Self.unix, raw: true) { client in
            // The router framework itself sends Host: localhost, as curl does on a Unix socket.
            #expect(try await client.execute(uri: "/v1/announcements", method: .get).status == .ok)
            for host in ["%2Frun%2Fspeakd%2Fspeakd.sock", "/run/speakd/speakd.sock", "localhost:80"] {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .get, headers: [HTTPField.Name("Host")!: host])
                #expect(response.status == .ok, "\(host)")
            }
            let foreign = try await client.execute(
                uri: "/v1/announcements", method: .get, headers: [HTTPField.Name("Host")!: "evil.example"])
            try Self.expectError(foreign, .misdirectedRequest, code: "misdirectedRequest", field: "Host")
        }
    }

    /// A listener on port 0 checks the Host port against the port it was given, and needs the
    /// token over real TCP.
    @Test(.timeLimit(.minutes(1))) func listenerOnPortZeroChecksTheBoundPort() async throws {
        let harness = Harness(settings: ServerSettings(tcpToken: Self.token))
        try await harness.running.waitUntilRunning()
        let listener = harness.server.makeListener(at: .tcp(host: "127.0.0.1", port: 0), logger: Logger(label: "test"))
        let front = SpeakFront(listeners: [listener]) { await harness.running.shutdown() }
        try await withRunningFront(front) { bound in
            guard case .tcp(let host, let port) = bound[0] else {
                Issue.record("not TCP")
                return
            }
            let client = SpeakHTTPClient(
                endpoint: .tcp(host: host, port: port), timeout: .seconds(10), token: Self.token)
            #expect(try await client.send("GET", "/v1/announcements").status == 200)
            let otherPort = try await client.send(
                "GET", "/v1/announcements", headers: [("Host", "127.0.0.1:\(port == 65535 ? 1 : port + 1)")])
            #expect(otherPort.status == 421)
            #expect(otherPort.error?.error.field == "Host")
            let anonymous = SpeakHTTPClient(endpoint: .tcp(host: host, port: port), timeout: .seconds(10))
            let refused = try await anonymous.send("DELETE", "/v1/announcements")
            #expect(refused.status == 401)
            #expect(refused.header("www-authenticate") == #"Bearer realm="speakd""#)
        }
    }

    @Test func authorityParsing() {
        #expect(AccessPolicy.parseAuthority("localhost")! == ("localhost", nil))
        #expect(AccessPolicy.parseAuthority("LocalHost:7770")! == ("localhost", 7770))
        #expect(AccessPolicy.parseAuthority("[::1]:7770")! == ("::1", 7770))
        #expect(AccessPolicy.parseAuthority("[::1]")! == ("::1", nil))
        #expect(AccessPolicy.parseAuthority("localhost.:80")! == ("localhost", 80))
        for bad in ["", ":7770", "::1", "[::1", "[::1]7770", "localhost:", "localhost:0", "localhost:65536", "a:b"] {
            #expect(AccessPolicy.parseAuthority(bad) == nil, "\(bad)")
        }
    }
}
