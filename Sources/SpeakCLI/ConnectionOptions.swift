import ArgumentParser
import Foundation
import SpeakAPI
import SpeakClient

/// How the CLI finds the daemon.
struct ConnectionOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The daemon's Unix socket (default: $SPEAKD_SOCKET, then $XDG_RUNTIME_DIR/speakd/speakd.sock, then /run/speakd/speakd.sock).",
            valueName: "path"))
    var socket: String?

    @Option(
        help: ArgumentHelp(
            "The daemon's TCP address instead of its socket (default: $SPEAKD_HTTP).", valueName: "host:port"))
    var http: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp(
            "The file with the daemon's bearer token, sent over TCP (default: $SPEAKD_TOKEN_FILE, then $SPEAKD_TOKEN, then 'token' next to the default socket).",
            valueName: "path"))
    var tokenFile: String?

    func validate() throws {
        if let http { _ = try Self.tcpEndpoint(http, flag: "--http") }
        if socket != nil, http != nil {
            throw ValidationError("--socket and --http name two daemons; give one")
        }
    }

    /// True when the user named a daemon on the command line or in the environment.
    func isExplicit(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        socket != nil || http != nil || environment["SPEAKD_SOCKET"]?.isEmpty == false
            || environment["SPEAKD_HTTP"]?.isEmpty == false
    }

    /// The places to look for a daemon, in order.
    func candidates(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [SpeakEndpoint] {
        if let socket { return [.unixSocket(path: socket)] }
        if let http { return [try Self.tcpEndpoint(http, flag: "--http")] }
        if let socket = environment["SPEAKD_SOCKET"], !socket.isEmpty { return [.unixSocket(path: socket)] }
        if let http = environment["SPEAKD_HTTP"], !http.isEmpty {
            return [try Self.tcpEndpoint(http, flag: "SPEAKD_HTTP")]
        }
        var defaults: [SpeakEndpoint] = []
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            defaults.append(.unixSocket(path: runtime + "/speakd/speakd.sock"))
        }
        defaults.append(.unixSocket(path: "/run/speakd/speakd.sock"))
        return defaults
    }

    /// Parses `host:port` (`[::1]:7770` for IPv6) as the daemon's `--http` does, except that a
    /// client must name the host and a port from 1.
    static func tcpEndpoint(_ text: String, flag: String) throws -> SpeakEndpoint {
        do throws(SpeakEndpointError) {
            return try SpeakEndpoint(hostPort: text, for: .client)
        } catch {
            throw ValidationError("\(flag) \(text): \(error.reason)")
        }
    }

    /// The bearer token for a TCP daemon (`AccessToken.find`); nil for the Unix socket, which
    /// needs none, and when no token is to be found (a daemon started with `--tcp-open`).
    func token(
        for endpoint: SpeakEndpoint, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> String? {
        guard case .tcp = endpoint else { return nil }
        do {
            return try AccessToken.find(file: tokenFile, environment: environment)
        } catch {
            throw SpeakFailure.daemonUnreachable("\(error)")
        }
    }

    /// The daemon named by these options, or the first default one that answers; nil when none does.
    func reachableDaemon() async throws -> SpeakHTTPClient? {
        for endpoint in try candidates() {
            let probe = SpeakHTTPClient(endpoint: endpoint, timeout: .seconds(2))
            if (try? await probe.send("GET", "/healthz")) != nil {
                return SpeakHTTPClient(endpoint: endpoint, token: try token(for: endpoint))
            }
        }
        return nil
    }

    /// The daemon these options name; an error when it cannot be reached.
    func requireDaemon() async throws -> SpeakHTTPClient {
        guard let client = try await reachableDaemon() else {
            let tried = try candidates().map(\.description).joined(separator: ", ")
            throw SpeakFailure.daemonUnreachable("no speakd answers at \(tried)")
        }
        return client
    }
}
