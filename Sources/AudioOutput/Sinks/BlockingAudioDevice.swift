/// The blocking calls of one opened device: the C-call boundary of every threaded sink.
///
/// Only the sink's own device thread calls these, one call at a time, so implementations need no
/// locking. Any call may block; the sink bounds how long it waits for one (`AudioSinkOptions`).
/// Tests put a device that blocks on purpose behind this protocol to prove a wedged device
/// cannot hang a caller.
protocol BlockingAudioDevice: AnyObject {
    /// Waits until `count` more bytes can be written without blocking, or until `interrupted()`
    /// is true. Devices whose writes block long otherwise use this so a flush need not wait
    /// behind a write; the others return at once.
    func waitForRoom(_ count: Int, until interrupted: () -> Bool) throws(AudioOutputError)

    /// Blocks until the device has taken all of `bytes` (whole frames).
    func write(_ bytes: UnsafeRawBufferPointer) throws(AudioOutputError)

    /// Blocks until everything written has been played, or returns early once `interrupted()`
    /// is true (a flush or cancel is waiting behind it).
    func drain(until interrupted: () -> Bool) throws(AudioOutputError)

    /// Discards what was written but not yet played.
    func flush() throws(AudioOutputError)

    /// Bytes written but not yet played (the device's delay); nil when the device cannot tell.
    func unplayedBytes() -> Int?

    /// Releases the device without playing what is left.
    func close()

    /// How long until what was written so far has been played; nil when the device cannot say.
    func queuedDuration() -> Duration?

    /// Bytes the device still waits for before it starts playing what was written; 0 when it plays.
    var bytesToStart: Int { get }
}

extension BlockingAudioDevice {
    func waitForRoom(_ count: Int, until interrupted: () -> Bool) throws(AudioOutputError) {}

    func unplayedBytes() -> Int? { nil }
    func queuedDuration() -> Duration? { nil }
    var bytesToStart: Int { 0 }
}

/// Opens a device; runs on the sink's device thread, within `AudioSinkOptions.openTimeout`.
typealias BlockingAudioDeviceOpener = @Sendable () throws(AudioOutputError) -> any BlockingAudioDevice
