import FoundationEssentials
import SpeakAPI
import SpeakFleet
import SpeakMQTT

#if canImport(Glibc)
import Glibc
#endif

extension SettingValue {
    /// `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`, kept as given once it parses.
    func mqttBroker() throws(ConfigurationError) -> String {
        do {
            return try MQTTBrokerURL(parsing: value).description
        } catch {
            throw invalid("expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]: \(error)")
        }
    }

    /// A broker user name: no spaces or control characters, which a config line or shell quoting
    /// would silently change.
    func mqttUsername() throws(ConfigurationError) -> String {
        guard
            value.unicodeScalars.allSatisfy({
                !$0.properties.isWhitespace && ![.control, .format].contains($0.properties.generalCategory)
            })
        else { throw invalid("expected a user name without spaces or control characters") }
        return value
    }

    /// One MQTT topic level: a site, group or device id.
    func topicLevel() throws(ConfigurationError) -> String {
        if let problem = FleetTopics.problem(with: value) {
            throw invalid("expected one MQTT topic level, but \(problem)")
        }
        return value
    }
}

extension DaemonConfiguration {
    /// The device id `mqtt-id = auto` stands for: the host name up to its first dot, when that
    /// is a usable topic level.
    static var hostDeviceID: String {
        let name = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? ""
        return FleetTopics.problem(with: name) == nil && name != "localhost" ? name : "speakd-\(gethostid())"
    }

    /// The fleet link's settings, or nil without `--mqtt`.
    public var fleetSettings: FleetSettings? {
        get throws {
            guard let mqtt else { return nil }
            return FleetSettings(
                broker: try MQTTBrokerURL(parsing: mqtt), device: mqttID ?? Self.hostDeviceID, site: mqttSite,
                groups: mqttGroups,
                username: mqttUsername, passwordFile: mqttPasswordFile, caFile: mqttCAFile)
        }
    }
}
