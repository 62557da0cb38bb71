import SpeakService
import SpeakState

extension SpeakError {
    /// The database failed (503). Its own error, `StateError`, stays in the state store: this is
    /// where it becomes the service's, for the audit log, the request ids and the scheduler alike.
    public init(state error: StateError) {
        self.init(.stateUnavailable, name: "stateUnavailable", "\(error)")
    }
}
