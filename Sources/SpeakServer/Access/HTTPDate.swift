import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The `Date` header's value (RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), formatted
/// when a response asks for it and kept for the rest of that second.
///
/// Hummingbird's `Application` keeps its own in a task that formats it again every second, so an
/// idle daemon was woken once a second for each listener; this one costs nothing while no request
/// comes.
final class HTTPDate: Sendable {
    private let cached = Mutex<(second: Int, text: String)>((-1, ""))

    /// The current second, formatted.
    var now: String {
        let second = time(nil)
        if let text = cached.withLock({ $0.second == second ? $0.text : nil }) { return text }
        let text = Self.format(second)
        cached.withLock { $0 = (second, text) }
        return text
    }

    /// `seconds` since the epoch as an IMF-fixdate.
    static func format(_ seconds: Int) -> String {
        var seconds = seconds
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let weekday = days[Int(parts.tm_wday)]
        let day = "\(weekday), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900)"
        return "\(day) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
