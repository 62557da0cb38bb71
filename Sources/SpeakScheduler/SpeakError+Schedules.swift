import SpeakAPI
import SpeakSchedules
import SpeakService

/// The refusals of schedule requests, each as the one error every front maps.
extension SpeakError {
    /// A schedule's own field is wrong: 400 when the body is not strict JSON, else 422. A fault
    /// inside `announcement` has the code `POST /v1/announcements` would answer.
    init(schedule error: ScheduleError) {
        self.init(
            error.isMalformed ? .malformed : .invalid,
            name: error.isMalformed ? ErrorResponse.Code.malformedRequest : error.announcementCode ?? "invalidValue",
            error.message, field: error.field)
    }

    /// The schedule's announcement is refused as the intake would refuse it when posted; its
    /// field is named inside `announcement`.
    init(announcement error: SpeakError) {
        let detail = error.response.error
        self.init(
            error.code == .malformed ? .malformed : .invalid, name: detail.code, detail.message,
            field: "announcement" + (detail.field.map { ".\($0)" } ?? ""))
    }

    static func unknownSchedule(_ id: String) -> SpeakError {
        SpeakError(.notFound, name: "unknownSchedule", "no schedule with id '\(id)'", field: "id")
    }
}
