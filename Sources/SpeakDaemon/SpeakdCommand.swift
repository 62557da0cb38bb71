import ArgumentParser
import Foundation
import Logging

/// `speakd`: the speech announcement daemon.
public struct SpeakdCommand: AsyncParsableCommand {
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
            """)

    @Option(help: "Config file of 'key = value' lines.")
    var config: String?

    @Option(help: "Unix socket path, or 'none'. (default: $RUNTIME_DIRECTORY/speakd.sock, else /run/speakd/speakd.sock for root, else $XDG_RUNTIME_DIR/speakd/speakd.sock)")
    var socket: String?

    @Option(help: "TCP listener HOST:PORT, or 'none'. (default: 127.0.0.1:7770)")
    var http: String?

    @Option(help: "Audio sink: auto, pulse, alsa[:DEVICE], wav:PATH or null. (default: auto)")
    var audio: String?

    @Option(help: "Voices directory with 'overrides' and 'variants/'. (default: the built-in overrides)")
    var voices: String?

    @Option(name: .customLong("max-queue"), help: "Most announcements that may wait. (default: 32)")
    var maxQueue: String?

    @Option(name: .customLong("cors-origin"), help: "Browser origin allowed to call the API, e.g. http://localhost:8080. (default: none)")
    var corsOrigin: String?

    @Option(name: .customLong("default-language"), help: "BCP 47 language of utterances that name none. (default: en)")
    var defaultLanguage: String?

    @Option(name: .customLong("fallback-language"), help: "BCP 47 language used when a requested one has no voice. (default: none, an error)")
    var fallbackLanguage: String?

    @Option(name: .customLong("max-body-bytes"), help: "Largest request body. (default: 65536)")
    var maxBodyBytes: String?

    @Option(name: .customLong("max-text-length"), help: "Longest text of one utterance, in characters. (default: 5000)")
    var maxTextLength: String?

    @Option(name: .customLong("max-spans"), help: "Most spans in one utterance. (default: 100)")
    var maxSpans: String?

    @Option(help: "Seconds between heartbeat comments on idle event streams. (default: 15)")
    var heartbeat: String?

    @Option(name: .customLong("event-history"), help: "Past events kept for Last-Event-ID resume. (default: 256)")
    var eventHistory: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. (default: info)")
    var logLevel: String?

    public init() {}

    /// The flags given, by configuration key.
    var flags: [String: String] {
        let pairs: [(String, String?)] = [
            ("socket", socket), ("http", http), ("audio", audio), ("voices", voices), ("max-queue", maxQueue),
            ("cors-origin", corsOrigin), ("default-language", defaultLanguage),
            ("fallback-language", fallbackLanguage), ("max-body-bytes", maxBodyBytes),
            ("max-text-length", maxTextLength), ("max-spans", maxSpans), ("heartbeat", heartbeat),
            ("event-history", eventHistory), ("log-level", logLevel),
        ]
        return Dictionary(uniqueKeysWithValues: pairs.compactMap { key, value in value.map { (key, $0) } })
    }

    /// Merges flags, `environment`, file and defaults; an error names the flag, variable or file line.
    public func configuration(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> DaemonConfiguration {
        try ConfigurationLoader.load(flags: flags, configPath: config, environment: environment)
    }

    public func validate() throws {
        do {
            _ = try configuration()
        } catch {
            throw ValidationError(error.description)
        }
    }

    public func run() async throws {
        let configuration = try configuration()
        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "speakd")
        let daemon: Daemon
        do {
            daemon = try await buildDaemon(configuration, logger: logger)
        } catch {
            logger.critical("speakd cannot start", metadata: ["speakd.error": "\(error)"])
            throw ExitCode.failure
        }
        try await daemon.run()
        logger.info("speakd stopped")
    }
}
