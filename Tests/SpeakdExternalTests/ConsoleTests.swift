import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdExternal {
    /// The operator console at `GET /console`, served by the real daemon and driven in headless
    /// Chromium through selenium (`scripts/check-console.py`), with axe-core for accessibility.
    @Suite(.serialized, .timeLimit(.minutes(4)))
    struct ConsoleTests {
        /// Where the screenshots of each view go: docs/console/, shown in docs/console.md.
        static let screenshots = PythonTools.root.appendingPathComponent("docs/console")

        @Test(
            "sign-in to a cookie session, changes refused without its CSRF token, an announcement from the form cancelled on Now, a weekday schedule from the rule builder as the API returns it, paused and resumed, a NaN clip upload refused with its reason and a good one listed and played, the log and its CSV export, a refused cross-site post, axe on every view, the flow by keyboard, sign-out, a read-only session, the sign-in limit"
        )
        func consoleInChromium() async throws {
            // The null sink plays in real time, so an announcement is seen speaking; a state
            // directory gives schedules and the audit log.
            let state = URL(fileURLWithPath: "/tmp/speakd-console-state-\(UUID().uuidString.prefix(8))")
            defer { try? FileManager.default.removeItem(at: state) }
            // An empty clip directory the console may upload into (`--clips-upload`).
            let clips = URL(fileURLWithPath: "/tmp/speakd-console-clips-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: clips, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: clips) }
            // A read-only token, which speakd creates at start, for the read-only console.
            let readToken = "/tmp/speakd-console-read-token-\(UUID().uuidString.prefix(8))"
            defer { try? FileManager.default.removeItem(atPath: readToken) }
            let daemon = try await SpeakdProcess.start(
                audio: "null",
                arguments: [
                    "--state-dir", state.path, "--clips", clips.path, "--clips-upload", "--output", "platform=null",
                    "--read-token-file", readToken,
                ])
            let (status, output) = try await PythonTools.script(
                "check-console.py",
                [
                    "http://127.0.0.1:\(daemon.port)", daemon.tokenFile, Self.screenshots.path, "--read-token",
                    readToken,
                ],
                timeout: .seconds(200))
            print("console:\n\(output)")
            #expect(status == 0, "\(output)")
            for view in ["sign-in", "now", "announce", "schedules", "schedule-form", "clips", "clips-refused", "log"] {
                let png = try Data(contentsOf: Self.screenshots.appendingPathComponent("\(view).png"))
                #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "the screenshot of \(view) is a PNG")
            }
            #expect(daemon.isRunning)
            _ = await daemon.stop()
        }

        @Test(
            "uploads off: a clip upload shows the refusal; an expired cookie session: the console asks to sign in again, and the API refuses the cookie"
        )
        func expiredSessionInChromium() async throws {
            // A two-second session (`--session-max-age`), so it expires while the test waits.
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--session-max-age", "2"])
            let (status, output) = try await PythonTools.script(
                "check-console.py",
                ["http://127.0.0.1:\(daemon.port)", daemon.tokenFile, Self.screenshots.path, "--expiry"],
                timeout: .seconds(90))
            print("console, expiry:\n\(output)")
            #expect(status == 0, "\(output)")
            _ = await daemon.stop()
        }

        @Test(
            "GET /console needs no token, loads nothing from elsewhere and has the status page's CSP; its data still needs the token"
        )
        func consoleHeadersAndAccess() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let stranger = SpeakHTTPClient(endpoint: .tcp(host: "127.0.0.1", port: daemon.port), timeout: .seconds(10))
            let page = try await stranger.send("GET", "/console")
            #expect(page.status == 200)
            #expect(page.header("content-type") == "text/html; charset=utf-8")
            let policy = try #require(page.header("content-security-policy"))
            for part in ["default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'", "form-action 'none'"] {
                #expect(policy.contains(part), "\(part)")
            }
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(html.contains(#"data-token="required""#))
            #expect(!html.contains("http://") && !html.contains("https://"), "no external assets")
            #expect(try await stranger.send("GET", "/v1/audit").status == 401)
            let local = try await daemon.unixClient.send("GET", "/console")
            #expect(String(decoding: local.body, as: UTF8.self).contains(#"data-token="none""#))
            // A cross-site form post (text/plain, no preflight) is refused for its Origin.
            let port = daemon.port
            let forged = try await daemon.tcpClient.send(
                "POST", "/v1/announcements",
                headers: [("Origin", "http://evil.example"), ("Content-Type", "text/plain")],
                body: Array(#"{"text":"x"}"#.utf8))
            #expect(forged.status == 403)
            #expect(forged.error?.error.field == "Origin")
            let own = try await daemon.tcpClient.send(
                "POST", "/v1/announcements", json: ["text": "From the console"],
                headers: [("Origin", "http://127.0.0.1:\(port)")])
            #expect(own.status == 202)
            _ = await daemon.stop()
        }
    }
}
