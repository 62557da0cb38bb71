import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// Who may use the real daemon: the TCP token, the Unix socket's group, foreign web pages
    /// and rebound host names.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct AccessThroughDaemonTests {
        static let longText = SpeakdIntegration.FinishReasonTests.longText

        /// A TCP client of `daemon` with `token` (nil: none).
        static func tcp(_ daemon: SpeakdProcess, token: String?) -> SpeakHTTPClient {
            SpeakHTTPClient(endpoint: .tcp(host: "127.0.0.1", port: daemon.port), timeout: .seconds(10), token: token)
        }

        static func expectRefusal(
            _ response: SpeakHTTPResponse, _ status: Int, code: String,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            #expect(
                response.status == status, "\(String(decoding: response.body, as: UTF8.self))",
                sourceLocation: sourceLocation)
            #expect(response.error?.error.code == code, sourceLocation: sourceLocation)
        }

        /// What the announcements the daemon holds are, read over the Unix socket.
        static func held(_ daemon: SpeakdProcess) async throws -> [String] {
            try await daemon.unixClient.send("GET", "/v1/announcements").decode(AnnouncementList.self).announcements
                .map(\.id)
        }

        @Test("over TCP, a client without the token can neither post, read nor cancel")
        func tcpWithoutTokenIsRefused() async throws {
            let speakd = try await AudibleDaemon.start()
            // The Unix socket needs no token.
            let speaking = try await speakd.accept(announcement(Self.longText), via: speakd.unix)
            let waiting = try await speakd.accept(announcement("Mind the gap"), via: speakd.unix)
            #expect(await speakd.events.wait { $0.contains { $0.type == .started } })

            let token = try #require(speakd.daemon.token)
            #expect(token.count == 64)
            for client in [Self.tcp(speakd.daemon, token: nil), Self.tcp(speakd.daemon, token: AccessToken.generate())]
            {
                let post = try await client.send("POST", "/v1/announcements", json: ["text": "Intruder"])
                Self.expectRefusal(post, 401, code: "unauthorized")
                #expect(post.header("www-authenticate")?.hasPrefix("Bearer") == true)
                for path in ["/v1/announcements", "/v1/announcements/\(speaking)"] {
                    Self.expectRefusal(try await client.send("DELETE", path), 401, code: "unauthorized")
                }
                for path in ["/v1/announcements", "/v1/events", "/metrics"] {
                    Self.expectRefusal(try await client.send("GET", path), 401, code: "unauthorized")
                }
            }
            #expect(try await Self.held(speakd.daemon) == [speaking, waiting])
            #expect(speakd.daemon.log.contains("request refused"))
            #expect(speakd.daemon.log.contains(speakd.daemon.tokenFile))

            // The event stream too: refused without the token, replayed with it.
            await #expect {
                for try await _ in Self.tcp(speakd.daemon, token: nil).events(lastEventID: "0") {}
            } throws: { error in
                "\(error)".contains("Authorization")
            }
            var replayed: ServerSentEvent?
            for try await message in speakd.tcp.events(lastEventID: "0") where message.event == "queued" {
                replayed = message
                break
            }
            #expect(replayed?.id != nil)

            // With the token from the file, TCP works.
            let cancelled = try await speakd.tcp.send("DELETE", "/v1/announcements")
            #expect(try cancelled.decode(CancelResult.self).cancelled == 2)
            #expect(await speakd.events.waitForFinished([speaking, waiting]))
            _ = await speakd.stop()
            expectExactlyOneFinished([speaking, waiting], in: speakd.events.events)
            let reasons = speakd.events.events.filter { $0.type == .finished }.map(\.reason)
            #expect(reasons == [.cancelled, .cancelled])
        }

        /// The issue's reproduction: another local user, here `nobody`, tries to read the token and
        /// to cancel over TCP and over the socket. Needs root for `runuser`.
        @Test(
            "another local user cannot read the token nor cancel", .enabled(if: getuid() == 0, "runuser needs root"))
        func otherUserIsRefused() async throws {
            let speakd = try await AudibleDaemon.start()
            let speaking = try await speakd.accept(announcement(Self.longText), via: speakd.unix)
            #expect(await speakd.events.wait { $0.contains { $0.type == .started } })
            let daemon = speakd.daemon
            var info = stat()
            #expect(stat(daemon.tokenFile, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o640)

            let read = try await Self.runAsNobody(["cat", daemon.tokenFile])
            #expect(read.status != 0)
            #expect(!read.output.contains(try #require(daemon.token)))
            let url = "http://127.0.0.1:\(daemon.port)/v1/announcements"
            let cancel = try await Self.runAsNobody([
                "sh", "-c",
                "curl -s -o /dev/null -w '%{http_code}' -X DELETE -H \"Authorization: Bearer $(cat \(daemon.tokenFile))\" \(url)",
            ])
            #expect(cancel.output.hasSuffix("401"), "\(cancel.output)")
            let plainCancel = try await Self.runAsNobody([
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", url,
            ])
            #expect(plainCancel.output == "401", "\(plainCancel.output)")
            let post = try await Self.runAsNobody([
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: application/json",
                "-d", #"{"text": "pwned"}"#, url,
            ])
            #expect(post.output == "401", "\(post.output)")
            // The socket's mode keeps nobody out of the Unix socket too.
            let socket = try await Self.runAsNobody([
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", daemon.socketPath, "-X",
                "DELETE", "http://localhost/v1/announcements",
            ])
            #expect(socket.status != 0)
            #expect(socket.output == "000", "\(socket.output)")

            #expect(try await Self.held(daemon) == [speaking])
            _ = await speakd.stop()
            expectExactlyOneFinished([speaking], in: speakd.events.events)
            #expect(speakd.events.events.first { $0.type == .finished }?.reason != .cancelled)
        }

        @Test("a cross-origin text/plain post and a foreign Host are refused on both listeners")
        func browserAttacksAreRefused() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let body = Array(#"{"text": "pwned"}"#.utf8)
            let page: [(String, String)] = [("Origin", "http://evil.example"), ("Content-Type", "text/plain")]
            for client in [Self.tcp(daemon, token: nil), daemon.tcpClient, daemon.unixClient] {
                let post = try await client.send("POST", "/v1/announcements", headers: page, body: body)
                Self.expectRefusal(post, 403, code: "forbiddenOrigin")
                #expect(post.error?.error.field == "Origin")
                let form = try await client.send(
                    "POST", "/v1/announcements",
                    headers: [("Origin", "null"), ("Content-Type", "application/x-www-form-urlencoded")], body: body)
                Self.expectRefusal(form, 403, code: "forbiddenOrigin")
            }
            // Without an Origin, a body that is not JSON is still refused.
            for type in ["text/plain", nil] {
                let post = try await daemon.tcpClient.send(
                    "POST", "/v1/announcements", headers: type.map { [("Content-Type", $0)] } ?? [], body: body)
                Self.expectRefusal(post, 415, code: "unsupportedMediaType")
                #expect(post.error?.error.field == "Content-Type")
            }
            // A page that rebinds its own name to 127.0.0.1 still sends that name.
            for client in [daemon.tcpClient, daemon.unixClient] {
                let rebound = try await client.send(
                    "GET", "/v1/announcements", headers: [("Host", "evil.example:\(daemon.port)")])
                Self.expectRefusal(rebound, 421, code: "misdirectedRequest")
                #expect(rebound.error?.error.field == "Host")
            }
            let otherPort = try await daemon.tcpClient.send(
                "GET", "/v1/announcements", headers: [("Host", "localhost:\(daemon.port + 1)")])
            Self.expectRefusal(otherPort, 421, code: "misdirectedRequest")
            let named = try await daemon.tcpClient.send(
                "GET", "/v1/announcements", headers: [("Host", "localhost:\(daemon.port)")])
            #expect(named.status == 200)
            #expect(try await Self.held(daemon).isEmpty)
            #expect(await daemon.stop().status == 0)
        }

        @Test("--tcp-open: TCP needs no token, no token file is made, and the log warns")
        func tcpOpenIsKnowinglyOpen() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--tcp-open"])
            #expect(!FileManager.default.fileExists(atPath: daemon.tokenFile))
            let post = try await Self.tcp(daemon, token: nil).send(
                "POST", "/v1/announcements?wait=true", json: ["text": "Open door"])
            #expect(post.status == 200, "\(String(decoding: post.body, as: UTF8.self))")
            #expect(daemon.log.contains("TCP is open (--tcp-open)"), "\(daemon.log)")
            // Origin and Host are still checked.
            let page = try await Self.tcp(daemon, token: nil).send(
                "POST", "/v1/announcements", headers: [("Origin", "http://evil.example")], body: Array("{}".utf8))
            Self.expectRefusal(page, 403, code: "forbiddenOrigin")
            #expect(await daemon.stop().status == 0)
        }

        @Test("speak finds the token and speaks over TCP")
        func speakUsesTheToken() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let token = try #require(daemon.token)
            let http = ["--http", "127.0.0.1:\(daemon.port)"]
            // A home for the CLI where no default token file is: it must use what it is given.
            let nowhere = ["XDG_RUNTIME_DIR": daemon.directory.appendingPathComponent("nowhere").path]
            let ways: [(String, [String], [String: String])] = [
                ("--token-file", ["--token-file", daemon.tokenFile], nowhere),
                ("SPEAKD_TOKEN_FILE", [], nowhere.merging(["SPEAKD_TOKEN_FILE": daemon.tokenFile]) { $1 }),
                ("SPEAKD_TOKEN", [], nowhere.merging(["SPEAKD_TOKEN": token]) { $1 }),
                ("next to SPEAKD_SOCKET", [], nowhere.merging(["SPEAKD_SOCKET": daemon.socketPath]) { $1 }),
            ]
            for (way, arguments, environment) in ways {
                let said = try await BuiltProduct.run(
                    "speak", http + arguments + ["--wait", "Platform four"], environment: environment)
                #expect(said.status == 0, "\(way): \(said.standardError)")
                #expect(said.standardOutput.contains(#""reason":"completed""#), "\(way): \(said.standardOutput)")
                let status = try await BuiltProduct.run(
                    "speak", ["status"] + http + arguments, environment: environment)
                #expect(status.status == 0, "\(way): \(status.standardError)")
            }
            let without = try await BuiltProduct.run("speak", http + ["Platform four"], environment: nowhere)
            #expect(without.status == 1)
            #expect(without.standardError.contains("Authorization"), "\(without.standardError)")
            let finished = try await daemon.unixClient.send("GET", "/metrics")
            #expect(
                String(decoding: finished.body, as: UTF8.self).contains(
                    #"speakd_announcements_finished_total{reason="completed",success="true"} 4"#))
            #expect(await daemon.stop().status == 0)
        }

        /// Runs `arguments` as user `nobody`; returns the exit status and standard output.
        static func runAsNobody(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-nobody-\(UUID())").path
            defer { try? FileManager.default.removeItem(atPath: output) }
            let child = try ChildProcess(
                "/usr/sbin/runuser", ["-u", "nobody", "--"] + arguments,
                environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"], output: output, errorOutput: "/dev/null")
            let status = await child.wait(timeout: .seconds(20))
            if status == nil { await child.terminate() }
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            return (status ?? -1, text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}
