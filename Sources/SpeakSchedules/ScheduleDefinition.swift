import Foundation

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
    /// The announcement as a JSON object (UTF-8, keys sorted). It is not interpreted here: the
    /// daemon decodes it with its own strict announcement decoder.
    public let announcement: Data
    public let timing: Timing
    public let missed: MissedPolicy

    /// A definition from its parts, checked as a decoded body would be.
    /// - Parameters:
    ///   - announcement: a JSON object.
    ///   - timing: one time, or a rule with its start and zone.
    ///   - missed: what to do with slots missed while down.
    ///   - name: at most 200 characters.
    public init(announcement: Data, timing: Timing, missed: MissedPolicy = .skip, name: String? = nil)
        throws(ScheduleError)
    {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: announcement)
        } catch {
            throw .invalid("announcement", "must be a JSON object (the announcement to speak)")
        }
        try self.init(announcementObject: object, timing: timing, missed: missed, name: name)
    }

    init(announcementObject: Any, timing: Timing, missed: MissedPolicy, name: String?) throws(ScheduleError) {
        guard let object = announcementObject as? [String: Any],
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { throw .invalid("announcement", "must be a JSON object (the announcement to speak)") }
        if let name {
            guard !name.isEmpty else { throw .invalid("name", "is empty; leave it out instead") }
            guard name.count <= Self.maxNameLength else {
                throw .invalid("name", "is \(name.count) characters; at most \(Self.maxNameLength)")
            }
        }
        if case .speakWithin(let seconds) = missed, !(1...Self.maxSpeakWithin).contains(seconds) {
            throw .invalid("missed", "speakWithin must be a whole number of seconds from 1 to \(Self.maxSpeakWithin)")
        }
        self.announcement = data
        self.timing = timing
        self.missed = missed
        self.name = name
    }

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
