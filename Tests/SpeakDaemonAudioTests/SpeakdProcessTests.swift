import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeechModel
import Testing

/// The built `speakd` executable, next to the test bundle.
func speakdExecutable() throws -> String {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("speakd")
            .path,
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent(".build/debug/speakd").path,
    ]
    guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw MissingExecutable(candidates: candidates)
    }
    return path
}

struct MissingExecutable: Error, CustomStringConvertible {
    let candidates: [String]
    var description: String { "speakd is not built (looked in \(candidates))" }
}

@Suite("speakd process", .serialized)
struct SpeakdProcessTests {
    /// SIGTERM or SIGINT: READY=1 was sent once listening, STOPPING=1 on the signal, every announcement
    /// finishes with `shutdown` on the open event stream, the socket is removed, exit 0 within 5 s.
    @Test(.timeLimit(.minutes(1)), arguments: [SIGTERM, SIGINT])
    func signalShutsDownGracefully(_ signal: Int32) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socketPath = directory.appendingPathComponent("speakd.sock").path
        let notify = try NotifySocket()
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.path
        environment["SPEAKD_MAX_QUEUE"] = "8"
        let log = directory.appendingPathComponent("speakd.log").path
        let process = try ChildProcess(
            try speakdExecutable(), ["--socket", socketPath, "--http", "none", "--audio", "null"],
            environment: environment, output: log)
        defer { process.send(SIGKILL) }

        let ready = await notify.receive()
        #expect(
            ready?.hasPrefix("READY=1") == true,
            "\(ready ?? "nothing"); log: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        var info = stat()
        #expect(lstat(socketPath, &info) == 0 && info.st_mode & 0o777 == 0o660)

        let client = SpeakHTTPClient(endpoint: .unixSocket(path: socketPath), timeout: .seconds(20))
        var events = client.events(lastEventID: "0").makeAsyncIterator()
        var ids: [String] = []
        for _ in 0..<3 {
            let accepted = try await client.send(
                "POST", "/v1/announcements", json: AnnouncementRequest(utterance: Utterance(longText)))
            #expect(accepted.status == 202)
            ids.append(try accepted.decode(AnnouncementAccepted.self).id)
        }
        while let message = try await events.next(), message.event != "started" {}

        let signalled = ContinuousClock.now
        process.send(signal)
        #expect(await notify.receive() == "STOPPING=1")
        var finished: [String: FinishReason] = [:]
        while let message = try await events.next() {
            let event = try message.announcementEvent()
            if event.type == .finished { finished[event.id] = event.reason }
        }
        #expect(finished == Dictionary(uniqueKeysWithValues: ids.map { ($0, FinishReason.shutdown) }))
        let status = await process.wait(timeout: .seconds(5))
        #expect(status == 0, "log: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        #expect(ContinuousClock.now - signalled < .seconds(5))
        #expect(!FileManager.default.fileExists(atPath: socketPath))
    }

    /// A port that is taken: speakd says which address failed and exits non-zero, removing its socket.
    @Test(.timeLimit(.minutes(1))) func portInUseExitsWithAMessage() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(taken, pointer, length)
                return getsockname(taken, pointer, &length)
            }
        }
        listen(taken, 1)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let socketPath = directory.appendingPathComponent("speakd.sock").path
        let log = directory.appendingPathComponent("speakd.log").path
        let process = try ChildProcess(
            try speakdExecutable(), ["--socket", socketPath, "--http", "127.0.0.1:\(port)", "--audio", "null"],
            environment: ProcessInfo.processInfo.environment, output: log)
        let status = await process.wait(timeout: .seconds(20))
        #expect(status != nil && status != 0)
        let output = try String(contentsOfFile: log, encoding: .utf8)
        #expect(output.contains("ddress already in use"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: socketPath))
    }

    /// TCP without a token on an address others can reach: speakd does not start, and says why.
    @Test(.timeLimit(.minutes(1))) func openTCPOnAWideAddressExitsWithAMessage() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("speakd.log").path
        let socketPath = directory.appendingPathComponent("speakd.sock").path
        let process = try ChildProcess(
            try speakdExecutable(),
            ["--socket", socketPath, "--http", "0.0.0.0:0", "--tcp-open", "--audio", "null"],
            environment: ProcessInfo.processInfo.environment, output: log)
        let status = await process.wait(timeout: .seconds(20))
        #expect(status != nil && status != 0)
        let output = try String(contentsOfFile: log, encoding: .utf8)
        #expect(output.contains("--tcp-open: 'true' is not valid: TCP listens on 0.0.0.0:0"), "\(output)")
        #expect(output.contains("not a loopback address"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: socketPath))
    }

    /// As the user unit starts it: `ConfigurationDirectory=speakd` sets $CONFIGURATION_DIRECTORY, and
    /// speakd.conf there is read, under the unit's flags; a drop-in's SPEAKD_* wins over the file.
    @Test(.timeLimit(.minutes(1))) func readsSpeakdConfInTheConfigurationDirectory() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socketPath = directory.appendingPathComponent("kiosk.sock").path
        try "# as ~/.config/speakd/speakd.conf\nsocket = \(socketPath)\nhttp = 127.0.0.1:1\naudio = pulse\n".write(
            to: directory.appendingPathComponent("speakd.conf"), atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.path
        environment["CONFIGURATION_DIRECTORY"] = directory.path
        environment["SPEAKD_HTTP"] = "none"
        environment.removeValue(forKey: "SPEAKD_CONFIG")
        let log = directory.appendingPathComponent("speakd.log").path
        let process = try ChildProcess(
            try speakdExecutable(), ["--audio", "null"], environment: environment, output: log)
        defer { process.send(SIGKILL) }

        let ready = await notify.receive()
        let output = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(ready?.hasPrefix("READY=1") == true, "\(ready ?? "nothing"); log: \(output())")
        #expect(FileManager.default.fileExists(atPath: socketPath), "log: \(output())")
        let client = SpeakHTTPClient(endpoint: .unixSocket(path: socketPath), timeout: .seconds(10))
        #expect(try await client.send("GET", "/healthz").status == 200)
        process.send(SIGTERM)
        #expect(await process.wait(timeout: .seconds(10)) == 0, "log: \(output())")
    }

    @Test(.timeLimit(.minutes(1))) func badConfigurationExitsWithAMessage() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("speakd.log").path
        var environment = ProcessInfo.processInfo.environment
        environment["SPEAKD_AUDIO"] = "speakers"
        let process = try ChildProcess(
            try speakdExecutable(), ["--http", "none"], environment: environment, output: log)
        let status = await process.wait(timeout: .seconds(20))
        #expect(status != nil && status != 0)
        let output = try String(contentsOfFile: log, encoding: .utf8)
        #expect(output.contains("SPEAKD_AUDIO: 'speakers' is not valid"), "\(output)")
    }
}
