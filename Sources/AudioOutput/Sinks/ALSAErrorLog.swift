import CALSA
import Logging
import Synchronization

/// Where libasound's own error messages go: to a logger at debug level, not to standard error.
///
/// libasound prints each error it meets as a raw line on standard error (`ALSA lib
/// confmisc.c:855:(parse_card) cannot find card '0'`, several for one failed open), outside any
/// logger, so they land in the middle of `speak`'s messages and speakd's journal. The failure
/// itself reaches the caller as an `AudioOutputError` from the status code; the lines are detail
/// for whoever debugs the ALSA configuration (`SPEAK_LOG_LEVEL=debug`, `--log-level debug`).
enum ALSAErrorLog {
    /// The logger of the most recently created ALSA sink; the handler is one for the process.
    private static let logger = Mutex(Logger(label: "speakd.audio"))

    /// Installs the handler the first time it is called, and uses `logger` from now on.
    static func route(to logger: Logger) {
        self.logger.withLock { $0 = logger }
        _ = installed
    }

    private static let installed: Void = {
        _ = speakd_alsa_route_errors()
    }()

    fileprivate static func log(file: String, line: Int, function: String, errno: Int32, message: String) {
        let logger = logger.withLock { $0 }
        logger.debug(
            "ALSA: \(message)",
            metadata: [
                "alsa.source": "\(file):\(line)", "alsa.function": "\(function)",
                "alsa.errno": errno == 0 ? nil : "\(errno)",
            ].compactMapValues { $0 })
    }
}

/// libasound's error messages, from the handler in CALSA's shim; called on whichever thread met
/// the error, it touches only the logger behind its mutex. (Swift 6.2, which builds the arm64
/// package, has only the underscored spelling of `@c`.)
#if compiler(>=6.3)
@c(speakd_alsa_error_received)
#else
@_cdecl("speakd_alsa_error_received")
#endif
func receiveALSAError(
    file: UnsafePointer<CChar>?, line: Int32, function: UnsafePointer<CChar>?, errno: Int32,
    message: UnsafePointer<CChar>?
) {
    ALSAErrorLog.log(
        file: file.map { String(cString: $0) } ?? "?", line: Int(line),
        function: function.map { String(cString: $0) } ?? "?", errno: errno,
        message: message.map { String(cString: $0) } ?? "")
}
