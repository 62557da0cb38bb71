import ArgumentParser
import FoundationEssentials
import Logging
import SpeakdVersion

#if canImport(Glibc)
import Glibc
#endif

/// `speakd`: the speech announcement daemon.
public struct SpeakdCommand: AsyncParsableCommand {
    /// Name, abstract, and a discussion of the configuration sources with every setting, from
    /// `DaemonConfiguration.settings`, in `--help`.
    public static let configuration = CommandConfiguration(
        commandName: "speakd",
        abstract: "Speak announcements one at a time, with espeak-ng, for the apps of a kiosk.",
        usage: "speakd [--<setting> <value> ...] [\(ConfigurationLoader.configFlag) <file>]",
        discussion: overview + "\n\n" + settingsHelp(),
        version: SpeakdVersion.current)

    /// What `--help` and speakd(8) say of the configuration sources, before the settings.
    static let overview = """
        Every setting can also come from the environment (SPEAKD_SOCKET, SPEAKD_HTTP, SPEAKD_AUDIO, \
        SPEAKD_MAX_QUEUE, …: SPEAKD_ and the flag name in capitals with '_' for '-') or from a config \
        file of 'key = value' lines with the flag names as keys ('#' starts a comment). Flags win over \
        the environment, the environment over the file, the file over the defaults. The file is \
        \(ConfigurationLoader.configFlag), else \(ConfigurationLoader.configVariable), else the first that \
        exists of speakd.conf in $CONFIGURATION_DIRECTORY (systemd's ConfigurationDirectory=) and \
        \(ConfigurationLoader.defaultConfigPath).

        'none' turns off the Unix socket (--socket none) or TCP (--http none).

        The Unix socket (mode 0660) needs nothing more. TCP requests need 'Authorization: Bearer TOKEN' \
        with the token in --token-file, which speakd creates at its first start (except GET /healthz). \
        Every listener refuses requests whose Host is not its address, localhost or an --allowed-host \
        (421), from web pages other than --cors-origin (403), and bodies that are not application/json (415).
        """

    /// The settings as `--help` lists them: flag, value and help, with the default. The lines are
    /// wrapped here, narrower than ArgumentParser's 80 columns, so that they keep their columns.
    static func settingsHelp(width: Int = 78) -> String {
        let config = (
            label: "\(ConfigurationLoader.configFlag) <file>", help: "Config file of 'key = value' lines.",
            shown: "\(ConfigurationLoader.configVariable), else the first that exists of "
                + "$CONFIGURATION_DIRECTORY/speakd.conf and \(ConfigurationLoader.defaultConfigPath)"
        )
        let entries =
            [config]
            + DaemonConfiguration.settings.map { setting in
                (
                    label: setting.kind == .toggle ? setting.flag : "\(setting.flag) <\(setting.valueName)>",
                    help: setting.help, shown: setting.defaultDescription
                )
            }
        let column = 26
        var lines = ["SETTINGS:"]
        for entry in entries {
            let label = "  " + entry.label
            var line = label.count < column - 1 ? label + String(repeating: " ", count: column - label.count) : ""
            if line.isEmpty { lines.append(label) }
            var filled = false
            for word in "\(entry.help) (default: \(entry.shown))".split(separator: " ") {
                if filled, line.count + 1 + word.count > width {
                    lines.append(line)
                    line = String(repeating: " ", count: column)
                    filled = false
                }
                if line.isEmpty { line = String(repeating: " ", count: column) }
                line += (filled ? " " : "") + word
                filled = true
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// The command line, read by `ConfigurationLoader` with the same settings, checks and errors as
    /// the environment and the file. ArgumentParser finds options only in stored properties, so
    /// `DaemonConfiguration.settings` could not declare them; it handles `--help` and prints errors
    /// with the usage.
    @Argument(parsing: .allUnrecognized, help: .hidden)
    var arguments: [String] = []

    /// Required by ArgumentParser; the options are filled in by parsing.
    public init() {}

    /// Merges flags, `environment`, file and defaults; an error names the flag, variable or file line.
    public func configuration(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> DaemonConfiguration {
        try ConfigurationLoader.load(arguments: arguments, environment: environment)
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
        logger.info("speakd starting", metadata: ["speakd.version": "\(SpeakdVersion.current)"])
        // SSIP listens with --ssip, or on a socket systemd passes as `ssip` (Daemon+build).
        let ssip =
            configuration.ssipPath != nil
            || SystemdSockets(environment: ProcessInfo.processInfo.environment).ssip != nil
        configuration.connectionLimits = DescriptorLimit.raise(
            fitting: configuration.connectionLimits,
            listeners: configuration.listenAddresses.count + (ssip ? 1 : 0), logger: logger)
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
