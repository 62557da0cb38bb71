import SpeakAPI
import SpeakFleet

extension SettingValue {
    /// `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`, kept as given once it parses.
    func mqttBroker() throws(ConfigurationError) -> String {
        do {
            return try MQTTBrokerURL(parsing: value).description
        } catch {
            throw invalid("expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]: \(error)")
        }
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
    /// The fleet link's settings, or nil without `--mqtt`.
    public var fleetSettings: FleetSettings? {
        get throws {
            guard let mqtt else { return nil }
            return FleetSettings(
                broker: try MQTTBrokerURL(parsing: mqtt), device: mqttID, site: mqttSite, groups: mqttGroups,
                username: mqttUsername, passwordFile: mqttPasswordFile, caFile: mqttCAFile)
        }
    }
}
