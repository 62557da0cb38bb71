import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// What strangers' connections can do to the real daemon: hold thousands idle, send headers a
    /// byte at a time, open an event stream and never read it. None may starve a normal client or
    /// grow the daemon's memory.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct ConnectionLimitTests {
        enum Listener: String, CaseIterable, Sendable {
            case tcp, unix
        }

        @Test(
            "2,000 idle connections and a slowloris: every normal answer within 50 ms; the slowloris is closed after the header timeout",
            arguments: Listener.allCases)
        func idleAndSlowloris(_ listener: Listener) async throws {
            try raiseOwnDescriptorLimit(to: 8_192)
            let speakd = try await SpeakdProcess.start(
                audio: "null", arguments: ["--header-timeout", "3", "--idle-timeout", "60"])
            defer { Task { await speakd.stop() } }
            let endpoint: SpeakEndpoint =
                listener == .tcp ? .tcp(host: "127.0.0.1", port: speakd.port) : .unixSocket(path: speakd.socketPath)

            var idle: [RawConnection] = []
            for _ in 0..<2_000 { idle.append(try RawConnection(endpoint)) }
            var slowloris: [RawConnection] = []
            let firstHeaderByte = ContinuousClock.now
            for _ in 0..<100 {
                let connection = try RawConnection(endpoint)
                connection.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
                slowloris.append(connection)
            }

            // One header byte per connection every second, while a normal client asks its questions.
            let dripped = slowloris
            let dripping = Task {
                while !Task.isCancelled {
                    for connection in dripped { connection.send("X") }
                    try? await Task.sleep(for: .seconds(1))
                }
            }
            defer { dripping.cancel() }
            let client = SpeakHTTPClient(
                endpoint: endpoint, timeout: .seconds(5), token: listener == .tcp ? speakd.token : nil)
            // The first request waits in the kernel's accept queue behind the 2,100 connections
            // just opened; what is measured is the daemon holding them, so that one is not timed.
            #expect(try await client.send("GET", "/healthz").status == 200)
            var slowest = Duration.zero
            for round in 0..<40 {
                let started = ContinuousClock.now
                let response: SpeakHTTPResponse
                switch round % 3 {
                case 0: response = try await client.send("GET", "/healthz")
                case 1: response = try await client.send("GET", "/v1/announcements")
                default: response = try await client.send("GET", "/v1/voices")
                }
                slowest = max(slowest, ContinuousClock.now - started)
                #expect(response.status == 200)
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(slowest < .milliseconds(50), "the slowest answer took \(slowest)")

            // Closed once the header timeout (3 s) has passed since their first byte, not before.
            let closedEarly = slowloris.filter { $0.isClosedByPeer() }.count
            #expect(closedEarly == 0 || ContinuousClock.now - firstHeaderByte >= .seconds(3))
            try await Task.sleep(until: firstHeaderByte + .seconds(5))
            let closed = slowloris.filter { $0.isClosedByPeer() }.count
            #expect(closed == slowloris.count, "\(closed) of \(slowloris.count) slowloris connections closed")
            // Idle connections stay until the idle timeout; the daemon still answers.
            #expect(idle.filter { $0.isClosedByPeer() }.isEmpty)
            #expect(try await client.send("GET", "/healthz").status == 200)
            for connection in idle + slowloris { connection.close() }
        }

        @Test("At max-connections the connection idle longest makes room: 500 idle ones cannot lock out a client")
        func idleConnectionsAreEvictedAtTheLimit() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null", arguments: ["--max-connections", "50"])
            defer { Task { await speakd.stop() } }
            let endpoint = SpeakEndpoint.unixSocket(path: speakd.socketPath)
            let busy = Task { try await post(announcement("Waiting"), via: speakd.unixClient, wait: true) }
            var idle: [RawConnection] = []
            for _ in 0..<500 { idle.append(try RawConnection(endpoint)) }
            let client = SpeakHTTPClient(endpoint: endpoint, timeout: .seconds(5))
            #expect(try await client.send("GET", "/healthz").status == 200)
            var slowest = Duration.zero
            for _ in 0..<20 {
                let started = ContinuousClock.now
                #expect(try await client.send("GET", "/v1/announcements").status == 200)
                slowest = max(slowest, ContinuousClock.now - started)
            }
            #expect(slowest < .milliseconds(50), "the slowest answer took \(slowest)")
            // The oldest idle ones were closed; at most the limit are held open.
            let open = idle.filter { !$0.isClosedByPeer() }.count
            #expect(open <= 50, "\(open) idle connections still open")
            #expect(idle.prefix(100).allSatisfy { $0.isClosedByPeer() })
            // A request being answered is never evicted.
            #expect(try await busy.value.status == 200)
            for connection in idle { connection.close() }
        }

        @Test("An event stream that is never read is cut off; RSS grows < 20 MB over 1,000 long posts and cancels")
        func nonReadingEventStream() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null", arguments: ["--send-timeout", "2"])
            defer { Task { await speakd.stop() } }
            let client = speakd.unixClient
            let text = String(repeating: "A long announcement that nobody will hear. ", count: 110)
            for _ in 0..<20 { try await postAndCancel(text, client: client) }
            let before = try residentKilobytes(speakd.pid)

            let reader = try RawConnection(.unixSocket(path: speakd.socketPath), receiveBuffer: 4_096)
            reader.send("GET /v1/events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n")
            try await speakd.waitForEventStreams(1)
            var peak = before
            for index in 0..<1_000 {
                try await postAndCancel(text, client: client)
                if index % 50 == 0 { peak = max(peak, try residentKilobytes(speakd.pid)) }
            }
            peak = max(peak, try residentKilobytes(speakd.pid))
            #expect(peak - before < 20 * 1024, "RSS grew from \(before) kB to \(peak) kB")

            // The daemon closed the stream: draining what was sent ends in EOF, and no stream is open.
            #expect(await reader.drainsToEndOfStream(within: .seconds(10)))
            #expect(try await speakd.openEventStreams() == 0)
            reader.close()
        }

        @Test(
            "A TCP event stream that is never read: the kernel queues < 256 kB for it, and it is gone within the send timeout"
        )
        func nonReadingTCPEventStreamQueuesLittleInTheKernel() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null", arguments: ["--send-timeout", "2"])
            defer { Task { await speakd.stop() } }
            let client = speakd.unixClient
            let text = String(repeating: "A long announcement that nobody will hear. ", count: 110)
            // A client with the kernel's default buffers that reads the response head and nothing more.
            let reader = try RawConnection(.tcp(host: "127.0.0.1", port: speakd.port))
            defer { reader.close() }
            reader.send(
                "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:\(speakd.port)\r\n"
                    + "Authorization: Bearer \(speakd.token ?? "")\r\nAccept: text/event-stream\r\n\r\n")
            try await speakd.waitForEventStreams(1)
            let readerPort = try reader.localPort()
            // Each post and cancel sends about 10 kB of events: 600 of them are 6 MB, more than
            // the 4 MB a kernel send buffer grows to.
            var peak = 0
            for index in 0..<600 {
                try await postAndCancel(text, client: client)
                if index % 5 == 0 {
                    peak = max(peak, kernelSendQueue(localPort: speakd.port, remotePort: readerPort) ?? 0)
                }
            }
            let posted = ContinuousClock.now
            print("TCP event stream never read: at most \(peak) bytes queued in the kernel")
            #expect(peak < 256 * 1024, "\(peak) bytes queued in the kernel for a client that does not read")

            // Cut after the send timeout (2 s) without lingering: nothing stays queued for it.
            var left = kernelSendQueue(localPort: speakd.port, remotePort: readerPort)
            while left != nil, ContinuousClock.now - posted < .seconds(5) {
                try await Task.sleep(for: .milliseconds(100))
                left = kernelSendQueue(localPort: speakd.port, remotePort: readerPort)
            }
            #expect(left == nil, "the connection is still there with \(left ?? 0) bytes queued")
            #expect(try await speakd.openEventStreams() == 0)
        }

        @Test(
            "Idle connections and trickled bodies are closed after their timeouts; an event stream with heartbeats is not"
        )
        func idleBodyAndEventStream() async throws {
            let speakd = try await SpeakdProcess.start(
                audio: "null", arguments: ["--idle-timeout", "1", "--body-timeout", "2", "--heartbeat", "0.25"])
            defer { Task { await speakd.stop() } }
            let endpoint = SpeakEndpoint.unixSocket(path: speakd.socketPath)
            let idle = try RawConnection(endpoint)
            let trickling = try RawConnection(endpoint)
            trickling.send(
                "POST /v1/announcements HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"
            )
            let started = ContinuousClock.now
            let stream = Task {
                var queued = 0
                for try await message in speakd.unixClient.events() where message.event == "queued" {
                    queued += 1
                    break
                }
                return queued
            }
            var trickleClosedAt: Duration?
            var idleClosedAt: Duration?
            while ContinuousClock.now - started < .seconds(4) {
                if trickleClosedAt == nil {
                    trickling.send(" ")
                    if trickling.isClosedByPeer() { trickleClosedAt = ContinuousClock.now - started }
                }
                if idleClosedAt == nil, idle.isClosedByPeer() { idleClosedAt = ContinuousClock.now - started }
                try await Task.sleep(for: .milliseconds(100))
            }
            let idleClosed = try #require(idleClosedAt, "the idle connection is still open")
            #expect(idleClosed >= .milliseconds(900) && idleClosed < .seconds(2), "\(idleClosed)")
            let trickleClosed = try #require(trickleClosedAt, "the trickled body is still being read")
            #expect(trickleClosed >= .milliseconds(1_900) && trickleClosed < .seconds(3), "\(trickleClosed)")

            // Four idle timeouts later, the event stream still delivers.
            #expect(try await speakd.openEventStreams() == 1)
            let response = try await post(announcement("Still listening"), via: speakd.unixClient)
            #expect(response.status == 202)
            #expect(try await stream.value == 1)
            idle.close()
            trickling.close()
        }

        private func postAndCancel(_ text: String, client: SpeakHTTPClient) async throws {
            let response = try await post(announcement(text), via: client)
            guard response.status == 202 else {
                Issue.record("POST answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
                return
            }
            let accepted = try response.decode(AnnouncementAccepted.self)
            _ = try await client.send("DELETE", "/v1/announcements/\(accepted.id)")
        }
    }
}

/// VmRSS of `pid` in kB, from /proc; with `peak`, its high-water mark VmHWM.
func residentKilobytes(_ pid: pid_t, peak: Bool = false) throws -> Int {
    try memoryKilobytes(pid, peak ? "VmHWM" : "VmRSS")
}

/// A `kB` line of /proc/PID/status (`VmRSS`, `VmHWM`).
func memoryKilobytes(_ pid: pid_t, _ key: String) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("\(key):") }),
        let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])
    else { throw SpeakdProcess.Failure(description: "no \(key) in /proc/\(pid)/status") }
    return kilobytes
}

/// The bytes the kernel holds unacknowledged or unsent on the IPv4 TCP socket from `localPort` to
/// `remotePort` (its `tx_queue` in /proc/net/tcp, in any state); nil when there is no such socket.
func kernelSendQueue(localPort: Int, remotePort: Int) -> Int? {
    // Read to the end: /proc reports no size, and the table is as long as the machine's connections.
    guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return nil }
    defer { try? handle.close() }
    guard let data = try? handle.readToEnd() else { return nil }
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 4,
            let local = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
            let remote = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
            local == localPort, remote == remotePort,
            let queued = fields[4].split(separator: ":").first.flatMap({ Int($0, radix: 16) })
        else { continue }
        return queued
    }
    return nil
}

/// Raises this process's soft descriptor limit, so a test can hold thousands of connections.
func raiseOwnDescriptorLimit(to wanted: Int) throws {
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    guard limit.rlim_cur < rlim_t(wanted) else { return }
    guard limit.rlim_max >= rlim_t(wanted) else {
        throw SpeakdProcess.Failure(description: "the hard descriptor limit \(limit.rlim_max) is below \(wanted)")
    }
    limit.rlim_cur = rlim_t(wanted)
    setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
}

/// A plain socket to the daemon, for clients that misbehave on purpose.
final class RawConnection: @unchecked Sendable {
    // Only the test's own task uses a connection, one call at a time; the descriptor is a plain Int32.
    let descriptor: Int32

    init(_ endpoint: SpeakEndpoint, receiveBuffer: Int32? = nil) throws {
        switch endpoint {
        case .unixSocket(let path):
            descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            if let receiveBuffer { Self.setReceiveBuffer(descriptor, receiveBuffer) }
            guard let address = UnixSocketAddress(path: path),
                address.withSocketAddress({ connect(descriptor, $0, $1) }) == 0
            else { throw SpeakdProcess.Failure(description: "connect: \(String(cString: strerror(errno)))") }
        case .tcp(let host, let port):
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if let receiveBuffer { Self.setReceiveBuffer(descriptor, receiveBuffer) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr(host)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                throw SpeakdProcess.Failure(description: "connect: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// The port this end of a TCP connection is bound to.
    func localPort() throws -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0 else {
            throw SpeakdProcess.Failure(description: "getsockname: \(String(cString: strerror(errno)))")
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func setReceiveBuffer(_ descriptor: Int32, _ bytes: Int32) {
        var bytes = bytes
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &bytes, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Sends `text`, ignoring failures (the daemon may have closed the connection).
    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Whether the daemon has closed its end: a non-blocking peek sees end of stream or a reset.
    func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        let result = recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return result == 0 || (result < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// Reads and discards until end of stream; false if it has not come within `timeout`.
    func drainsToEndOfStream(within timeout: Duration) async -> Bool {
        await readToEndOfStream(within: timeout, keeping: false) != nil
    }

    /// Everything read until end of stream (or a reset); nil if it has not come within `timeout`.
    func readToEndOfStream(within timeout: Duration) async -> [UInt8]? {
        await readToEndOfStream(within: timeout, keeping: true)
    }

    private func readToEndOfStream(within timeout: Duration, keeping: Bool) async -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var kept: [UInt8] = []
        while ContinuousClock.now < deadline {
            let result = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if result == 0 { return kept }
            if result > 0 {
                if keeping { kept += buffer[0..<result] }
            } else {
                if errno != EAGAIN && errno != EWOULDBLOCK { return kept }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        return nil
    }

    func close() {
        Glibc.close(descriptor)
    }
}
