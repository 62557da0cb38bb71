import AudioOutput
import Foundation
import Logging
import SpeakServer
import SpeechModel

/// Merges the configuration sources: flags > environment (`SPEAKD_*`) > config file > defaults.
///
/// Every setting has one key, spelled the same in all three: flag `--max-queue`, environment
/// `SPEAKD_MAX_QUEUE`, file line `max-queue = 32`. The file format is one `key = value` per line;
/// `#` starts a comment; blank lines are ignored; a value may be quoted with `"`.
public enum ConfigurationLoader {
    /// Every key, in the order `--help` and the docs list them.
    public static let keys: [String] = [
        "socket", "http", "audio", "voices", "max-queue", "cors-origin", "token-file", "tcp-open", "allowed-host",
        "default-language",
        "fallback-language", "max-body-bytes", "max-text-length", "max-spans", "heartbeat",
        "event-history", "lead-in", "log-level", "max-connections", "idle-timeout", "header-timeout",
        "body-timeout", "send-timeout", "engine-workers", "engine-worker",
    ]

    /// Keys whose values are lists: comma-separated, and in a file given on several lines.
    static let listKeys: Set<String> = ["allowed-host"]

    /// Where the config file is read from when neither `--config` nor `SPEAKD_CONFIG` names one
    /// (and only if it exists).
    public static let defaultConfigPath = "/etc/speakd/speakd.conf"

    /// The environment variable of `key` (`max-queue` → `SPEAKD_MAX_QUEUE`).
    public static func environmentName(_ key: String) -> String {
        "SPEAKD_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// A value and where it came from, so an error can point at it.
    struct Sourced {
        var value: String
        var origin: String
    }

    /// Merges the sources.
    /// - Parameters:
    ///   - flags: values given on the command line, by key (`max-queue`), without the dashes.
    ///   - configPath: `--config FILE`; it must exist. Nil falls back to `SPEAKD_CONFIG`, then the default path if present.
    ///   - environment: the process environment.
    public static func load(
        flags: [String: String], configPath: String?, environment: [String: String]
    ) throws(ConfigurationError) -> DaemonConfiguration {
        var values: [String: Sourced] = [:]
        let explicitPath = configPath ?? environment["SPEAKD_CONFIG"]
        if let path = explicitPath
            ?? (FileManager.default.fileExists(atPath: defaultConfigPath) ? defaultConfigPath : nil)
        {
            let contents: String
            do {
                contents = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw .unreadableFile(path, reason: "\(error.localizedDescription)")
            }
            for (key, value) in try parseFile(contents, path: path) { values[key] = value }
        }
        for key in keys {
            let name = environmentName(key)
            if let value = environment[name] { values[key] = Sourced(value: value, origin: name) }
        }
        for (key, value) in flags {
            guard keys.contains(key) else { throw .unknownKey(key, origin: "--\(key)") }
            values[key] = Sourced(value: value, origin: "--\(key)")
        }
        return try resolve(values, environment: environment)
    }

    /// Reads `key = value` lines; unknown keys are errors so typos are not silently ignored.
    static func parseFile(_ contents: String, path: String) throws(ConfigurationError) -> [String: Sourced] {
        var values: [String: Sourced] = [:]
        for (index, rawLine) in contents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let origin = "\(path):\(index + 1)"
            var line = Substring(rawLine)
            if let hash = line.firstIndex(of: "#"), !line[..<hash].contains("\"") { line = line[..<hash] }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw .malformedLine(origin: origin, line: trimmed)
            }
            let key = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            var value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            guard keys.contains(key) else { throw .unknownKey(key, origin: origin) }
            if listKeys.contains(key), let earlier = values[key] {
                values[key] = Sourced(value: earlier.value + "," + value, origin: origin)
            } else {
                values[key] = Sourced(value: value, origin: origin)
            }
        }
        return values
    }

    private static func resolve(_ values: [String: Sourced], environment: [String: String]) throws(ConfigurationError)
        -> DaemonConfiguration
    {
        var configuration = DaemonConfiguration.defaults(environment: environment)
        if let socket = values["socket"] {
            configuration.socketPath = try disabled(socket) ? nil : path(socket)
        }
        if let http = values["http"] {
            if disabled(http) {
                configuration.http = nil
            } else {
                do {
                    configuration.http = try ListenAddress(hostPort: http.value)
                } catch {
                    throw .invalid(origin: http.origin, value: http.value, reason: error.reason)
                }
            }
        }
        if let audio = values["audio"] { configuration.audio = try audioSpec(audio) }
        if let voices = values["voices"] { configuration.voicesDirectory = try path(voices) }
        if let value = values["max-queue"] { configuration.maxQueue = try integer(value, in: 1...100_000) }
        if let value = values["engine-workers"] {
            configuration.engineWorkers =
                value.value == "auto" ? DaemonConfiguration.coreCount : try integer(value, in: 1...64)
        }
        if let value = values["engine-worker"] {
            configuration.engineWorker = value.value == "auto" ? nil : try path(value)
        }
        if let origin = values["cors-origin"] {
            configuration.corsOrigin = disabled(origin) ? nil : try corsOrigin(origin)
        }
        if let file = values["token-file"] {
            configuration.tokenFile = try path(file)
        } else if let socket = configuration.socketPath {
            configuration.tokenFile = DaemonConfiguration.defaultTokenFile(socketPath: socket)
        }
        if let open = values["tcp-open"] { configuration.tcpOpen = try boolean(open) }
        if let hosts = values["allowed-host"] {
            configuration.allowedHosts = disabled(hosts) ? [] : try hostNames(hosts)
        }
        if configuration.tcpOpen, case .tcp(let host, _) = configuration.http, !isLoopback(host) {
            throw .invalid(
                origin: values["tcp-open"]?.origin ?? "--tcp-open", value: "true",
                reason: "TCP listens on \(configuration.http!), which is not a loopback address: without a token "
                    + "anyone who reaches it could post and cancel. Drop tcp-open (TCP then needs the token) "
                    + "or listen on 127.0.0.1")
        }
        if let language = values["default-language"] { configuration.defaultLanguage = try languageTag(language) }
        if let language = values["fallback-language"] {
            configuration.fallbackLanguage = disabled(language) ? nil : try languageTag(language)
        }
        if let value = values["max-body-bytes"] {
            configuration.maxBodyBytes = try integer(value, in: 256...(64 << 20))
        }
        if let value = values["max-text-length"] { configuration.maxTextLength = try integer(value, in: 1...1_000_000) }
        if let value = values["max-spans"] { configuration.maxSpans = try integer(value, in: 1...100_000) }
        if let value = values["heartbeat"] {
            guard let seconds = Double(value.value), seconds.isFinite, (0.01...3_600).contains(seconds) else {
                throw .invalid(
                    origin: value.origin, value: value.value, reason: "expected seconds between 0.01 and 3600")
            }
            configuration.heartbeatSeconds = seconds
        }
        if let value = values["lead-in"] {
            guard let seconds = Double(value.value), seconds.isFinite, (0...1).contains(seconds) else {
                throw .invalid(origin: value.origin, value: value.value, reason: "expected seconds between 0 and 1")
            }
            configuration.leadInSeconds = seconds
        }
        if let value = values["event-history"] { configuration.eventHistory = try integer(value, in: 1...1_000_000) }
        if let value = values["log-level"] {
            guard let level = Logger.Level(rawValue: value.value.lowercased()) else {
                throw .invalid(
                    origin: value.origin, value: value.value,
                    reason: "expected one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            configuration.logLevel = level
        }
        if let value = values["max-connections"] {
            configuration.connectionLimits.maxConnections = try integer(value, in: 1...1_000_000)
        }
        if let value = values["idle-timeout"] { configuration.connectionLimits.idleTimeout = try duration(value) }
        if let value = values["header-timeout"] { configuration.connectionLimits.headerTimeout = try duration(value) }
        if let value = values["body-timeout"] { configuration.connectionLimits.bodyTimeout = try duration(value) }
        if let value = values["send-timeout"] { configuration.connectionLimits.sendTimeout = try duration(value) }
        if configuration.socketPath == nil, configuration.http == nil {
            throw .invalid(origin: "socket/http", value: "none", reason: "at least one listener is needed")
        }
        return configuration
    }

    private static func disabled(_ value: Sourced) -> Bool {
        ["none", "off", ""].contains(value.value.lowercased())
    }

    private static func path(_ value: Sourced) throws(ConfigurationError) -> String {
        guard value.value.hasPrefix("/") || value.value.hasPrefix(".") else {
            throw .invalid(origin: value.origin, value: value.value, reason: "expected a path")
        }
        return value.value
    }

    private static func boolean(_ value: Sourced) throws(ConfigurationError) -> Bool {
        switch value.value.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0", "": return false
        default: throw .invalid(origin: value.origin, value: value.value, reason: "expected true or false")
        }
    }

    /// Comma-separated host names or IP addresses, without ports; lower case, brackets dropped.
    private static func hostNames(_ value: Sourced) throws(ConfigurationError) -> [String] {
        var names: [String] = []
        for item in value.value.split(separator: ",") {
            let given = item.trimmingCharacters(in: .whitespaces)
            var name = given.lowercased()
            if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
            if name.hasSuffix(".") { name = String(name.dropLast()) }
            let isIPv6 = name.filter { $0 == ":" }.count >= 2 && name.allSatisfy { $0.isHexDigit || ":.".contains($0) }
            let isName =
                !name.isEmpty && name.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || "-.".contains($0) }
            guard isIPv6 || isName else {
                throw .invalid(
                    origin: value.origin, value: given,
                    reason: "expected host names such as kiosk.local or 192.168.1.20, without a port")
            }
            names.append(name)
        }
        return names
    }

    /// `localhost`, `::1` or an address in 127.0.0.0/8: reachable from this machine only.
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { bytes in bytes.dropLast().allSatisfy { $0 == 0 } && bytes.last == 1 }
        }
        return false
    }

    private static func integer(_ value: Sourced, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let number = Int(value.value), range.contains(number) else {
            throw .invalid(
                origin: value.origin, value: value.value,
                reason: "expected a whole number \(range.lowerBound)–\(range.upperBound)")
        }
        return number
    }

    /// A timeout in seconds, 0.1 s to a day.
    private static func duration(_ value: Sourced) throws(ConfigurationError) -> Duration {
        guard let seconds = Double(value.value), seconds.isFinite, (0.1...86_400).contains(seconds) else {
            throw .invalid(origin: value.origin, value: value.value, reason: "expected seconds between 0.1 and 86400")
        }
        return .milliseconds(Int((seconds * 1000).rounded()))
    }

    private static func audioSpec(_ value: Sourced) throws(ConfigurationError) -> String {
        do {
            _ = try AudioSinkSpec(parsing: value.value)
        } catch {
            throw .invalid(origin: value.origin, value: value.value, reason: error.message)
        }
        return value.value
    }

    private static func corsOrigin(_ value: Sourced) throws(ConfigurationError) -> String {
        guard let url = URL(string: value.value), let scheme = url.scheme, ["http", "https"].contains(scheme),
            url.host != nil, url.path.isEmpty || url.path == "/"
        else {
            throw .invalid(
                origin: value.origin, value: value.value, reason: "expected an origin such as http://kiosk.local:8080")
        }
        return value.value.hasSuffix("/") ? String(value.value.dropLast()) : value.value
    }

    private static func languageTag(_ value: Sourced) throws(ConfigurationError) -> String {
        do {
            return try LanguageTag(value.value).canonical
        } catch {
            throw .invalid(origin: value.origin, value: value.value, reason: "\(error)")
        }
    }
}

/// A configuration value that cannot be used; the message names where it came from.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case unknownKey
        case malformedLine
        case invalid
        case unreadableFile
    }

    private let code: Code
    public let description: String

    private init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    static func unknownKey(_ key: String, origin: String) -> ConfigurationError {
        ConfigurationError(
            .unknownKey,
            "\(origin): unknown setting '\(key)' (known: \(ConfigurationLoader.keys.joined(separator: ", ")))")
    }

    static func malformedLine(origin: String, line: String) -> ConfigurationError {
        ConfigurationError(.malformedLine, "\(origin): expected 'key = value', found '\(line)'")
    }

    static func invalid(origin: String, value: String, reason: String) -> ConfigurationError {
        ConfigurationError(.invalid, "\(origin): '\(value)' is not valid: \(reason)")
    }

    static func unreadableFile(_ path: String, reason: String) -> ConfigurationError {
        ConfigurationError(.unreadableFile, "cannot read config file \(path): \(reason)")
    }
}
