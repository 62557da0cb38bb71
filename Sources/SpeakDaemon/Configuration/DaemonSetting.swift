import AudioOutput
import FoundationEssentials
import Logging
import SpeakAPI
import SpeakServer
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// One `speakd` setting, declared once: its key, what a value looks like, its default, its help,
/// and how a value is checked and stored in `DaemonConfiguration`.
///
/// Everything else is derived from it: the flag (`--max-queue`), the environment variable
/// (`SPEAKD_MAX_QUEUE`), the config-file key (`max-queue = 32`), the error texts and the lines of
/// `speakd --help`. `DaemonConfiguration.settings` lists them all.
public struct DaemonSetting: Sendable {
    /// How values are given.
    public enum Kind: Sendable {
        /// One value; where several are given, the last wins.
        case single
        /// A list: comma-separated, a repeatable flag, and one or more lines of a file.
        case list
        /// True or false; the bare flag means true.
        case toggle
        /// Named entries `NAME=VALUE`: a repeatable flag (`--output headset=pulse:sink`), a file
        /// line per entry with the name after a dot (`output.headset = pulse:sink`), and in the
        /// environment entries separated by `;`. Within one source the entries add up.
        case keyed
    }

    /// What separates the entries of a `keyed` setting in one value.
    static let entrySeparator: Character = ";"

    /// The key: the long flag without its dashes, and the config-file key.
    public let key: String
    /// How values are given.
    public let kind: Kind
    /// What a value looks like in `--help` (`n` for `--max-queue <n>`).
    public let valueName: String
    /// What the setting does, for `--help`.
    public let help: String
    /// The default as `--help` shows it.
    public let defaultDescription: String
    /// The default as a config-file value, where `defaultDescription` is prose rather than a value
    /// (`auto`, the path the system unit gives); nil when `defaultDescription` is the value itself.
    public private(set) var fileDefault: String?
    /// Checks `value` and stores it; errors name `value.origin`.
    private let store: @Sendable (SettingValue, inout DaemonConfiguration) throws -> Void
    /// Stores the default; the environment decides the defaults of the paths.
    private let storeDefault: @Sendable (inout DaemonConfiguration, _ environment: [String: String]) -> Void

    /// The flag: `--` and the key.
    public var flag: String { "--\(key)" }

    /// The environment variable: `SPEAKD_` and the key in capitals with `_` for `-`.
    public var environmentName: String { ConfigurationLoader.environmentName(key) }

    /// A setting stored at `field`.
    /// - Parameters:
    ///   - shown: the default in `--help`; nil shows the default value itself.
    ///   - parse: turns a given value into the field's; its errors are `ConfigurationError`s.
    init<Value: Sendable>(
        _ key: String, _ field: any WritableKeyPath<DaemonConfiguration, Value> & Sendable, kind: Kind = .single,
        valueName: String, help: String,
        environmentDefault defaultValue: @escaping @Sendable (_ environment: [String: String]) -> Value,
        shown: String,
        parse: @escaping @Sendable (SettingValue) throws -> Value
    ) {
        self.key = key
        self.kind = kind
        self.valueName = valueName
        self.help = help
        self.defaultDescription = shown
        self.store = { value, configuration in configuration[keyPath: field] = try parse(value) }
        self.storeDefault = { configuration, environment in configuration[keyPath: field] = defaultValue(environment) }
    }

    /// A setting whose default does not depend on the environment.
    init<Value: Sendable>(
        _ key: String, _ field: any WritableKeyPath<DaemonConfiguration, Value> & Sendable, kind: Kind = .single,
        valueName: String, help: String, default defaultValue: Value, shown: String? = nil,
        parse: @escaping @Sendable (SettingValue) throws -> Value
    ) {
        self.init(
            key, field, kind: kind, valueName: valueName, help: help, environmentDefault: { _ in defaultValue },
            shown: shown ?? "\(defaultValue)", parse: parse)
    }

    /// This setting, with `value` as its default in the config file `speakd --print-config-file` writes.
    func inFiles(_ value: String) -> DaemonSetting {
        var setting = self
        setting.fileDefault = value
        return setting
    }

    /// Checks `value` and stores it in `configuration`.
    func apply(_ value: SettingValue, to configuration: inout DaemonConfiguration) throws(ConfigurationError) {
        do {
            try store(value, &configuration)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw .invalid(origin: value.origin, value: value.value, reason: "\(error)")
        }
    }

    /// Stores the default in `configuration`.
    func applyDefault(to configuration: inout DaemonConfiguration, environment: [String: String]) {
        storeDefault(&configuration, environment)
    }
}

extension DaemonSetting {
    /// A whole number within `range`.
    static func integer(
        _ key: String, _ field: any WritableKeyPath<DaemonConfiguration, Int> & Sendable, default defaultValue: Int,
        in range: ClosedRange<Int>, valueName: String = "n", help: String
    ) -> DaemonSetting {
        DaemonSetting(key, field, valueName: valueName, help: help, default: defaultValue) { value in
            try value.integer(in: range)
        }
    }

    /// Seconds within `range`, kept as a `Double`.
    static func seconds(
        _ key: String, _ field: any WritableKeyPath<DaemonConfiguration, Double> & Sendable,
        default defaultValue: Double, in range: ClosedRange<Double>, help: String
    ) -> DaemonSetting {
        DaemonSetting(
            key, field, valueName: "seconds", help: help, default: defaultValue,
            shown: SettingValue.decimal(defaultValue)
        ) { value in try value.seconds(in: range) }
    }

    /// A path, or `none`; none unless given (`shown` says what none means for the setting).
    static func optionalPath(
        _ key: String, _ field: any WritableKeyPath<DaemonConfiguration, String?> & Sendable, valueName: String,
        help: String, shown: String = "none"
    ) -> DaemonSetting {
        DaemonSetting(key, field, valueName: valueName, help: help, default: nil, shown: shown) { value in
            try value.isNone ? nil : value.path()
        }
    }

    /// True or false, false unless given; the bare flag means true.
    static func toggle(
        _ key: String, _ field: any WritableKeyPath<DaemonConfiguration, Bool> & Sendable, help: String
    ) -> DaemonSetting {
        DaemonSetting(key, field, kind: .toggle, valueName: "bool", help: help, default: false) { value in
            try value.boolean()
        }
    }

    /// A timeout in seconds, 0.1 s to a day.
    static func timeout(
        _ key: String, _ field: any WritableKeyPath<DaemonConfiguration, Duration> & Sendable,
        default defaultValue: Duration, help: String
    ) -> DaemonSetting {
        let seconds = Double(defaultValue.components.seconds) + Double(defaultValue.components.attoseconds) / 1e18
        return DaemonSetting(
            key, field, valueName: "seconds", help: help, default: defaultValue, shown: SettingValue.decimal(seconds)
        ) { value in
            try .milliseconds(Int((value.seconds(in: 0.1...86_400) * 1000).rounded()))
        }
    }
}

/// A value given for a setting, and where it came from (`--max-queue`, `SPEAKD_MAX_QUEUE`,
/// `/etc/speakd/speakd.conf:3`), so an error can point at it.
struct SettingValue: Sendable, Hashable {
    var value: String
    var origin: String
    /// What errors quote instead of `value`: the whole `NAME=VALUE` entry a keyed setting's value came from.
    var quoted: String? = nil

    /// The error for this value.
    func invalid(_ reason: String, value shown: String? = nil) -> ConfigurationError {
        .invalid(origin: origin, value: shown ?? quoted ?? value, reason: reason)
    }

    /// `none`, `off` or nothing: the setting is turned off.
    var isNone: Bool { ["none", "off", ""].contains(value.lowercased()) }

    /// An absolute or relative (`./`) path.
    func path() throws(ConfigurationError) -> String {
        guard value.hasPrefix("/") || value.hasPrefix(".") else { throw invalid("expected a path") }
        return value
    }

    /// A user name as `useradd` accepts one (it need exist only where it is used: the engine
    /// worker says so when it does not).
    func userName() throws(ConfigurationError) -> String {
        let allowed = value.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x5f || byte == 0x2d || byte == 0x2e
        }
        guard !value.isEmpty, value.utf8.count <= 32, allowed, !value.hasPrefix("-") else {
            throw invalid("expected a user name (letters, digits, '.', '_', '-')")
        }
        return value
    }

    /// A voice's name as its files call it (`en_US-joe-medium`): letters, digits, '.', '_', '-'.
    func voiceName() throws(ConfigurationError) -> String {
        let allowed = value.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isAlphabetic || scalar.properties.numericType != nil
                || "._-".unicodeScalars.contains(scalar)
        }
        guard !value.isEmpty, value.count <= 128, allowed else {
            throw invalid("expected a voice name (letters, digits, '.', '_', '-')")
        }
        return value
    }

    func boolean() throws(ConfigurationError) -> Bool {
        switch value.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0", "": return false
        default: throw invalid("expected true or false")
        }
    }

    func integer(in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let number = Int(value), range.contains(number) else {
            throw invalid("expected a whole number \(range.lowerBound)–\(range.upperBound)")
        }
        return number
    }

    func seconds(in range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
        try number(
            in: range,
            expected: "seconds between \(Self.decimal(range.lowerBound)) and \(Self.decimal(range.upperBound))")
    }

    /// A finite number within `range`; the refusal says it `expected` that (`a factor from 0 to 1`).
    func number(in range: ClosedRange<Double>, expected: String) throws(ConfigurationError) -> Double {
        guard let number = Double(value), number.isFinite, range.contains(number) else {
            throw invalid("expected \(expected)")
        }
        return number
    }

    /// `15` rather than `15.0`, `0.01` as it is.
    static func decimal(_ number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }

    func listenAddress() throws(ConfigurationError) -> SpeakEndpoint {
        do {
            return try SpeakEndpoint(hostPort: value, for: .listener)
        } catch {
            throw invalid(error.reason)
        }
    }

    /// Checked as `AudioSinkSpec` parses it, kept as given.
    func audioSink() throws(ConfigurationError) -> String {
        do {
            _ = try AudioSinkSpec(parsing: value)
        } catch {
            throw invalid(error.message)
        }
        return value
    }

    /// `NAME=SPEC` entries of a `keyed` setting, separated by `DaemonSetting.entrySeparator`, each
    /// name checked by `checkName` and each value by `checkValue`. A name given twice is an error.
    func entries<Value>(
        checkName: (SettingValue, String) throws(ConfigurationError) -> Void,
        checkValue: (SettingValue) throws(ConfigurationError) -> Value
    ) throws(ConfigurationError) -> [(name: String, value: Value)] {
        var result: [(name: String, value: Value)] = []
        for item in value.split(separator: DaemonSetting.entrySeparator) {
            let entry = item.trimmingWhitespace()
            if entry.isEmpty { continue }
            guard let equals = entry.firstIndex(of: "=") else {
                throw invalid("expected NAME=VALUE, such as headset=pulse:usb-headset", value: entry)
            }
            let name = entry[..<equals].trimmingWhitespace()
            let given = SettingValue(
                value: entry[entry.index(after: equals)...].trimmingWhitespace(), origin: origin,
                quoted: entry)
            try given.check(name: name, with: checkName)
            guard !result.contains(where: { $0.name == name }) else {
                throw invalid("the name '\(name)' is given twice", value: entry)
            }
            result.append((name, try checkValue(given)))
        }
        return result
    }

    private func check(
        name: String, with checkName: (SettingValue, String) throws(ConfigurationError) -> Void
    ) throws(ConfigurationError) {
        try checkName(self, name)
    }

    /// The name of an output: 1–32 of lower-case ASCII letters, digits, `-` and `_`, starting
    /// with a letter, so it is the same in a URL query, a file key and a Prometheus label.
    /// `default` is `--audio`'s output and cannot be given again.
    static func outputName(_ entry: SettingValue, _ name: String) throws(ConfigurationError) {
        let allowed = name.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || "-_".contains($0) }
        guard (1...32).contains(name.count), allowed, name.first?.isLetter == true else {
            throw entry.invalid(
                "an output name is 1–32 characters of a–z, 0–9, '-' and '_', starting with a letter")
        }
        guard name != "default" else {
            throw entry.invalid("'default' is the output --audio configures; give it with --audio")
        }
    }

    /// A browser origin; a final `/` is dropped.
    func corsOrigin() throws(ConfigurationError) -> String {
        guard let url = URL(string: value), let scheme = url.scheme, ["http", "https"].contains(scheme),
            url.host != nil, url.path.isEmpty || url.path == "/"
        else {
            throw invalid("expected an origin such as http://kiosk.local:8080")
        }
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }

    /// The canonical form of a BCP 47 tag.
    func languageTag() throws(ConfigurationError) -> String {
        do {
            return try LanguageTag(value).canonical
        } catch {
            throw invalid("\(error)")
        }
    }

    func logLevel() throws(ConfigurationError) -> Logger.Level {
        guard let level = Logger.Level(rawValue: value.lowercased()) else {
            throw invalid("expected one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return level
    }

    /// Comma-separated host names or IP addresses, without ports; lower case, brackets dropped.
    func hostNames() throws(ConfigurationError) -> [String] {
        var names: [String] = []
        for item in value.split(separator: ",") {
            let given = item.trimmingWhitespace()
            var name = given.lowercased()
            if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
            if name.hasSuffix(".") { name = String(name.dropLast()) }
            let isIPv6 = name.filter { $0 == ":" }.count >= 2 && name.allSatisfy { $0.isHexDigit || ":.".contains($0) }
            let isName =
                !name.isEmpty && name.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || "-.".contains($0) }
            guard isIPv6 || isName else {
                throw invalid("expected host names such as kiosk.local or 192.168.1.20, without a port", value: given)
            }
            names.append(name)
        }
        return names
    }
}
