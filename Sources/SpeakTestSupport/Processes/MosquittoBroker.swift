import Foundation
import Synchronization

/// A private Eclipse Mosquitto broker on a loopback port, for the fleet tests and benchmark:
/// anonymous, no persistence, its log in its own directory. It can be killed and started again
/// on the same port, as a broker that crashes and comes back.
public final class MosquittoBroker: Sendable {
    /// The broker's TCP port on 127.0.0.1.
    public let port: Int
    /// Its configuration and log.
    public let directory: URL
    private let process: Mutex<ChildProcess?>

    /// The broker's URL for `--mqtt`.
    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// The broker's log so far.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("mosquitto.log"), encoding: .utf8)) ?? ""
    }

    /// Starts `mosquitto` (from `$MOSQUITTO` or /usr/sbin) and waits until it accepts connections.
    /// - Parameter settings: configuration lines after the listener and logging, such as the
    ///   limits of `docs/examples/mosquitto-speakd.conf`; by default a deep queue only.
    public static func start(port: Int? = nil, settings: [String] = ["max_queued_messages 10000"]) async throws
        -> MosquittoBroker
    {
        let port = try port ?? SpeakdProcess.freeLoopbackPort()
        let directory = URL(fileURLWithPath: "/tmp", isDirectory: true)
            .appendingPathComponent("mosquitto-it-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let configuration = """
            listener \(port) 127.0.0.1
            allow_anonymous true
            persistence false
            log_dest stdout
            log_type error
            log_type warning
            log_type notice
            log_type information

            """ + settings.joined(separator: "\n")
        try configuration.write(
            to: directory.appendingPathComponent("mosquitto.conf"), atomically: true, encoding: .utf8)
        let broker = MosquittoBroker(port: port, directory: directory)
        try await broker.restart()
        return broker
    }

    private init(port: Int, directory: URL) {
        self.port = port
        self.directory = directory
        self.process = Mutex(nil)
    }

    deinit {
        process.withLock { process in
            process?.send(SIGKILL)
            _ = process?.exitStatus
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the broker again (after `kill()`), on the same port.
    public func restart(timeout: Duration = .seconds(10)) async throws {
        let executable = ProcessInfo.processInfo.environment["MOSQUITTO"] ?? "/usr/sbin/mosquitto"
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw SpeakdProcess.Failure(
                description: "\(executable) is missing: run scripts/install-deps --test (Debian's mosquitto)")
        }
        let child = try ChildProcess(
            executable, ["-c", directory.appendingPathComponent("mosquitto.conf").path],
            environment: ProcessInfo.processInfo.environment,
            output: directory.appendingPathComponent("mosquitto.log").path)
        process.withLock { $0 = child }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if Self.accepts(port: port) { return }
            if let status = child.exitStatus {
                throw SpeakdProcess.Failure(description: "mosquitto exited with \(status):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw SpeakdProcess.Failure(description: "mosquitto did not listen on \(port) within \(timeout):\n\(log)")
    }

    /// The running broker's PID, for reading its CPU time.
    public var pid: pid_t? { process.withLock { $0?.pid } }

    /// Kills the broker with SIGKILL, as a crash would, and waits until it is gone.
    public func kill() async {
        let child = process.withLock { $0 }
        child?.send(SIGKILL)
        _ = await child?.wait(timeout: .seconds(10))
    }

    /// Stops the broker with SIGTERM.
    public func stop() async {
        await process.withLock { $0 }?.terminate()
    }

    private static func accepts(port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
