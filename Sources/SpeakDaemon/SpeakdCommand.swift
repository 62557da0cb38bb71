import ArgumentParser
import Foundation
import Logging
import SpeechModel

/// `speakd`: the speech announcement daemon.
public struct SpeakdCommand: AsyncParsableCommand {
    /// Name, abstract and the discussion of configuration sources in `--help`.
    public static let configuration = CommandConfiguration(
        commandName: "speakd",
        abstract: "Speak announcements one at a time, with espeak-ng, for the apps of a kiosk.",
        discussion: """
            Every setting can also come from the environment (SPEAKD_SOCKET, SPEAKD_HTTP, SPEAKD_AUDIO, \
            SPEAKD_MAX_QUEUE, …: SPEAKD_ and the flag name in capitals with '_' for '-') or from a config \
            file of 'key = value' lines with the flag names as keys ('#' starts a comment). Flags win over \
            the environment, the environment over the file, the file over the defaults. The file is \
            --config, else SPEAKD_CONFIG, else \(ConfigurationLoader.defaultConfigPath) if it exists.

            'none' turns off the Unix socket (--socket none) or TCP (--http none).

            The Unix socket (mode 0660) needs nothing more. TCP requests need 'Authorization: Bearer TOKEN' \
            with the token in --token-file, which speakd creates at its first start (except GET /healthz). \
            Every listener refuses requests whose Host is not its address, localhost or an --allowed-host \
            (421), from web pages other than --cors-origin (403), and bodies that are not application/json (415).
            """)

    @Option(help: ArgumentHelp("Config file of 'key = value' lines.", valueName: "file"))
    var config: String?

    @Option(
        help: ArgumentHelp(
            "Unix socket path, or 'none'. (default: $RUNTIME_DIRECTORY/speakd.sock, else /run/speakd/speakd.sock for root, else $XDG_RUNTIME_DIR/speakd/speakd.sock)",
            valueName: "path"))
    var socket: String?

    @Option(help: ArgumentHelp("TCP listener HOST:PORT, or 'none'. (default: 127.0.0.1:7770)", valueName: "host:port"))
    var http: String?

    @Option(
        help: ArgumentHelp(
            "Audio sink: auto, pulse, alsa[:DEVICE], wav:PATH or null. (default: auto)", valueName: "sink"))
    var audio: String?

    @Option(
        help: ArgumentHelp(
            "Voices directory with 'overrides' and 'variants/'. (default: the built-in overrides)", valueName: "dir"))
    var voices: String?

    @Option(
        name: .customLong("max-queue"),
        help: ArgumentHelp("Most announcements that may wait. (default: 32)", valueName: "n"))
    var maxQueue: String?

    @Option(
        name: .customLong("engine-workers"),
        help: ArgumentHelp(
            "Engine worker processes that render speech: a number or auto. (default: auto, one per core)",
            valueName: "n"))
    var engineWorkers: String?

    @Option(
        name: .customLong("engine-worker"),
        help: ArgumentHelp(
            "The speakd-engine-worker executable, or auto. (default: auto, the one beside speakd)",
            valueName: "path"))
    var engineWorker: String?

    @Option(
        name: .customLong("cors-origin"),
        help: ArgumentHelp(
            "Browser origin allowed to call the API, e.g. http://localhost:8080. (default: none)", valueName: "origin"))
    var corsOrigin: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp(
            "File with the bearer token TCP requests must carry; created (mode 0640) when missing. (default: 'token' next to the socket)",
            valueName: "path"))
    var tokenFile: String?

    @Flag(
        name: .customLong("tcp-open"),
        help: ArgumentHelp(
            "Let TCP requests in without the token: any local user and web page can then post and cancel. Loopback only."
        ))
    var tcpOpen = false

    @Option(
        name: .customLong("allowed-host"),
        help: ArgumentHelp(
            "A further name requests may carry in Host (repeatable or comma-separated), besides the listen address and localhost.",
            valueName: "name"))
    var allowedHost: [String] = []

    @Option(
        name: .customLong("default-language"),
        help: ArgumentHelp("BCP 47 language of utterances that name none. (default: en)", valueName: "tag"))
    var defaultLanguage: String?

    @Option(
        name: .customLong("fallback-language"),
        help: ArgumentHelp(
            "BCP 47 language used when a requested one has no voice. (default: none, an error)", valueName: "tag"))
    var fallbackLanguage: String?

    @Option(
        name: .customLong("max-body-bytes"),
        help: ArgumentHelp("Largest request body. (default: 65536)", valueName: "bytes"))
    var maxBodyBytes: String?

    @Option(
        name: .customLong("max-text-length"),
        help: ArgumentHelp(
            "Longest text of one utterance, in characters. (default: \(Utterance.Limits.default.maxTextLength))",
            valueName: "characters"))
    var maxTextLength: String?

    @Option(
        name: .customLong("max-spans"),
        help: ArgumentHelp(
            "Most spans in one utterance. (default: \(Utterance.Limits.default.maxSpans))", valueName: "n"))
    var maxSpans: String?

    @Option(
        help: ArgumentHelp(
            "Seconds between heartbeat comments on idle event streams. (default: 15)", valueName: "seconds"))
    var heartbeat: String?

    @Option(
        name: .customLong("lead-in"),
        help: ArgumentHelp(
            "Seconds of silence before each announcement, for sound hardware that wakes up late. (default: 0)",
            valueName: "seconds"))
    var leadIn: String?

    @Option(
        name: .customLong("event-history"),
        help: ArgumentHelp("Past events kept for Last-Event-ID resume. (default: 256)", valueName: "n"))
    var eventHistory: String?

    @Option(
        name: .customLong("max-connections"),
        help: ArgumentHelp(
            "Most connections per listener; at the limit the longest idle one is closed. Lowered to fit the descriptor limit. (default: 4096)",
            valueName: "n"))
    var maxConnections: String?

    @Option(
        name: .customLong("idle-timeout"),
        help: ArgumentHelp(
            "Seconds a connection may wait for its next request. (default: 60)", valueName: "seconds"))
    var idleTimeout: String?

    @Option(
        name: .customLong("header-timeout"),
        help: ArgumentHelp(
            "Seconds a request header may take from its first byte. (default: 10)", valueName: "seconds"))
    var headerTimeout: String?

    @Option(
        name: .customLong("body-timeout"),
        help: ArgumentHelp("Seconds a request body may take after its header. (default: 30)", valueName: "seconds"))
    var bodyTimeout: String?

    @Option(
        name: .customLong("send-timeout"),
        help: ArgumentHelp(
            "Seconds a response (an event stream too) may stay stalled by a client that does not read. (default: 10)",
            valueName: "seconds"))
    var sendTimeout: String?

    @Option(
        name: .customLong("log-level"),
        help: ArgumentHelp(
            "trace, debug, info, notice, warning, error or critical. (default: info)", valueName: "level"))
    var logLevel: String?

    /// Required by ArgumentParser; the options are filled in by parsing.
    public init() {}

    /// The flags given, by configuration key.
    var flags: [String: String] {
        let pairs: [(String, String?)] = [
            ("socket", socket), ("http", http), ("audio", audio), ("voices", voices), ("max-queue", maxQueue),
            ("cors-origin", corsOrigin), ("token-file", tokenFile), ("tcp-open", tcpOpen ? "true" : nil),
            ("allowed-host", allowedHost.isEmpty ? nil : allowedHost.joined(separator: ",")),
            ("default-language", defaultLanguage),
            ("fallback-language", fallbackLanguage), ("max-body-bytes", maxBodyBytes),
            ("max-text-length", maxTextLength), ("max-spans", maxSpans), ("heartbeat", heartbeat),
            ("event-history", eventHistory), ("lead-in", leadIn), ("log-level", logLevel),
            ("max-connections", maxConnections), ("idle-timeout", idleTimeout), ("header-timeout", headerTimeout),
            ("body-timeout", bodyTimeout), ("send-timeout", sendTimeout),
            ("engine-workers", engineWorkers), ("engine-worker", engineWorker),
        ]
        return Dictionary(uniqueKeysWithValues: pairs.compactMap { key, value in value.map { (key, $0) } })
    }

    /// Merges flags, `environment`, file and defaults; an error names the flag, variable or file line.
    public func configuration(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> DaemonConfiguration {
        try ConfigurationLoader.load(flags: flags, configPath: config, environment: environment)
    }

    /// Checks the merged configuration, so a bad value is reported with the usage.
    public func validate() throws {
        do {
            _ = try configuration()
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// Builds the daemon and runs it until SIGTERM or SIGINT.
    public func run() async throws {
        var configuration = try configuration()
        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "speakd")
        configuration.connectionLimits = DescriptorLimit.raise(
            fitting: configuration.connectionLimits, listeners: configuration.listenAddresses.count, logger: logger)
        let daemon: Daemon
        do {
            daemon = try await buildDaemon(configuration, logger: logger)
        } catch {
            logger.critical("speakd cannot start", metadata: ["speakd.error": "\(error)"])
            throw ExitCode.failure
        }
        do {
            try await daemon.run()
        } catch {
            logger.critical("speakd stopped", metadata: ["speakd.error": "\(error)"])
            throw ExitCode.failure
        }
        logger.info("speakd stopped")
    }
}
