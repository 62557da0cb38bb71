import FoundationEssentials
import Logging
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// Which sink to play through, as written on the command line or in configuration:
/// `auto`, `pulse[:SINK]`, `alsa[:DEVICE]`, `wav:PATH` or `null`.
///
/// A system service has no desktop session, so on a kiosk it reaches audio one of three ways:
/// - as a user service of the kiosk user: `pulse` finds the session's PipeWire (through
///   pipewire-pulse) or PulseAudio at `$XDG_RUNTIME_DIR/pulse/native`;
/// - through a system-wide sound server: `pulse` with `PULSE_SERVER=unix:/run/pulse/native`, the
///   service user in the server's access group (`pulse-access`);
/// - with no sound server: `alsa:DEVICE` (`alsa:hw:0,0`, `alsa:plughw:CARD=…`), the service user
///   in group `audio`. Nothing else may hold the device.
public enum AudioSinkSpec: Sendable, Hashable, CustomStringConvertible {
    /// The first that works: PulseAudio if a server answers, else ALSA `default`.
    case auto
    /// The PulseAudio (or pipewire-pulse) server libpulse finds, `PULSE_SERVER` first.
    case pulse
    /// One sink of that server, by its name (`pactl list short sinks`), e.g. a headset's, so
    /// one named output can play there while another plays on the default sink.
    case pulseSink(name: String)
    /// An ALSA PCM device.
    case alsa(device: String)
    /// A WAV file.
    case wav(path: String)
    /// Discard the audio.
    case null
    /// An RTP stream to IP speakers (`rtp://GROUP:PORT?codec=…`).
    case rtp(RTPStream)

    /// Parses `auto|pulse[:SINK]|alsa[:DEVICE]|wav:PATH|null`; keywords are case-insensitive.
    /// - Throws: `AudioOutputError` naming the value when it does not parse.
    public init(parsing value: String) throws(AudioOutputError) {
        let (keyword, argument): (Substring, Substring?) =
            if let colon = value.firstIndex(of: ":") {
                (value[..<colon], value[value.index(after: colon)...])
            } else {
                (value[...], nil)
            }
        switch (keyword.lowercased(), argument) {
        case ("auto", nil): self = .auto
        case ("pulse", nil): self = .pulse
        case ("pulse", let sink?) where !sink.isEmpty: self = .pulseSink(name: String(sink))
        case ("pulse", _):
            throw .invalidSpec(value, "audio sink '\(value)' names no PulseAudio sink; expected pulse or pulse:SINK")
        case ("null", nil): self = .null
        case ("alsa", nil): self = .alsa(device: "default")
        case ("alsa", let device?) where !device.isEmpty: self = .alsa(device: String(device))
        case ("alsa", _):
            throw .invalidSpec(value, "audio sink '\(value)' names no ALSA device; expected alsa or alsa:DEVICE")
        case ("wav", let path?) where !path.isEmpty: self = .wav(path: String(path))
        case ("wav", _):
            throw .invalidSpec(value, "audio sink '\(value)' needs a file; expected wav:PATH")
        case ("rtp", let stream?): self = .rtp(try RTPStream(parsing: String(stream)))
        case ("auto", _), ("null", _):
            throw .invalidSpec(value, "audio sink '\(value)' takes no argument; expected \(keyword.lowercased())")
        default:
            throw .invalidSpec(
                value,
                "unknown audio sink '\(value)'; expected auto, pulse[:SINK], alsa[:DEVICE], wav:PATH, null or rtp://ADDRESS:PORT?…"
            )
        }
    }

    /// How long after a sample leaves it is heard beyond the sink's own latency: an RTP
    /// output's configured receiver delay (`delay=`), zero for the others.
    public var receiverDelay: Duration {
        if case .rtp(let stream) = self { return .milliseconds(stream.receiverDelayMilliseconds) }
        return .zero
    }

    public var description: String {
        switch self {
        case .auto: "auto"
        case .pulse: "pulse"
        case .pulseSink(let name): "pulse:\(name)"
        case .alsa(let device): "alsa:\(device)"
        case .wav(let path): "wav:\(path)"
        case .null: "null"
        case .rtp(let stream): stream.description
        }
    }

    /// Makes the sink this spec names.
    ///
    /// `auto` opens each candidate to see that it works and returns the first that does, already
    /// open; when none does it throws, naming each candidate and its error, rather than falling
    /// back to silence. The other specs return a sink that opens on first use.
    /// - Parameters:
    ///   - format: the sample format the sink will be given.
    ///   - options: latency and time limits for device sinks.
    ///   - environment: where `PULSE_SERVER` is read from.
    ///   - autoALSADevice: the ALSA device `auto` tries when PulseAudio does not answer.
    ///   - logger: where the sink reports failures and recoveries.
    public func makeSink(
        format: AudioFormat,
        options: AudioSinkOptions = AudioSinkOptions(),
        environment: [String: String] = ProcessInfo.processInfo.environment,
        autoALSADevice: String = "default",
        logger: Logger = Logger(label: "speakd.audio")
    ) async throws(AudioOutputError) -> any ReopenableAudioSink {
        let server = environment["PULSE_SERVER"].flatMap { $0.isEmpty ? nil : $0 }
        switch self {
        case .pulse:
            return PulseAudioSink(format: format, server: server, options: options, logger: logger)
        case .pulseSink(let name):
            return PulseAudioSink(format: format, server: server, device: name, options: options, logger: logger)
        case .alsa(let device):
            return ALSASink(device: device, format: format, options: options, logger: logger)
        case .wav(let path):
            return WAVFileSink(path: path, format: format, options: options, logger: logger)
        case .null:
            return NullSink(format: format, pacing: .realTime(buffer: options.targetLatency))
        case .rtp(let stream):
            let session = RTPSession(
                stream: stream, outputName: options.outputName, statistics: options.rtpStatistics ?? RTPStatistics())
            var logger = logger
            logger[metadataKey: "speakd.output"] = "\(options.outputName)"
            return DeviceSink(name: stream.description, format: format, options: options, logger: logger) {
                [logger] () throws(AudioOutputError) -> any BlockingAudioDevice in
                try RTPDevice(session: session, format: format, buffer: options.targetLatency, logger: logger)
            }
        case .auto:
            let candidates: [any ReopenableAudioSink] = [
                PulseAudioSink(format: format, server: server, options: options, logger: logger),
                ALSASink(device: autoALSADevice, format: format, options: options, logger: logger),
            ]
            var failures: [String] = []
            for sink in candidates {
                do {
                    try await sink.reopen()
                    return sink
                } catch let error as AudioOutputError {
                    failures.append("\(sink.name): \(error.message)")
                } catch {
                    failures.append("\(sink.name): \(error)")
                }
                await sink.close()
            }
            throw .noDevice(sink: "auto", "no audio output works (\(failures.joined(separator: "; ")))")
        }
    }
}
