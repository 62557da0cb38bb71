/// A failure of an audio sink: the device would not open, a write or drain failed, a call blocked
/// past its time limit, or a sink description did not parse.
///
/// `sink` names the sink (`pulse`, `alsa:default`, `wav:/tmp/x.wav`) and `message` carries the
/// library's own words where there are some (`pa_strerror`, `snd_strerror`, `strerror`).
public struct AudioOutputError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case openFailed
        case writeFailed
        case drainFailed
        case flushFailed
        case timedOut
        case blocked
        case unsupportedFormat
        case invalidSpec
        case noDevice
    }

    private let code: Code
    /// The sink the error is about, as in `AudioSink.name`.
    public let sink: String
    public let message: String

    /// A stable, machine-readable name for the kind of problem (`openFailed`, `timedOut`, …).
    public var kind: String { code.rawValue }

    /// True when a device call did not return in time, or one that timed out earlier still has
    /// not returned: the device may be wedged.
    public var isTimeout: Bool { code == .timedOut || code == .blocked }

    public var description: String {
        code == .invalidSpec ? message : "audio sink '\(sink)': \(message)"
    }

    /// This failure, of opening the device again after `cause` lost it, with `cause` told first.
    func after(_ cause: AudioOutputError) -> AudioOutputError {
        AudioOutputError(code: code, sink: sink, message: "\(cause.message), then \(message)")
    }

    /// The device could not be opened or connected.
    public static func openFailed(sink: String, _ message: String) -> AudioOutputError {
        AudioOutputError(code: .openFailed, sink: sink, message: "cannot open: \(message)")
    }

    /// A write was refused; the connection or device is probably gone.
    public static func writeFailed(sink: String, _ message: String) -> AudioOutputError {
        AudioOutputError(code: .writeFailed, sink: sink, message: "write failed: \(message)")
    }

    /// Waiting for the written audio to play out failed.
    public static func drainFailed(sink: String, _ message: String) -> AudioOutputError {
        AudioOutputError(code: .drainFailed, sink: sink, message: "drain failed: \(message)")
    }

    /// Discarding the buffered audio failed.
    public static func flushFailed(sink: String, _ message: String) -> AudioOutputError {
        AudioOutputError(code: .flushFailed, sink: sink, message: "flush failed: \(message)")
    }

    /// A device call (`operation`) did not return within `limit`.
    public static func timedOut(sink: String, operation: String, limit: Duration) -> AudioOutputError {
        AudioOutputError(
            code: .timedOut, sink: sink,
            message: "\(operation) did not return within \(limit); the device is treated as wedged")
    }

    /// A device call that timed out earlier has still not returned, so the device is left alone.
    public static func blocked(sink: String) -> AudioOutputError {
        AudioOutputError(
            code: .blocked, sink: sink,
            message: "a device call that timed out is still blocked; not reopening until it returns")
    }

    /// The device or file cannot take this sample format.
    public static func unsupportedFormat(sink: String, _ message: String) -> AudioOutputError {
        AudioOutputError(code: .unsupportedFormat, sink: sink, message: message)
    }

    /// A sink description (`--audio` value) that does not parse; `sink` is the value as given.
    public static func invalidSpec(_ value: String, _ message: String) -> AudioOutputError {
        AudioOutputError(code: .invalidSpec, sink: value, message: message)
    }

    /// `auto` found no working device; `message` says what was tried and why each failed.
    public static func noDevice(sink: String, _ message: String) -> AudioOutputError {
        AudioOutputError(code: .noDevice, sink: sink, message: message)
    }
}
