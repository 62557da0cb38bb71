import FoundationEssentials
import Glibc
import PosixSupport
import SpeakAPI
import SpeechModel
import Synchronization

/// A response as `SpeakHTTPClient` reads it.
public struct SpeakHTTPResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Header names in lower case, in the order received.
    public var headers: [(name: String, value: String)]
    /// The whole body, de-chunked.
    public var body: [UInt8]

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let name = name.lowercased()
        return headers.first { $0.name == name }?.value
    }

    /// Decodes the body as speakd JSON.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try WireFormat.decoder().decode(type, from: Data(body))
    }

    /// The error body of a 4xx/5xx response, if it is one.
    public var error: ErrorResponse? {
        guard status >= 400 else { return nil }
        return try? decode(ErrorResponse.self)
    }
}

/// A minimal HTTP/1.1 client for speakd over a Unix socket or loopback TCP.
///
/// URLSession cannot reach a Unix socket, and the CLI should not need an HTTP framework; one
/// request per connection (`Connection: close`) keeps this small. Blocking socket calls run on a
/// thread of their own, never on Swift's cooperative pool.
public struct SpeakHTTPClient: Sendable {
    /// Where the daemon listens.
    public let endpoint: SpeakEndpoint
    /// How long a connect, send or receive may block.
    public var timeout: Duration
    /// The bearer token sent over TCP (`AccessToken`); never sent over the Unix socket, which
    /// its group guards.
    public var token: String?

    /// - Parameters:
    ///   - endpoint: where the daemon listens.
    ///   - timeout: how long a connect, send or receive may block.
    ///   - token: the bearer token for TCP; nil sends none.
    public init(endpoint: SpeakEndpoint, timeout: Duration = .seconds(30), token: String? = nil) {
        self.endpoint = endpoint
        self.timeout = timeout
        self.token = token
    }

    /// Sends one request and reads the whole response.
    public func send(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) async throws -> SpeakHTTPResponse {
        let endpoint = endpoint
        let timeout = timeout
        let headers = authorized(headers)
        return try await Self.onThread {
            let connection = try SocketConnection(endpoint: endpoint, timeout: timeout, receiveTimeout: timeout)
            defer { connection.close() }
            try connection.write(Self.requestBytes(method, path, endpoint: endpoint, headers: headers, body: body))
            var reader = ResponseReader(connection: connection)
            var response = try reader.readHead()
            response.body = try reader.readWholeBody()
            return response
        }
    }

    /// Sends a JSON body (encoded with `WireFormat`).
    public func send(_ method: String, _ path: String, json: some Encodable, headers: [(String, String)] = [])
        async throws -> SpeakHTTPResponse
    {
        let body = Array(try WireFormat.encoder().encode(json))
        return try await send(method, path, headers: [("Content-Type", "application/json")] + headers, body: body)
    }

    /// Opens `GET path` as an event stream: the response head, then messages as they arrive.
    /// Cancelling the consuming task (or dropping the stream) closes the connection.
    public func events(
        _ path: String = "/v1/events", lastEventID: String? = nil
    ) -> AsyncThrowingStream<ServerSentEvent, any Error> {
        events(path, lastEventID: lastEventID, opened: { _ in })
    }

    /// `events(_:lastEventID:)`, returned once the daemon has answered the stream's request (its
    /// head, status 200): from then on the stream has every event the daemon sends. A request made
    /// after this returns cannot have events the stream misses, as it could right after
    /// `events(_:lastEventID:)`, whose connection is still being made.
    public func openEvents(
        _ path: String = "/v1/events", lastEventID: String? = nil
    ) async throws -> AsyncThrowingStream<ServerSentEvent, any Error> {
        let opened = OpenSignal()
        let stream = events(path, lastEventID: lastEventID, opened: { opened.resume($0) })
        try await opened.wait()
        return stream
    }

    private func events(
        _ path: String, lastEventID: String?, opened: @escaping @Sendable ((any Error)?) -> Void
    ) -> AsyncThrowingStream<ServerSentEvent, any Error> {
        let endpoint = endpoint
        let timeout = timeout
        let headers = authorized(
            [("Accept", "text/event-stream")] + (lastEventID.map { [("Last-Event-ID", $0)] } ?? []))
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: ServerSentEvent.self)
        let connectionBox = ConnectionBox()
        continuation.onTermination = { _ in connectionBox.shutdown() }
        DetachedThread.start(name: "speak-events") {
            do {
                let connection = try SocketConnection(endpoint: endpoint, timeout: timeout, receiveTimeout: nil)
                connectionBox.set(connection)
                defer { connection.close() }
                try connection.write(Self.requestBytes("GET", path, endpoint: endpoint, headers: headers, body: nil))
                var reader = ResponseReader(connection: connection)
                let head = try reader.readHead()
                guard head.status == 200 else {
                    var failed = head
                    failed.body = try reader.readWholeBody()
                    throw SpeakClientError(failed.error?.description ?? "the event stream answered \(head.status)")
                }
                opened(nil)
                var parser = ServerSentEventParser()
                try reader.readBody { bytes in
                    for message in parser.feed(bytes) { continuation.yield(message) }
                }
                continuation.finish()
            } catch {
                opened(error)
                continuation.finish(throwing: connectionBox.isShutDown ? nil : error)
            }
        }
        return stream
    }

    /// `headers` with the bearer token added, on TCP when there is one and none is given.
    private func authorized(_ headers: [(String, String)]) -> [(String, String)] {
        guard case .tcp = endpoint, let token, !headers.contains(where: { $0.0.lowercased() == "authorization" })
        else { return headers }
        return [("Authorization", "Bearer \(token)")] + headers
    }

    private static func requestBytes(
        _ method: String, _ path: String, endpoint: SpeakEndpoint, headers: [(String, String)], body: [UInt8]?
    ) -> [UInt8] {
        let host: String
        switch endpoint {
        case .unixSocket: host = "localhost"
        case .tcp: host = endpoint.description
        }
        // A Host among `headers` replaces the endpoint's (tests send foreign ones on purpose).
        let givesHost = headers.contains { $0.0.lowercased() == "host" }
        var head = "\(method) \(path) HTTP/1.1\r\n" + (givesHost ? "" : "Host: \(host)\r\n") + "Connection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DetachedThread.start(name: "speak-request") { continuation.resume(with: Result(catching: work)) }
        }
    }
}

/// A failure to talk to the daemon: cannot connect, connection closed early, a malformed response.
public struct SpeakClientError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Holds the connection of an event stream so that terminating the stream can unblock its reader.
private final class ConnectionBox: Sendable {
    private let state = Mutex<(connection: SocketConnection?, shutDown: Bool)>((nil, false))

    func set(_ connection: SocketConnection) {
        let already = state.withLock { state in
            state.connection = connection
            return state.shutDown
        }
        if already { connection.shutdown() }
    }

    func shutdown() {
        let connection = state.withLock { state in
            state.shutDown = true
            return state.connection
        }
        connection?.shutdown()
    }

    var isShutDown: Bool { state.withLock { $0.shutDown } }
}

/// A connected stream socket with blocking reads and writes bounded by timeouts.
private final class SocketConnection: Sendable {
    let descriptor: Int32

    init(endpoint: SpeakEndpoint, timeout: Duration, receiveTimeout: Duration?) throws {
        switch endpoint {
        case .unixSocket(let path):
            descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw SpeakClientError("socket(): \(String(cString: strerror(errno)))") }
            guard let address = UnixSocketAddress(path: path) else {
                Glibc.close(descriptor)
                throw SpeakClientError("socket path '\(path)' is longer than \(UnixSocketAddress.capacity) bytes")
            }
            Self.setTimeouts(descriptor, send: timeout, receive: receiveTimeout)
            let result = address.withSocketAddress { connect(descriptor, $0, $1) }
            guard result == 0 else {
                let message = String(cString: strerror(errno))
                Glibc.close(descriptor)
                throw SpeakClientError("cannot connect to \(path): \(message)")
            }
        case .tcp(let host, let port):
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, String(port), &hints, &list)
            guard status == 0, let first = list else {
                throw SpeakClientError("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
            }
            defer { freeaddrinfo(list) }
            descriptor = socket(
                first.pointee.ai_family, first.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue),
                first.pointee.ai_protocol)
            guard descriptor >= 0 else { throw SpeakClientError("socket(): \(String(cString: strerror(errno)))") }
            Self.setTimeouts(descriptor, send: timeout, receive: receiveTimeout)
            guard connect(descriptor, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
                let message = String(cString: strerror(errno))
                Glibc.close(descriptor)
                throw SpeakClientError("cannot connect to \(endpoint): \(message)")
            }
        }
    }

    private static func setTimeouts(_ descriptor: Int32, send: Duration, receive: Duration?) {
        func timeval(_ duration: Duration) -> Glibc.timeval {
            let (seconds, attoseconds) = duration.components
            return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        }
        var sendTime = timeval(send)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &sendTime, socklen_t(MemoryLayout<Glibc.timeval>.size))
        if let receive {
            var receiveTime = timeval(receive)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &receiveTime, socklen_t(MemoryLayout<Glibc.timeval>.size))
        }
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw SpeakClientError("send: \(String(cString: strerror(errno)))")
            }
            offset += sent
        }
    }

    /// Up to `count` bytes; an empty array at the end of the stream.
    func read(_ count: Int = 16 * 1024) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, count, 0) }
            if received < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw SpeakClientError("timed out waiting for the daemon")
                }
                throw SpeakClientError("recv: \(String(cString: strerror(errno)))")
            }
            return Array(buffer[..<received])
        }
    }

    /// Unblocks a reader on another thread.
    func shutdown() {
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    func close() {
        Glibc.close(descriptor)
    }
}

/// Reads a response head and a body framed by `Content-Length`, chunked encoding, or the end of the stream.
private struct ResponseReader {
    let connection: SocketConnection
    private var buffer: [UInt8] = []
    private var head: SpeakHTTPResponse?

    init(connection: SocketConnection) {
        self.connection = connection
    }

    private mutating func fill() throws -> Bool {
        let bytes = try connection.read()
        buffer.append(contentsOf: bytes)
        return !bytes.isEmpty
    }

    private mutating func line() throws -> String {
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var lineBytes = buffer[..<end]
                if lineBytes.last == UInt8(ascii: "\r") { lineBytes = lineBytes.dropLast() }
                let text = String(decoding: lineBytes, as: UTF8.self)
                buffer.removeSubrange(...end)
                return text
            }
            guard try fill() else { throw SpeakClientError("the daemon closed the connection early") }
        }
    }

    mutating func readHead() throws -> SpeakHTTPResponse {
        let statusLine = try line()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw SpeakClientError("not an HTTP response: '\(statusLine)'")
        }
        var headers: [(name: String, value: String)] = []
        while true {
            let header = try line()
            if header.isEmpty { break }
            guard let colon = header.firstIndex(of: ":") else { continue }
            headers.append(
                (
                    header[..<colon].lowercased(),
                    header[header.index(after: colon)...].trimmingWhitespace()
                ))
        }
        let response = SpeakHTTPResponse(status: status, headers: headers, body: [])
        head = response
        return response
    }

    mutating func readWholeBody() throws -> [UInt8] {
        var body: [UInt8] = []
        try readBody { body.append(contentsOf: $0) }
        return body
    }

    /// Calls `receive` with the next `count` body bytes, reading more as needed.
    private mutating func pass(_ count: Int, to receive: ([UInt8]) throws -> Void) throws {
        var remaining = count
        while remaining > 0 {
            if buffer.isEmpty, try !fill() { throw SpeakClientError("the daemon closed the connection mid-body") }
            let take = min(remaining, buffer.count)
            try receive(Array(buffer[..<take]))
            buffer.removeSubrange(..<take)
            remaining -= take
        }
    }

    /// Calls `receive` with body bytes as they arrive.
    mutating func readBody(_ receive: ([UInt8]) throws -> Void) throws {
        guard let head else { return }
        if head.header("transfer-encoding")?.lowercased().contains("chunked") == true {
            while true {
                let sizeLine = try line()
                guard let size = Int(sizeLine.split(separator: ";").first ?? "", radix: 16) else {
                    throw SpeakClientError("malformed chunk size '\(sizeLine)'")
                }
                if size == 0 {
                    while try !line().isEmpty {}
                    return
                }
                try pass(size, to: receive)
                _ = try line()
            }
        } else if let length = head.header("content-length").flatMap(Int.init) {
            try pass(length, to: receive)
        } else {
            if !buffer.isEmpty {
                try receive(buffer)
                buffer.removeAll()
            }
            while true {
                let bytes = try connection.read()
                if bytes.isEmpty { return }
                try receive(bytes)
            }
        }
    }
}

/// Resumes one waiter once, with the first outcome given (later ones are ignored).
private final class OpenSignal: Sendable {
    private struct State {
        var outcome: Result<Void, any Error>?
        var waiter: CheckedContinuation<Void, any Error>?
    }
    private let state = Mutex(State())

    func resume(_ error: (any Error)?) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard state.outcome == nil else { return nil }
            state.outcome = error.map { .failure($0) } ?? .success(())
            defer { state.waiter = nil }
            return state.waiter
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume() }
    }

    func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome = state.withLock { state -> Result<Void, any Error>? in
                if state.outcome == nil { state.waiter = continuation }
                return state.outcome
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }
}
