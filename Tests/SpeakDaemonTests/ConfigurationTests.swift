import AnnouncementIntake
import ArgumentParser
import Foundation
import SpeakAPI
import SpeakDaemon
import SpeakServer
import SpeakService
import SpeakTestSupport
import SpeakdVersion
import SpeechModel
import Testing

/// A config file in a fresh temporary directory.
func configFile(_ contents: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent(
        "speakd-\(UUID().uuidString.prefix(8)).conf"
    ).path
    try contents.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite("Configuration")
struct ConfigurationTests {
    static let environment = ["RUNTIME_DIRECTORY": "/run/speakd"]

    /// The daemon's size limits are the speech model's, which `speak` checks before it sends.
    @Test func sizeLimitsAreTheSpeechModels() throws {
        let configuration = try ConfigurationLoader.load(flags: [:], configPath: nil, environment: Self.environment)
        #expect(configuration.intakeLimits.maxSpans == Utterance.Limits.default.maxSpans)
        #expect(configuration.intakeLimits.maxTextLength == Utterance.Limits.default.maxTextLength)
        #expect(ServiceLimits().maxSpans == Utterance.Limits.default.maxSpans)
        #expect(ServiceLimits().maxTextLength == Utterance.Limits.default.maxTextLength)
    }

    @Test func defaults() throws {
        let configuration = try ConfigurationLoader.load(flags: [:], configPath: nil, environment: Self.environment)
        #expect(configuration.socketPath == "/run/speakd/speakd.sock")
        #expect(configuration.http == .tcp(host: "127.0.0.1", port: 7770))
        #expect(configuration.audio == "auto")
        #expect(configuration.maxQueue == 32)
        #expect(configuration.corsOrigin == nil)
        #expect(configuration.tokenFile == "/run/speakd/token")
        #expect(!configuration.tcpOpen)
        #expect(configuration.needsToken)
        #expect(configuration.allowedHosts == [])
        #expect(configuration.defaultLanguage == "en")
        #expect(
            configuration.listenAddresses == [
                .unixSocket(path: "/run/speakd/speakd.sock"), .tcp(host: "127.0.0.1", port: 7770),
            ])
    }

    /// One setting given in several places: the flag wins over the environment, which wins over the file.
    @Test(arguments: [
        (true, true, true, "flag"), (false, true, true, "env"), (false, false, true, "file"),
        (false, false, false, "default"),
    ])
    func precedence(flag: Bool, env: Bool, file: Bool, winner: String) throws {
        let values = ["flag": "11", "env": "22", "file": "33", "default": "32"]
        let path = try configFile(
            file ? "# a kiosk\nmax-queue = 33\naudio = null   # no sound card\n" : "audio = null\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var environment = Self.environment
        if env { environment["SPEAKD_MAX_QUEUE"] = "22" }
        let configuration = try ConfigurationLoader.load(
            flags: flag ? ["max-queue": "11"] : [:], configPath: path, environment: environment)
        #expect(configuration.maxQueue == Int(values[winner]!))
        #expect(configuration.audio == "null")
    }

    @Test func everyKeyHasAnEnvironmentVariable() throws {
        var environment = Self.environment
        environment["SPEAKD_SOCKET"] = "/tmp/k.sock"
        environment["SPEAKD_HTTP"] = "[::1]:8080"
        environment["SPEAKD_AUDIO"] = "alsa:hw:0"
        environment["SPEAKD_CORS_ORIGIN"] = "http://kiosk.local:8080/"
        environment["SPEAKD_FALLBACK_LANGUAGE"] = "EN-gb"
        environment["SPEAKD_LOG_LEVEL"] = "DEBUG"
        environment["SPEAKD_HEARTBEAT"] = "0.5"
        environment["SPEAKD_LEAD_IN"] = "0.1"
        environment["SPEAKD_MAX_CONNECTIONS"] = "100"
        environment["SPEAKD_IDLE_TIMEOUT"] = "5"
        environment["SPEAKD_HEADER_TIMEOUT"] = "2.5"
        environment["SPEAKD_BODY_TIMEOUT"] = "7"
        environment["SPEAKD_SEND_TIMEOUT"] = "0.5"
        let configuration = try ConfigurationLoader.load(flags: [:], configPath: nil, environment: environment)
        #expect(configuration.socketPath == "/tmp/k.sock")
        #expect(configuration.http == .tcp(host: "::1", port: 8080))
        #expect(configuration.audio == "alsa:hw:0")
        #expect(configuration.corsOrigin == "http://kiosk.local:8080")
        #expect(configuration.fallbackLanguage == "en-GB")
        #expect(configuration.logLevel == .debug)
        #expect(configuration.serverSettings.heartbeatInterval == .milliseconds(500))
        #expect(configuration.leadInSeconds == 0.1)
        #expect(
            configuration.connectionLimits
                == ConnectionLimits(
                    maxConnections: 100, idleTimeout: .seconds(5), headerTimeout: .milliseconds(2_500),
                    bodyTimeout: .seconds(7), sendTimeout: .milliseconds(500)))
        #expect(ConfigurationLoader.environmentName("max-body-bytes") == "SPEAKD_MAX_BODY_BYTES")
    }

    @Test func listenersCanBeTurnedOff() throws {
        let tcpOnly = try ConfigurationLoader.load(
            flags: ["socket": "none"], configPath: nil, environment: Self.environment)
        #expect(tcpOnly.listenAddresses == [.tcp(host: "127.0.0.1", port: 7770)])
        let socketOnly = try ConfigurationLoader.load(
            flags: ["http": "off"], configPath: nil, environment: Self.environment)
        #expect(socketOnly.listenAddresses == [.unixSocket(path: "/run/speakd/speakd.sock")])
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(
                flags: ["http": "none", "socket": "none"], configPath: nil, environment: Self.environment)
        }
    }

    /// Each bad value is reported with where it came from.
    @Test(arguments: [
        (["max-queue": "many"], [String: String](), "--max-queue: 'many' is not valid"),
        (["max-queue": "0"], [:], "--max-queue: '0' is not valid: expected a whole number 1–100000"),
        (["http": "localhost"], [:], "--http: 'localhost' is not valid"),
        (["http": "127.0.0.1:99999"], [:], "'99999' is not a port number"),
        (["audio": "speakers"], [:], "--audio: 'speakers' is not valid: unknown audio sink 'speakers'"),
        (["audio": "wav:"], [:], "--audio: 'wav:' is not valid"),
        (["cors-origin": "kiosk"], [:], "--cors-origin: 'kiosk' is not valid"),
        (["default-language": "en_GB"], [:], "--default-language: 'en_GB' is not valid"),
        (["log-level": "loud"], [:], "--log-level: 'loud' is not valid"),
        ([:], ["SPEAKD_MAX_SPANS": "-1"], "SPEAKD_MAX_SPANS: '-1' is not valid"),
        (["lead-in": "2"], [:], "--lead-in: '2' is not valid: expected seconds between 0 and 1"),
        (["tcp-open": "maybe"], [:], "--tcp-open: 'maybe' is not valid: expected true or false"),
        (["token-file": "token"], [:], "--token-file: 'token' is not valid: expected a path"),
        (["allowed-host": "kiosk.local:8080"], [:], "--allowed-host: 'kiosk.local:8080' is not valid"),
        ([:], ["SPEAKD_ALLOWED_HOST": "ok.local, http://x"], "SPEAKD_ALLOWED_HOST: 'http://x' is not valid"),
        (
            ["tcp-open": "true", "http": "0.0.0.0:7770"], [:],
            "--tcp-open: 'true' is not valid: TCP listens on 0.0.0.0:7770"
        ),
        ([:], ["SPEAKD_TCP_OPEN": "yes", "SPEAKD_HTTP": "192.168.1.20:7770"], "SPEAKD_TCP_OPEN: 'true' is not valid"),
        (["max-connections": "0"], [:], "--max-connections: '0' is not valid: expected a whole number"),
        (
            ["idle-timeout": "never"], [:],
            "--idle-timeout: 'never' is not valid: expected seconds between 0.1 and 86400"
        ),
        ([:], ["SPEAKD_HEADER_TIMEOUT": "0"], "SPEAKD_HEADER_TIMEOUT: '0' is not valid"),
        (["body-timeout": "-3"], [:], "--body-timeout: '-3' is not valid"),
        (["send-timeout": "inf"], [:], "--send-timeout: 'inf' is not valid"),
        ([:], ["SPEAKD_SOCKET": "speakd.sock"], "SPEAKD_SOCKET: 'speakd.sock' is not valid: expected a path"),
    ])
    func badValuesNameTheirSource(flags: [String: String], environment: [String: String], message: String) {
        do {
            _ = try ConfigurationLoader.load(
                flags: flags, configPath: nil, environment: Self.environment.merging(environment) { $1 })
            Issue.record("expected an error containing \(message)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    @Test func fileErrorsNameFileAndLine() throws {
        let unknown = try configFile("audio = null\nmax-qeue = 3\n")
        defer { try? FileManager.default.removeItem(atPath: unknown) }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(flags: [:], configPath: unknown, environment: [:])
        }
        do {
            _ = try ConfigurationLoader.load(flags: [:], configPath: unknown, environment: [:])
        } catch {
            #expect(error.description.hasPrefix("\(unknown):2: unknown setting 'max-qeue'"))
        }
        let malformed = try configFile("\n\naudio null\n")
        defer { try? FileManager.default.removeItem(atPath: malformed) }
        do {
            _ = try ConfigurationLoader.load(flags: [:], configPath: malformed, environment: [:])
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "\(malformed):3: expected 'key = value', found 'audio null'")
        }
        let badValue = try configFile("max-spans = \"lots\"\n")
        defer { try? FileManager.default.removeItem(atPath: badValue) }
        do {
            _ = try ConfigurationLoader.load(flags: [:], configPath: badValue, environment: [:])
            Issue.record("expected an error")
        } catch {
            #expect(error.description.hasPrefix("\(badValue):1: 'lots' is not valid"))
        }
        do {
            _ = try ConfigurationLoader.load(flags: [:], configPath: "/nonexistent/speakd.conf", environment: [:])
            Issue.record("expected an error")
        } catch {
            #expect(error.description.hasPrefix("cannot read config file /nonexistent/speakd.conf"))
            // The system's reason, not the error value's dump.
            #expect(error.description.hasSuffix("No such file or directory"), "\(error)")
        }
    }

    /// The token file follows the socket unless given; --tcp-open is for loopback addresses only.
    @Test func accessSettings() throws {
        let moved = try ConfigurationLoader.load(
            flags: ["socket": "/tmp/k/speakd.sock"], configPath: nil, environment: Self.environment)
        #expect(moved.tokenFile == "/tmp/k/token")
        let noSocket = try ConfigurationLoader.load(
            flags: ["socket": "none"], configPath: nil, environment: Self.environment)
        #expect(noSocket.tokenFile == "/run/speakd/token")
        let given = try ConfigurationLoader.load(
            flags: ["token-file": "/etc/speakd/token"], configPath: nil, environment: Self.environment)
        #expect(given.tokenFile == "/etc/speakd/token")

        for (host, open) in [("127.0.0.1:7770", true), ("127.8.9.1:7770", true), ("[::1]:7770", true)] {
            let configuration = try ConfigurationLoader.load(
                flags: ["tcp-open": "true", "http": host], configPath: nil, environment: Self.environment)
            #expect(configuration.tcpOpen == open)
            #expect(!configuration.needsToken)
        }
        let socketOnly = try ConfigurationLoader.load(
            flags: ["http": "none"], configPath: nil, environment: Self.environment)
        #expect(!socketOnly.needsToken)
        // A token guards a TCP listener on any address.
        let wide = try ConfigurationLoader.load(
            flags: ["http": "0.0.0.0:7770"], configPath: nil, environment: Self.environment)
        #expect(wide.needsToken)

        let path = try configFile("allowed-host = kiosk.local\nallowed-host = Panel.Local., [fe80::1]\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fromFile = try ConfigurationLoader.load(flags: [:], configPath: path, environment: Self.environment)
        #expect(fromFile.allowedHosts == ["kiosk.local", "panel.local", "fe80::1"])
        #expect(fromFile.serverSettings.allowedHosts == ["kiosk.local", "panel.local", "fe80::1"])
        let command = try SpeakdCommand.parse([
            "--allowed-host", "a.local", "--allowed-host", "b.local,c.local", "--tcp-open",
        ])
        let fromFlags = try command.configuration(environment: Self.environment)
        #expect(fromFlags.allowedHosts == ["a.local", "b.local", "c.local"])
        #expect(fromFlags.tcpOpen)
    }

    @Test func configFileFromEnvironment() throws {
        let path = try configFile("http = 127.0.0.1:9000\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try ConfigurationLoader.load(
            flags: [:], configPath: nil, environment: ["SPEAKD_CONFIG": path, "RUNTIME_DIRECTORY": "/run/speakd"])
        #expect(configuration.http == .tcp(host: "127.0.0.1", port: 9000))
    }

    @Test func defaultSocketPathFollowsTheEnvironment() {
        #expect(
            DaemonConfiguration.defaultSocketPath(environment: ["RUNTIME_DIRECTORY": "/run/speakd:/run/other"])
                == "/run/speakd/speakd.sock")
        if getuid() == 0 {
            #expect(
                DaemonConfiguration.defaultSocketPath(environment: ["XDG_RUNTIME_DIR": "/run/user/0"])
                    == "/run/speakd/speakd.sock")
        } else {
            #expect(
                DaemonConfiguration.defaultSocketPath(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"])
                    == "/run/user/1000/speakd/speakd.sock")
        }
    }

    @Test func commandParsesFlagsAndListsThemInHelp() throws {
        let command = try SpeakdCommand.parse([
            "--audio", "null", "--max-queue", "5", "--http", "none", "--socket", "/tmp/x.sock",
        ])
        let configuration = try command.configuration(environment: Self.environment)
        #expect(configuration.audio == "null")
        #expect(configuration.maxQueue == 5)
        #expect(configuration.listenAddresses == [.unixSocket(path: "/tmp/x.sock")])

        let help = SpeakdCommand.helpMessage()
        for flag in [
            "--socket", "--http", "--audio", "--voices", "--max-queue", "--config", "--cors-origin",
            "--default-language", "--fallback-language", "--token-file", "--tcp-open", "--allowed-host",
            "--max-connections", "--idle-timeout", "--header-timeout", "--body-timeout", "--send-timeout",
        ] {
            #expect(help.contains(flag), "\(flag)")
        }
        #expect(help.contains("SPEAKD_"))

        #expect(throws: (any Error).self) {
            let bad = try SpeakdCommand.parse(["--max-queue", "lots"])
            try bad.validate()
        }
    }
}

@Suite("Listen addresses")
struct ListenAddressTests {
    @Test(arguments: [
        ("127.0.0.1:7770", SpeakEndpoint.tcp(host: "127.0.0.1", port: 7770)),
        ("[::1]:80", .tcp(host: "::1", port: 80)),
        (":9000", .tcp(host: "127.0.0.1", port: 9000)),
        ("0.0.0.0:0", .tcp(host: "0.0.0.0", port: 0)),
    ])
    func parses(_ text: String, _ address: SpeakEndpoint) throws {
        #expect(try SpeakEndpoint(hostPort: text, for: .listener) == address)
    }

    @Test(arguments: ["7770", "::1:80", "host:port", "[::1]80", "h:70000"])
    func rejects(_ text: String) {
        #expect(throws: SpeakEndpointError.self) { try SpeakEndpoint(hostPort: text, for: .listener) }
    }
}

@Suite("Example config file")
struct ExampleConfigTests {
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("systemd/speakd.conf")

    /// Every key is in the example, and its values, uncommented, are the built-in defaults.
    @Test func uncommentedExampleGivesTheDefaults() throws {
        let (keys, fromExample) = try Self.uncommented(try String(contentsOf: Self.example, encoding: .utf8))
        #expect(Set(keys) == Set(ConfigurationLoader.keys))
        #expect(fromExample.voicesDirectory == "/usr/local/share/speakd/Voices")
        #expect(fromExample.chimesDirectory == "/usr/local/share/speakd/Voices/chimes")
        var defaults = DaemonConfiguration.defaults(environment: Self.environment)
        defaults.voicesDirectory = fromExample.voicesDirectory
        defaults.chimesDirectory = fromExample.chimesDirectory
        #expect(fromExample == defaults)
    }

    /// The system unit's environment, which the examples' socket, token file and state directory
    /// assume.
    static let environment = ["RUNTIME_DIRECTORY": "/run/speakd", "STATE_DIRECTORY": "/var/lib/speakd"]

    /// The `#key = value` lines of an example config file, uncommented: their keys, in order, and
    /// the configuration they give under `environment`.
    static func uncommented(_ text: String) throws -> (keys: [String], configuration: DaemonConfiguration) {
        let settings = text.split(separator: "\n").filter {
            $0.hasPrefix("#") && $0.contains(" = ") && !$0.hasPrefix("# ")
        }
        .map { String($0.dropFirst()) }
        let path = try configFile(settings.joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return (
            settings.map { $0.split(separator: "=")[0].trimmingCharacters(in: .whitespaces) },
            try ConfigurationLoader.load(flags: [:], configPath: path, environment: environment)
        )
    }
}

/// The documents made from the settings table: the config file the Debian package installs as
/// `/etc/speakd/speakd.conf`, and speakd(8).
@Suite("Generated documents")
struct GeneratedDocumentTests {
    /// Every key is in the packaged config file, once, commented out; uncommented, its values are
    /// the built-in defaults, with the voices and chimes where the package installs them.
    @Test func packagedConfigFileShowsEveryDefault() throws {
        let text = SpeakdCommand.configFile()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(!lines.contains { !$0.isEmpty && !$0.hasPrefix("#") }, "every line is a comment")
        let (keys, fromFile) = try ExampleConfigTests.uncommented(text)
        #expect(keys == ConfigurationLoader.keys)
        #expect(fromFile.voicesDirectory == "/usr/share/speakd/voices")
        #expect(fromFile.chimesDirectory == "/usr/share/speakd/voices/chimes")
        var defaults = DaemonConfiguration.defaults(environment: ExampleConfigTests.environment)
        defaults.voicesDirectory = fromFile.voicesDirectory
        defaults.chimesDirectory = fromFile.chimesDirectory
        #expect(fromFile == defaults)
        #expect(text.split(separator: "\n").allSatisfy { $0.count <= 80 })
    }

    /// speakd(8) names every setting with its value, default and environment variable, and its
    /// title carries the version.
    @Test func manualPageListsEverySetting() {
        let page = SpeakdCommand.manualPage()
        #expect(page.contains(".TH SPEAKD 8 "))
        #expect(page.contains("\"speakd \(SpeakdVersionTests.version)\""))
        for setting in DaemonConfiguration.settings {
            let flag = setting.flag.replacing("-", with: "\\-")
            #expect(page.contains("\\fB\(flag)\\fR"), "\(setting.flag)")
            #expect(page.contains(setting.environmentName.replacing("-", with: "\\-")), "\(setting.environmentName)")
        }
    }

    /// Only the exact flags print a document; anything else is the daemon's command line.
    @Test func documentFlagsStandAlone() {
        #expect(SpeakdCommand.document(for: ["--print-config-file"]) == SpeakdCommand.configFile())
        #expect(SpeakdCommand.document(for: ["--print-manual-page"]) == SpeakdCommand.manualPage())
        #expect(SpeakdCommand.document(for: ["--print-config-file", "--max-queue", "3"]) == nil)
        #expect(SpeakdCommand.document(for: ["--max-queue", "3"]) == nil)
        #expect(SpeakdCommand.document(for: []) == nil)
    }

    /// The man page's date is SOURCE_DATE_EPOCH's, so a package rebuild makes the same page.
    @Test func manualDateFollowsSourceDateEpoch() {
        #expect(SpeakdCommand.manualDate(environment: ["SOURCE_DATE_EPOCH": "1795996800"]) == "2026-11-30")
    }
}

/// The version comes from the top entry of debian/changelog; a debug build says `-dev` after it.
@Suite("Version")
struct SpeakdVersionTests {
    static let changelog = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("debian/changelog")

    /// `0.1.0-dev` for the changelog's `speakd (0.1.0) unstable; …`: the tests run a debug build.
    static var version: String {
        let text = (try? String(contentsOf: changelog, encoding: .utf8)) ?? ""
        let first = text.prefix { $0 != "\n" }
        let inside = first.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
        return inside + "-dev"
    }

    @Test func versionIsTheChangelogs() throws {
        #expect(Self.version.count > "-dev".count)
        #expect(SpeakdVersion.current == Self.version)
    }

    /// `speakd --version` prints it, and exits 0, before any setting is read.
    @Test func versionFlag() throws {
        do {
            _ = try SpeakdCommand.parseAsRoot(["--version"])
            Issue.record("--version parsed as a command")
        } catch {
            #expect(SpeakdCommand.exitCode(for: error) == .success)
            #expect(SpeakdCommand.fullMessage(for: error) == Self.version)
        }
    }
}

/// The settings are declared once, in `DaemonConfiguration.settings`; these walk all of them, so a
/// setting cannot reach one source and miss another, or be missing from `--help`.
@Suite("Configuration settings")
struct ConfigurationSettingsTests {
    static let environment = ["RUNTIME_DIRECTORY": "/run/speakd"]

    /// For each setting: a valid value other than the default, and one that is refused.
    static let samples: [String: (good: String, bad: String)] = [
        "socket": ("/tmp/kiosk/speakd.sock", "speakd.sock"),
        "http": ("[::1]:8080", "localhost"),
        "ssip": ("/run/user/1000/speech-dispatcher/speechd.sock", "speechd.sock"),
        "wyoming": ("tcp://0.0.0.0:10200", "http://localhost:10200"),
        "wyoming-satellite": ("hall", "Hall"),
        "audio": ("alsa:hw:0", "speakers"),
        "output": ("headset=pulse:usb-headset", "headset=speakers"),
        "zone-group": ("concourse=platform1,platform2", "concourse=platform1,,hall"),
        "voices": ("/usr/local/share/speakd/Voices", "Voices"),
        "max-queue": ("7", "0"),
        "engine-workers": ("\(DaemonConfiguration.coreCount + 1)", "65"),
        "engine-worker": ("/usr/local/bin/speakd-engine-worker", "worker"),
        "engine-worker-user": ("daemon", "no one"),
        "piper": ("/opt/speakd/piper-venv", "piper-venv"),
        "piper-voices": ("/usr/share/piper-voices", "piper-voices"),
        "piper-workers": ("2", "17"),
        "piper-stall-limit": ("20", "0"),
        "piper-start-limit": ("60", "601"),
        "piper-memory-limit": ("4096", "100"),
        "piper-threads": ("1", "-1"),
        "default-voice": ("en_US-joe-medium", "joe medium"),
        "cors-origin": ("http://kiosk.local:8080", "kiosk"),
        "token-file": ("/etc/speakd/token", "token"),
        "read-token-file": ("/etc/speakd/read-token", "read-token"),
        "tcp-open": ("true", "maybe"),
        "allowed-host": ("kiosk.local,panel.local", "kiosk.local:8080"),
        "default-language": ("de", "en_GB"),
        "fallback-language": ("en-GB", "en_GB"),
        "max-body-bytes": ("4096", "255"),
        "max-text-length": ("200", "0"),
        "max-spans": ("5", "100001"),
        "heartbeat": ("0.5", "0"),
        "session-max-age": ("60", "0"),
        "lead-in": ("0.25", "1.5"),
        "gap": ("0.5", "6"),
        "pause-timeout": ("30", "0"),
        "audio-latency": ("0.03", "0.001"),
        "event-history": ("16", "0"),
        "max-connections": ("100", "0"),
        "idle-timeout": ("5", "0"),
        "idle-release": ("30", "never"),
        "header-timeout": ("2.5", "never"),
        "body-timeout": ("7", "-3"),
        "send-timeout": ("0.5", "inf"),
        "log-level": ("debug", "loud"),
        "chimes": ("/usr/local/share/speakd/chimes", "chimes"),
        "clips": ("/srv/kiosk/clips", "clips"),
        "clips-upload": ("true", "maybe"),
        "chime-high": ("two-tone", "two tone"),
        "chime-default": ("ding", "ding!"),
        "chime-low": ("soft_bell", "bell/soft"),
        "chime-after-high": ("two-tone", "two tone"),
        "chime-after-default": ("ding", "ding!"),
        "chime-after-low": ("soft_bell", "bell/soft"),
        "loudness": ("-23", "-3"),
        "media-role": ("music", "a role"),
        "duck": ("music,movie,game", "music movie"),
        "duck-level": ("0.3", "1.5"),
        "mqtt": ("mqtts://broker.local:8883", "broker.local:1883"),
        "mqtt-id": ("hall-2", "hall/2"),
        "mqtt-site": ("museum", "museum/hall"),
        "mqtt-groups": ("entrance,first-floor", "a/b"),
        "mqtt-username": ("kiosk", "kiosk user"),
        "mqtt-password-file": ("/etc/speakd/mqtt-password", "mqtt-password"),
        "mqtt-ca-file": ("/etc/speakd/broker-ca.pem", "broker-ca.pem"),
        "state-dir": ("/srv/kiosk/state", "state"),
        "audit-text": ("off", "sometimes"),
        "audit-max-days": ("30", "0"),
        "audit-max-entries": ("5000", "10"),
        "audit-max-mib": ("8", "0"),
        "max-schedules": ("50", "0"),
        "max-schedule-mib": ("2", "1025"),
        "render-cache-mib": ("0", "-1"),
        "render-cache-disk-mib": ("8", "a lot"),
    ]

    @Test func everySettingHasSamples() {
        #expect(Set(Self.samples.keys) == Set(ConfigurationLoader.keys))
        #expect(ConfigurationLoader.keys.count == DaemonConfiguration.settings.count)
        #expect(Set(ConfigurationLoader.keys).count == ConfigurationLoader.keys.count, "keys are unique")
    }

    /// The flag (through `SpeakdCommand`, as `--KEY VALUE` and `--KEY=VALUE`), the environment
    /// variable and the file key of every setting give the same configuration, which differs from the
    /// defaults; a bad value is refused by each, naming the flag, variable or file line.
    @Test(arguments: DaemonConfiguration.settings.map(\.key))
    func flagEnvironmentAndFileReachTheSameValue(key: String) throws {
        let setting = try #require(DaemonConfiguration.settings.first { $0.key == key })
        let sample = try #require(Self.samples[key], "no sample for \(key)")
        #expect(setting.flag == "--\(key)")
        #expect(setting.environmentName == ConfigurationLoader.environmentName(key))

        let flagArguments = setting.kind == .toggle ? [setting.flag] : [setting.flag, sample.good]
        let fromFlag = try SpeakdCommand.parse(flagArguments).configuration(environment: Self.environment)
        let fromInlineFlag = try SpeakdCommand.parse(["\(setting.flag)=\(sample.good)"])
            .configuration(environment: Self.environment)
        let fromEnvironment = try ConfigurationLoader.load(
            arguments: [], environment: Self.environment.merging([setting.environmentName: sample.good]) { $1 })
        let path = try configFile("# \(key)\n\(key) = \(sample.good)\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fromFile = try ConfigurationLoader.load(
            arguments: ["--config", path], environment: Self.environment)

        #expect(fromFlag != DaemonConfiguration.defaults(environment: Self.environment))
        #expect(fromInlineFlag == fromFlag)
        #expect(fromEnvironment == fromFlag)
        #expect(fromFile == fromFlag)

        let bad = try configFile("audio = null\n\(key) = \(sample.bad)\n")
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let sources: [(origin: String, load: () throws -> DaemonConfiguration)] = [
            (
                setting.flag,
                {
                    try SpeakdCommand.parse(
                        setting.kind == .toggle ? ["\(setting.flag)=\(sample.bad)"] : [setting.flag, sample.bad]
                    ).configuration(environment: Self.environment)
                }
            ),
            (
                setting.environmentName,
                {
                    try ConfigurationLoader.load(
                        arguments: [],
                        environment: Self.environment.merging([setting.environmentName: sample.bad]) { $1 })
                }
            ),
            (
                "\(bad):2",
                { try ConfigurationLoader.load(arguments: ["--config", bad], environment: Self.environment) }
            ),
        ]
        for source in sources {
            #expect {
                _ = try source.load()
            } throws: { error in
                // ArgumentParser reports the loader's error as it is, with the usage.
                let message = SpeakdCommand.message(for: error)
                return message.hasPrefix("\(source.origin): '")
                    && message.contains("\(sample.bad.split(separator: ",").last!)' is not valid: ")
            }
        }
    }

    /// `speakd --help` shows each setting's flag, value, help and default, and the shown default,
    /// given as a value, is the default (or is a description of it).
    @Test func helpListsEverySettingWithItsDefault() throws {
        let help = SpeakdCommand.helpMessage(columns: 80)
        let flat = help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for setting in DaemonConfiguration.settings {
            let label = setting.kind == .toggle ? setting.flag : "\(setting.flag) <\(setting.valueName)>"
            let entry = "\(label) \(setting.help) (default: \(setting.defaultDescription))"
            #expect(flat.contains(entry), "\(entry)")
        }
        #expect(flat.contains("--config <file> Config file"))
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 80 }, "\(help)")

        let defaults = DaemonConfiguration.defaults(environment: Self.environment)
        var described: [String] = []
        for setting in DaemonConfiguration.settings {
            if let shown = try? ConfigurationLoader.load(
                flags: [setting.key: setting.defaultDescription], configPath: nil, environment: Self.environment)
            {
                #expect(shown == defaults, "\(setting.key): \(setting.defaultDescription)")
            } else {
                described.append(setting.key)
            }
        }
        #expect(
            described == [
                "socket", "voices", "engine-workers", "engine-worker", "piper-voices", "chimes", "token-file",
                "fallback-language", "state-dir",
            ])
    }

    /// The command line is read like the other sources: a value that looks like an option is still
    /// a value to check, and every mistake names the flag.
    @Test(arguments: [
        (["--max-queue", "-1"], "--max-queue: '-1' is not valid: expected a whole number 1–100000"),
        (["--max-queue"], "--max-queue: missing value, expected <n>"),
        (["--socket", "--http", "none"], "--socket: missing value, expected <path>"),
        (["--max-qeue", "3"], "--max-qeue: unknown setting 'max-qeue' (known: "),
        (["null"], "unexpected argument 'null'"),
        (["--audio", "null", "extra"], "unexpected argument 'extra'"),
        (["--tcp-open=maybe"], "--tcp-open: 'maybe' is not valid: expected true or false"),
        (["--config"], "--config: missing value, expected <file>"),
    ])
    func badCommandLinesNameTheFlag(arguments: [String], message: String) throws {
        #expect {
            _ = try ConfigurationLoader.load(arguments: arguments, environment: Self.environment)
        } throws: { error in
            "\(error)".hasPrefix(message)
        }
        // Parsing checks the configuration too, so the error is printed with the usage.
        #expect {
            _ = try SpeakdCommand.parse(arguments)
        } throws: { error in
            SpeakdCommand.message(for: error).hasPrefix(message)
        }
    }

    @Test func commandLineForms() throws {
        let configuration = try SpeakdCommand.parse([
            "--max-queue=5", "--tcp-open=false", "--allowed-host", "a.local", "--allowed-host=b.local", "--audio",
            "wav:/tmp/a=b.wav",
        ]).configuration(environment: Self.environment)
        #expect(configuration.maxQueue == 5)
        #expect(!configuration.tcpOpen)
        #expect(configuration.allowedHosts == ["a.local", "b.local"])
        #expect(configuration.audio == "wav:/tmp/a=b.wav")
        // A later flag wins over an earlier one, as with the other sources.
        let last = try SpeakdCommand.parse(["--max-queue", "5", "--max-queue", "6"])
            .configuration(environment: Self.environment)
        #expect(last.maxQueue == 6)
    }

    /// Under systemd with `ConfigurationDirectory=speakd` (the user unit), speakd.conf there is the
    /// default file; it is optional, and SPEAKD_* (a drop-in's Environment=) wins over it.
    @Test func configurationDirectoryHoldsTheDefaultFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "speakd-conf-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = Self.environment.merging(["CONFIGURATION_DIRECTORY": directory.path]) { $1 }
        #expect(
            ConfigurationLoader.defaultConfigPaths(environment: environment) == [
                directory.path + "/speakd.conf", ConfigurationLoader.defaultConfigPath,
            ])
        #expect(ConfigurationLoader.defaultConfigPaths(environment: [:]) == [ConfigurationLoader.defaultConfigPath])

        let missing = try ConfigurationLoader.load(arguments: [], environment: environment)
        #expect(missing.maxQueue == 32)
        try "max-queue = 9\naudio = pulse\nmax-spans = lots\n".write(
            to: directory.appendingPathComponent("speakd.conf"), atomically: true, encoding: .utf8)
        #expect {
            _ = try ConfigurationLoader.load(arguments: [], environment: environment)
        } throws: { error in
            "\(error)".hasPrefix("\(directory.path)/speakd.conf:3: 'lots' is not valid")
        }
        try "max-queue = 9\naudio = pulse\n".write(
            to: directory.appendingPathComponent("speakd.conf"), atomically: true, encoding: .utf8)
        let read = try ConfigurationLoader.load(
            arguments: [], environment: environment.merging(["SPEAKD_AUDIO": "null"]) { $1 })
        #expect(read.maxQueue == 9)
        #expect(read.audio == "null")
    }
}
