/// Why a `speak` run did not succeed, and the exit status that says so.
///
/// Exit 0: success. Exit 1: the speech did not complete (it failed, was interrupted, cancelled,
/// refused, or no daemon answered where one was required). Exit 2: invalid input.
struct SpeakFailure: Error, CustomStringConvertible {
    private enum Code {
        case notCompleted
        case daemonUnreachable
        case invalidInput
    }

    private let code: Code
    let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    static func notCompleted(_ message: String) -> SpeakFailure { SpeakFailure(.notCompleted, message) }
    static func daemonUnreachable(_ message: String) -> SpeakFailure { SpeakFailure(.daemonUnreachable, message) }
    static func invalidInput(_ message: String) -> SpeakFailure { SpeakFailure(.invalidInput, message) }

    var exitStatus: Int32 {
        switch code {
        case .notCompleted, .daemonUnreachable: 1
        case .invalidInput: 2
        }
    }

    var description: String { message }
}
