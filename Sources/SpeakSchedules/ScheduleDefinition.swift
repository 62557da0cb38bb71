import Foundation
import SpeakAPI

/// What a schedule speaks and when: the body of `POST /v1/schedules`.
///
/// Either one time (`at`) or a recurrence (`rrule` from `start`, in `timeZone`). A value of this
/// type has passed every check that does not depend on the current time; `check(now:)` adds the
/// ones that do.
public struct ScheduleDefinition: Sendable, Hashable {
    /// When a schedule's slots fall.
    public enum Timing: Sendable, Hashable {
        /// One slot, at this instant.
        case once(at: Date)
        /// The slots of `rule`, expanded from `start` in the wall time of `timeZone`.
        case recurring(rule: RecurrenceRule, start: Date, timeZone: TimeZone)
    }

    /// What happens to slots that passed while the daemon was not running.
    public enum MissedPolicy: Sendable, Hashable {
        /// Every missed slot is passed over.
        case skip
        /// The most recent missed slot is spoken if it is at most this many seconds old (1…86400);
        /// older ones are passed over. Never more than one.
        case speakWithin(seconds: Int)
    }

    /// Longest `name`, in characters.
    public static let maxNameLength = 200
    /// Longest `speakWithin`, in seconds.
    public static let maxSpeakWithin = 86_400

    /// A label for people, if the client gave one.
    public let name: String?
    /// The announcement as the client wrote it (a JSON object), kept to be shown back.
    public let announcementJSON: JSONValue
    /// The announcement, decoded as `POST /v1/announcements` decodes a body, in the same pass
    /// as the schedule's own fields. The daemon still checks it against its limits, outputs and
    /// chimes before it stores the schedule.
    public let request: AnnouncementRequest
    public let timing: Timing
    public let missed: MissedPolicy
    /// Whether the schedule is paused: its slots still come and are recorded, as skipped with
    /// detail `paused`, but nothing is spoken. False unless the body says `"paused": true`.
    public let paused: Bool

    /// The announcement as canonical JSON (UTF-8, keys sorted), as `GET` shows it.
    public var announcement: Data { announcementJSON.encoded() }

    /// The slots of this definition on the time line.
    public var timeline: ScheduleTimeline { ScheduleTimeline(self) }

    /// Refuses a definition that would never speak again: `at` before `now`, or a rule with no
    /// slot at or after `now` (COUNT or UNTIL ended it, or it never matches).
    public func check(now: Date) throws(ScheduleError) {
        switch timing {
        case .once(let at):
            guard at >= now else {
                throw .noFutureSlot("at", "\(RFC3339.format(at)) is in the past (it is now \(RFC3339.format(now)))")
            }
        case .recurring(let rule, _, _):
            guard timeline.firstSlot(atOrAfter: now) == nil else { return }
            let why =
                if let count = rule.count {
                    "its COUNT=\(count) slots are all before then"
                } else if rule.until != nil {
                    "its UNTIL is before then"
                } else {
                    "the rule never matches from its start"
                }
            throw .noFutureSlot("rrule", "no slot at or after \(RFC3339.format(now)): \(why)")
        }
    }
}
