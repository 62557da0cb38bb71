import FoundationEssentials
import Logging
import SpeakAPI
import SpeakService
import SpeakWyoming
import SpeakdVersion

/// The Wyoming front `--wyoming` asks for, over the one service, or nil.
func makeWyomingServer(
    _ configuration: DaemonConfiguration, service: any SpeakService, logger: Logger
) throws -> WyomingServer? {
    guard let address = configuration.wyoming else {
        if configuration.wyomingSatellite != nil {
            throw DaemonStartError(description: "--wyoming-satellite: needs --wyoming ADDRESS to listen on")
        }
        return nil
    }
    var satellite: WyomingSettings.Satellite?
    if let output = configuration.wyomingSatellite {
        do {
            try service.checkOutput(output)
        } catch {
            throw DaemonStartError(description: "--wyoming-satellite: no output is called '\(output)'")
        }
        satellite = WyomingSettings.Satellite(output: output)
    }
    var settings = WyomingSettings(version: SpeakdVersion.current, satellite: satellite)
    settings.maxTextBytes = max(4_096, service.limits.maxTextLength * 4)
    settings.maxConnections = configuration.connectionLimits.maxConnections
    return WyomingServer(
        address: address, backend: ServiceWyomingBackend(service: service), settings: settings,
        logger: logger)
}
