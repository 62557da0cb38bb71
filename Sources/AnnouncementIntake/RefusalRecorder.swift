import SpeakAPI
import SpeakService

/// Keeps the record of each request the intake refused (the audit log), with its error and
/// where it came from.
public protocol RefusalRecorder: Sendable {
    /// - Parameters:
    ///   - error: why it was refused; its `response.error.code` is what the record keeps.
    ///   - origin: the front and sender.
    ///   - output: the output the request named, when it was read that far.
    func refused(_ error: SpeakError, origin: AnnouncementOrigin, output: String?)
}
