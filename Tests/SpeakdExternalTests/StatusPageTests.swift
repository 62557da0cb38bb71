import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdExternal {
    /// The status page at `GET /`, served by the real daemon and driven in headless Chromium
    /// through selenium (`scripts/check-status-page.py`).
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct StatusPageTests {
        /// Where the page's screenshot is kept: `SPEAKD_TEST_ARTIFACTS`, or `.build/test-artifacts`.
        static let artifacts = URL(
            fileURLWithPath: ProcessInfo.processInfo.environment["SPEAKD_TEST_ARTIFACTS"]
                ?? PythonTools.root.appendingPathComponent(".build/test-artifacts").path)

        @Test(
            "the page asks for the token, shows health and outputs, words as heard, pauses, resumes and cancels one, lists a session and a schedule, with no console errors; opened at 127.0.0.1 and at localhost",
            arguments: ["127.0.0.1", "localhost"]
        )
        func pageInChromium(_ name: String) async throws {
            // The null sink plays in real time, so an announcement is seen waiting and speaking.
            // With a state directory, so it has schedules to list.
            let state = URL(fileURLWithPath: "/tmp/speakd-page-state-\(UUID().uuidString.prefix(8))")
            defer { try? FileManager.default.removeItem(at: state) }
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--state-dir", state.path])
            try FileManager.default.createDirectory(at: Self.artifacts, withIntermediateDirectories: true)
            let screenshot = Self.artifacts.appendingPathComponent(
                name == "127.0.0.1" ? "status-page.png" : "status-page-\(name).png")
            try? FileManager.default.removeItem(at: screenshot)

            let (status, output) = try await PythonTools.script(
                "check-status-page.py", ["http://\(name):\(daemon.port)", daemon.tokenFile, screenshot.path],
                timeout: .seconds(120))
            print("status page:\n\(output)")
            #expect(status == 0, "\(output)")
            let png = try Data(contentsOf: screenshot)
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "the screenshot is a PNG")
            #expect(daemon.isRunning)
            _ = await daemon.stop()
        }

        @Test("GET / needs no token and is HTML that loads nothing from elsewhere; the data behind it still does")
        func pageHeadersAndAccess() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let stranger = SpeakHTTPClient(endpoint: .tcp(host: "127.0.0.1", port: daemon.port), timeout: .seconds(10))
            let page = try await stranger.send("GET", "/")
            #expect(page.status == 200)
            #expect(page.header("content-type") == "text/html; charset=utf-8")
            let policy = try #require(page.header("content-security-policy"))
            #expect(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"))
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(html.contains(#"data-token="required""#))
            #expect(!html.contains("http://") && !html.contains("https://"), "no external assets")
            #expect(try await stranger.send("GET", "/v1/announcements").status == 401)
            // Over the Unix socket no token is needed, and the page says so.
            let local = try await daemon.unixClient.send("GET", "/")
            #expect(String(decoding: local.body, as: UTF8.self).contains(#"data-token="none""#))
            // The page's own origin may call the API (with the token); another origin may not.
            let port = daemon.port
            let own = try await daemon.tcpClient.send(
                "POST", "/v1/announcements", json: ["text": "From the status page"],
                headers: [("Origin", "http://127.0.0.1:\(port)")])
            #expect(own.status == 202)
            let foreign = try await daemon.tcpClient.send(
                "POST", "/v1/announcements", json: ["text": "From elsewhere"],
                headers: [("Origin", "http://127.0.0.1:\(port + 1)")])
            #expect(foreign.status == 403)
            _ = await daemon.stop()
        }

        @Test("The page opened as http://localhost:PORT may post, pause and cancel on a daemon at 127.0.0.1:PORT")
        func pageUnderLocalhostMayAct() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let port = daemon.port
            for host in ["localhost:\(port)", "127.0.0.1:\(port)"] {
                let page = [("Origin", "http://localhost:\(port)"), ("Host", host)]
                let posted = try await daemon.tcpClient.send(
                    "POST", "/v1/announcements", json: ["text": "From the status page at localhost"], headers: page)
                #expect(posted.status == 202, "Host \(host): \(posted.error?.error.message ?? "")")
                let paused = try await daemon.tcpClient.send("POST", "/v1/pause", headers: page)
                #expect(paused.status != 403, "Host \(host): \(paused.error?.error.message ?? "")")
                let cancelled = try await daemon.tcpClient.send("DELETE", "/v1/announcements", headers: page)
                #expect(cancelled.status == 200, "Host \(host): \(cancelled.error?.error.message ?? "")")
                for origin in ["http://localhost:\(port + 1)", "http://evil.example:\(port)"] {
                    let foreign = try await daemon.tcpClient.send(
                        "POST", "/v1/announcements", json: ["text": "From elsewhere"],
                        headers: [("Origin", origin), ("Host", host)])
                    #expect(foreign.status == 403, "Host \(host), Origin \(origin)")
                    #expect(foreign.error?.error.field == "Origin")
                }
            }
            _ = await daemon.stop()
        }
    }
}
