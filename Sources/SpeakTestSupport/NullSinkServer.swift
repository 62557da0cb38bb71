import Foundation

/// A private sound server with null sinks whose monitors `MonitorRecorder` records: PulseAudio
/// itself (`PulseAudioServer`) or PipeWire through pipewire-pulse (`PipeWireServer`).
public protocol NullSinkServer: Sendable {
    /// Where the recorder may put its capture files.
    var directory: URL { get }
    var sampleRate: Int { get }
    var channels: Int { get }
    /// The monitor of the first null sink.
    var monitorSource: String { get }
    /// The monitor of the null sink `sink`.
    func monitorSource(of sink: String) -> String
    /// The environment of a client process that talks to this server only.
    var clientProcessEnvironment: [String: String] { get }
}

extension PulseAudioServer: NullSinkServer {}
extension PipeWireServer: NullSinkServer {}
