import AudioOutput
import EspeakEngine
import FoundationEssentials
import Logging
import SpeakAPI
import SpeechRendering

/// The chimes (`--chimes`, else `chimes` in the voices directory found as `--voices` is) checked
/// against the priorities' defaults, and the loudness calibration, warmed up for the default voice.
func makeSound(
    _ configuration: DaemonConfiguration, renderer: any SpeechRenderer, environment: [String: String], logger: Logger
) async throws -> AnnouncementSound {
    var directory: URL?
    if let configured = configuration.chimesDirectory {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: configured, isDirectory: &isDirectory), isDirectory
        else {
            throw DaemonStartError(description: "--chimes: '\(configured)' is not a directory")
        }
        directory = URL(fileURLWithPath: configured)
    } else {
        let voices =
            configuration.voicesDirectory.map { URL(fileURLWithPath: $0) }
            ?? VoicesDirectory.discover(environment: environment)?.url
        directory = voices.map { $0.appendingPathComponent("chimes") }.flatMap {
            FileManager.default.fileExists(atPath: $0.path) ? $0 : nil
        }
    }
    let chimes: ChimeLibrary
    do {
        chimes =
            try directory.map {
                try ChimeLibrary(directory: $0, format: renderer.format, loudness: configuration.loudness)
            } ?? ChimeLibrary(format: renderer.format)
    } catch {
        throw DaemonStartError(description: "--chimes: \(error)")
    }
    var defaults: [AnnouncementPriority: String] = [:]
    var defaultsAfter: [AnnouncementPriority: String] = [:]
    for (flag, priority, after, name) in [
        ("--chime-high", AnnouncementPriority.high, false, configuration.chimeHigh),
        ("--chime-default", .default, false, configuration.chimeDefault),
        ("--chime-low", .low, false, configuration.chimeLow),
        ("--chime-after-high", .high, true, configuration.chimeAfterHigh),
        ("--chime-after-default", .default, true, configuration.chimeAfterDefault),
        ("--chime-after-low", .low, true, configuration.chimeAfterLow),
    ] {
        guard let name else { continue }
        guard chimes.chimes[name] != nil else {
            let known = chimes.names.isEmpty ? "none" : chimes.names.joined(separator: ", ")
            throw DaemonStartError(
                description: "\(flag): no chime named '\(name)' in \(directory?.path ?? "(no chimes directory)") "
                    + "(chimes: \(known))")
        }
        if after { defaultsAfter[priority] = name } else { defaults[priority] = name }
    }
    if !chimes.names.isEmpty {
        logger.info(
            "chimes loaded",
            metadata: [
                "speakd.chimes": "\(chimes.names.joined(separator: ","))", "speakd.dir": "\(directory?.path ?? "")",
            ])
    }
    let loudness = configuration.loudness.map { LoudnessCalibration(target: $0, renderer: renderer, logger: logger) }
    await loudness?.warmUp()
    return AnnouncementSound(
        chimes: chimes, defaultChimes: defaults, defaultChimesAfter: defaultsAfter, loudness: loudness)
}
