import SpeakAPI

#if canImport(Glibc)
import Glibc
#endif

/// How SSIP's settings become speakd's request fields.
enum SSIPMapping {
    /// SSIP's five priorities.
    static let priorities: Set<String> = ["important", "message", "text", "notification", "progress"]

    /// SSIP rate −100…100 as speakd's rate 0.5…2.0: two to the power rate/100, so −100 is half
    /// speed, 0 normal and 100 double, and each step is the same ratio.
    static func rate(_ value: Int) -> Double { clamp(exp2(Double(value) / 100), 0.5...2) }

    /// SSIP pitch −100…100 as speakd's pitch multiplier: an octave down to an octave up,
    /// two to the power pitch/100.
    static func pitch(_ value: Int) -> Double { clamp(exp2(Double(value) / 100), 0.5...2) }

    /// SSIP volume −100…100 as speakd's volume 0…2: −100 silent, 0 as calibrated, 100 twice
    /// the amplitude (raised after the engine, with a limiter).
    static func volume(_ value: Int) -> Double { clamp(1 + Double(value) / 100, 0...2) }

    /// `all` speaks every punctuation mark, `none` none; `some` and `most` leave speakd's default.
    static func punctuation(_ mode: String) -> Bool? {
        switch mode {
        case "all": true
        case "none": false
        default: nil
        }
    }

    /// SSIP's priority as speakd's: `important` is `default`, everything else `low`, all queued,
    /// so SSIP traffic never cuts off speakd's own announcements and waits behind them.
    /// speech-dispatcher's rules between SSIP's five priorities are the replace groups below,
    /// and `important` stopping a speaking message (`SSIPHub`); docs/ssip.md has the table.
    static func priority(_ ssip: String) -> AnnouncementPriority {
        ssip == "important" ? .default : .low
    }

    /// The replace group of SSIP's priorities whose newest message replaces the older ones of
    /// every client, waiting or speaking: `text`, `notification` and `progress`.
    static func replaceGroup(_ ssip: String) -> String? {
        switch ssip {
        case "text", "notification", "progress": "ssip-\(ssip)"
        default: nil
        }
    }

    /// The other priorities' groups a message of `ssip` replaces, as speech-dispatcher cancels
    /// them: `message` cancels `text` and `notification`, everything but `notification`
    /// cancels `notification`. `progress` is never cancelled by another priority, so the last
    /// of a series is always heard.
    static func replaces(_ ssip: String) -> [String] {
        switch ssip {
        case "message": ["ssip-text", "ssip-notification"]
        case "important", "text", "progress": ["ssip-notification"]
        default: []
        }
    }

    /// `notification` is dropped when anything but an older notification speaks or waits.
    static func dropIfBusy(_ ssip: String) -> Bool { ssip == "notification" }

    /// Whether a message of `ssip` stops a speaking SSIP message of `other`: `important` stops
    /// every other but `progress` (never cancelled, see `replaces`); the rest is `replaces`.
    static func stops(_ ssip: String, speaking other: String) -> Bool {
        ssip == "important" && other != "important" && other != "progress"
    }

    private static func clamp(_ value: Double, _ range: ClosedRange<Double>) -> Double {
        min(max(value, range.lowerBound), range.upperBound)
    }
}
