import FoundationEssentials
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// Merges the configuration sources: flags > environment (`SPEAKD_*`) > config file > defaults.
///
/// Every setting of `DaemonConfiguration.settings` has one key, spelled the same in all three:
/// flag `--max-queue`, environment `SPEAKD_MAX_QUEUE`, file line `max-queue = 32`. The file format
/// is one `key = value` per line; `#` starts a comment; blank lines are ignored; a value may be
/// quoted with `"`. The file is `--config`, else `SPEAKD_CONFIG`, else the first of
/// `defaultConfigPaths(environment:)` that exists.
///
/// The layering is written here rather than with swift-configuration's `ConfigReader`: its values
/// carry no origin, so an error could not name the flag, the variable or the file line; its getters
/// fall back to the default when a value does not convert; no provider reports keys it was not
/// asked for, so typos would pass; and it has no `key = value` file format.
public enum ConfigurationLoader {
    /// Every key, in the order `--help` lists them.
    public static var keys: [String] { DaemonConfiguration.settings.map(\.key) }

    /// Where the config file is read from when neither `--config` nor `SPEAKD_CONFIG` names one
    /// (and only if it exists), after `$CONFIGURATION_DIRECTORY/speakd.conf`.
    public static let defaultConfigPath = "/etc/speakd/speakd.conf"

    /// The config files tried, in order, when neither `--config` nor `SPEAKD_CONFIG` names one; the
    /// first that exists is read. `speakd.conf` in `$CONFIGURATION_DIRECTORY` comes first: systemd
    /// sets it for `ConfigurationDirectory=speakd`, to `~/.config/speakd` in the user unit.
    /// `defaultConfigPath` follows, so a user unit without its own file reads the system one, as before.
    public static func defaultConfigPaths(environment: [String: String]) -> [String] {
        guard let directory = environment["CONFIGURATION_DIRECTORY"]?.split(separator: ":").first,
            !directory.isEmpty
        else { return [defaultConfigPath] }
        return ["\(directory)/speakd.conf", defaultConfigPath]
    }

    /// The flag naming the config file; not a setting, since a file cannot name another.
    public static let configFlag = "--config"

    /// The environment variable naming the config file.
    public static let configVariable = "SPEAKD_CONFIG"

    /// The environment variable of `key` (`max-queue` → `SPEAKD_MAX_QUEUE`).
    public static func environmentName(_ key: String) -> String {
        "SPEAKD_" + key.uppercased().replacing("-", with: "_")
    }

    private static let settingsByKey = Dictionary(
        uniqueKeysWithValues: DaemonConfiguration.settings.map { ($0.key, $0) })

    /// Merges the sources.
    /// - Parameters:
    ///   - arguments: the command line after the program name: `--KEY VALUE` or `--KEY=VALUE` for
    ///     each setting, a bare `--KEY` for a toggle, and `--config FILE`.
    ///   - environment: the process environment.
    public static func load(arguments: [String], environment: [String: String]) throws(ConfigurationError)
        -> DaemonConfiguration
    {
        let (flags, configPath) = try parseArguments(arguments)
        return try load(flags: flags, configPath: configPath, environment: environment)
    }

    /// Merges the sources.
    /// - Parameters:
    ///   - flags: values given on the command line, by key (`max-queue`), without the dashes.
    ///   - configPath: `--config FILE`; it must exist. Nil falls back to `SPEAKD_CONFIG`, then the default paths if present.
    ///   - environment: the process environment.
    public static func load(
        flags: [String: String], configPath: String?, environment: [String: String]
    ) throws(ConfigurationError) -> DaemonConfiguration {
        var given: [String: SettingValue] = [:]
        for (key, value) in flags { given[key] = SettingValue(value: value, origin: "--\(key)") }
        return try load(flags: given, configPath: configPath, environment: environment)
    }

    private static func load(
        flags: [String: SettingValue], configPath: String?, environment: [String: String]
    ) throws(ConfigurationError) -> DaemonConfiguration {
        var values: [String: SettingValue] = [:]
        if let path = configPath ?? environment[configVariable]
            ?? defaultConfigPaths(environment: environment).first(where: { FileManager.default.fileExists(atPath: $0) })
        {
            let contents: String
            do {
                contents = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw .unreadableFile(path, reason: fileErrorReason(error))
            }
            for (key, value) in try parseFile(contents, path: path) { values[key] = value }
        }
        for setting in DaemonConfiguration.settings {
            if let value = environment[setting.environmentName] {
                values[setting.key] = SettingValue(value: value, origin: setting.environmentName)
            }
        }
        for (key, value) in flags {
            guard settingsByKey[key] != nil else { throw .unknownKey(key, origin: value.origin) }
            values[key] = value
        }
        return try resolve(values, environment: environment)
    }

    /// Reads the command line: each setting's flag with its value, and `--config`.
    static func parseArguments(_ arguments: [String]) throws(ConfigurationError) -> (
        flags: [String: SettingValue], configPath: String?
    ) {
        var flags: [String: SettingValue] = [:]
        var configPath: String?
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            guard argument.hasPrefix("--"), argument.count > 2 else { throw .unexpectedArgument(argument) }
            let name = argument.prefix { $0 != "=" }
            let flag = String(name)
            var inline = argument.count > name.count ? String(argument.dropFirst(name.count + 1)) : nil
            let setting = settingsByKey[String(name.dropFirst(2))]
            guard setting != nil || flag == configFlag else {
                throw .unknownKey(String(name.dropFirst(2)), origin: flag)
            }
            if inline == nil, setting?.kind == .toggle { inline = "true" }
            // A value never starts with "--": the next flag means this one's value is missing, while
            // "-1" is a value to check (and report), not an option.
            guard let value = inline ?? remaining.first.flatMap({ $0.hasPrefix("--") ? nil : $0 }) else {
                throw .missingValue(origin: flag, valueName: setting?.valueName ?? "file")
            }
            if inline == nil { remaining = remaining.dropFirst() }
            guard let setting else {
                configPath = value
                continue
            }
            add(SettingValue(value: value, origin: flag), for: setting, to: &flags)
        }
        return (flags, configPath)
    }

    /// Within one source, a list's values add up (a repeated flag, several file lines); any other
    /// setting keeps the last value.
    private static func add(_ value: SettingValue, for setting: DaemonSetting, to values: inout [String: SettingValue])
    {
        if setting.kind == .list, let earlier = values[setting.key] {
            values[setting.key] = SettingValue(value: earlier.value + "," + value.value, origin: value.origin)
        } else if setting.kind == .keyed, let earlier = values[setting.key] {
            values[setting.key] = SettingValue(
                value: earlier.value + String(DaemonSetting.entrySeparator) + value.value, origin: value.origin)
        } else {
            values[setting.key] = value
        }
    }

    /// Reads `key = value` lines; unknown keys are errors so typos are not silently ignored.
    static func parseFile(_ contents: String, path: String) throws(ConfigurationError) -> [String: SettingValue] {
        var values: [String: SettingValue] = [:]
        for (index, rawLine) in contents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let origin = "\(path):\(index + 1)"
            var line = Substring(rawLine)
            if let hash = line.firstIndex(of: "#"), !line[..<hash].contains("\"") { line = line[..<hash] }
            let trimmed = line.trimmingWhitespace()
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw .malformedLine(origin: origin, line: trimmed)
            }
            let key = trimmed[..<equals].trimmingWhitespace()
            var value = trimmed[trimmed.index(after: equals)...].trimmingWhitespace()
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            // `output.headset = pulse:x` is the entry `headset=pulse:x` of the keyed setting `output`.
            if let dot = key.firstIndex(of: "."), let setting = settingsByKey[String(key[..<dot])],
                setting.kind == .keyed
            {
                let name = key[key.index(after: dot)...]
                add(SettingValue(value: "\(name)=\(value)", origin: origin), for: setting, to: &values)
                continue
            }
            guard let setting = settingsByKey[key] else { throw .unknownKey(key, origin: origin) }
            add(SettingValue(value: value, origin: origin), for: setting, to: &values)
        }
        return values
    }

    /// Each given value over its setting's default, then the rules that join settings.
    private static func resolve(_ values: [String: SettingValue], environment: [String: String])
        throws(ConfigurationError) -> DaemonConfiguration
    {
        var configuration = DaemonConfiguration.defaults(environment: environment)
        for setting in DaemonConfiguration.settings {
            if let value = values[setting.key] { try setting.apply(value, to: &configuration) }
        }
        // The token file's default follows the socket.
        if values["token-file"] == nil, let socket = configuration.socketPath {
            configuration.tokenFile = DaemonConfiguration.defaultTokenFile(socketPath: socket)
        }
        if configuration.tcpOpen, case .tcp(let host, _) = configuration.http, !isLoopback(host) {
            throw .invalid(
                origin: values["tcp-open"]?.origin ?? "--tcp-open", value: "true",
                reason: "TCP listens on \(configuration.http!), which is not a loopback address: without a token "
                    + "anyone who reaches it could post and cancel. Drop tcp-open (TCP then needs the token) "
                    + "or listen on 127.0.0.1")
        }
        if configuration.socketPath == nil, configuration.http == nil {
            throw .invalid(origin: "socket/http", value: "none", reason: "at least one listener is needed")
        }
        return configuration
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
}

/// A configuration value that cannot be used; the message names where it came from.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case unknownKey
        case malformedLine
        case invalid
        case unreadableFile
        case unexpectedArgument
        case missingValue
    }

    private let code: Code
    public let description: String

    static func unknownKey(_ key: String, origin: String) -> ConfigurationError {
        ConfigurationError(
            code: .unknownKey,
            description:
                "\(origin): unknown setting '\(key)' (known: \(ConfigurationLoader.keys.joined(separator: ", ")))")
    }

    static func malformedLine(origin: String, line: String) -> ConfigurationError {
        ConfigurationError(code: .malformedLine, description: "\(origin): expected 'key = value', found '\(line)'")
    }

    static func invalid(origin: String, value: String, reason: String) -> ConfigurationError {
        ConfigurationError(code: .invalid, description: "\(origin): '\(value)' is not valid: \(reason)")
    }

    static func unexpectedArgument(_ argument: String) -> ConfigurationError {
        ConfigurationError(
            code: .unexpectedArgument,
            description: "unexpected argument '\(argument)': settings are given as --KEY VALUE (see --help)")
    }

    static func missingValue(origin: String, valueName: String) -> ConfigurationError {
        ConfigurationError(code: .missingValue, description: "\(origin): missing value, expected <\(valueName)>")
    }

    static func unreadableFile(_ path: String, reason: String) -> ConfigurationError {
        ConfigurationError(code: .unreadableFile, description: "cannot read config file \(path): \(reason)")
    }
}
