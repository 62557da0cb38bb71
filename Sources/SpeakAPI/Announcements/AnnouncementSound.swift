import SpeechModel

/// Which chime an announcement plays before its speech (`"chime"` on the wire), or after it
/// (`"chimeAfter"`).
public enum ChimeChoice: Sendable, Hashable {
    /// The key is absent: the chime configured for the announcement's priority, if any.
    case priorityDefault
    /// `"chime": null`: none.
    case none
    /// `"chime": "ding"`: the chime of that name (`GET /v1/chimes`).
    case named(String)
}

/// Speaking an announcement more than once (`"repeat": {"count": 2, "gap": 1.5}`), as one
/// announcement: one `finished`, and cancelling stops every repeat.
public struct AnnouncementRepeat: Sendable, Hashable, Codable {
    /// The most times an announcement may be spoken.
    public static let countRange = 1...10
    /// The most seconds between repeats.
    public static let maximumGap = 10.0

    /// How many times it is spoken, 1 … 10.
    public var count: Int
    /// Seconds of silence between one repeat's end and the next one's start, 0 … 10.
    public var gap: Double

    /// - Parameters:
    ///   - count: how many times it is spoken.
    ///   - gap: seconds of silence between repeats.
    public init(count: Int, gap: Double = 1) {
        self.count = count
        self.gap = gap
    }

    private enum CodingKeys: String, CodingKey {
        case count, gap
    }

    public init(from decoder: any Decoder) throws {
        let unknown = try decoder.unknownKeys(known: ["count", "gap"])
        if let key = unknown.first {
            throw SpeechInputError.malformed(field: "repeat.\(key)", "unknown key '\(key)'; repeat has count and gap")
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        do {
            count = try container.decode(Int.self, forKey: .count)
        } catch {
            throw SpeechInputError.malformed(field: "repeat.count", "repeat.count must be a whole number from 1 to 10")
        }
        do {
            gap = try container.decodeIfPresent(Double.self, forKey: .gap) ?? 1
        } catch {
            throw SpeechInputError.malformed(field: "repeat.gap", "repeat.gap must be a number of seconds from 0 to 10")
        }
    }

    /// Checks the ranges; the error names the field.
    public func validate() throws(SpeechInputError) {
        guard Self.countRange.contains(count) else {
            throw .outOfRange(field: "repeat.count", "repeat.count must be from 1 to 10, not \(count)")
        }
        guard gap.isFinite, gap >= 0, gap <= Self.maximumGap else {
            throw .outOfRange(field: "repeat.gap", "repeat.gap must be a number of seconds from 0 to 10, not \(gap)")
        }
    }
}

/// The body of `GET /v1/chimes`: the names a request's `"chime"` may take.
public struct ChimeList: Sendable, Hashable, Codable {
    /// The chime names, sorted.
    public var chimes: [String]

    /// - Parameter chimes: the chime names.
    public init(chimes: [String]) {
        self.chimes = chimes
    }
}

/// The body of `GET /v1/clips`: the recorded clips a span may play (`{"clip": "NAME"}`).
public struct ClipList: Sendable, Hashable, Codable {
    /// The clips, by name; empty when the daemon has no clip library (`--clips`).
    public var clips: [ClipInfo]

    /// - Parameter clips: the clips, by name.
    public init(clips: [ClipInfo]) {
        self.clips = clips
    }
}

/// One recorded clip of the library.
public struct ClipInfo: Sendable, Hashable, Codable {
    /// What a span names it by.
    public var name: String
    /// Its file's name in the clip directory.
    public var file: String
    /// Its length in seconds, as recorded.
    public var duration: Double
    /// Its recorded sample rate and channels (it is played at the engine's).
    public var sampleRate: Int
    public var channels: Int
    /// Its integrated loudness as recorded, in LUFS (EBU R 128), measured once per file; absent
    /// when the clip is too short (under 0.4 s) or too quiet to measure. A clip is played at the
    /// announcements' loudness whatever it is.
    public var loudness: Double?

    /// - Parameters: see the properties of the same names.
    public init(
        name: String, file: String, duration: Double, sampleRate: Int, channels: Int, loudness: Double? = nil
    ) {
        self.name = name
        self.file = file
        self.duration = duration
        self.sampleRate = sampleRate
        self.channels = channels
        self.loudness = loudness
    }
}

/// The answer to `PUT /v1/clips/{name}`: the clip as stored.
public struct ClipStored: Sendable, Hashable, Codable {
    /// The clip as `GET /v1/clips` now lists it.
    public var clip: ClipInfo
    /// Whether a clip of that name was replaced (`?replace=true`).
    public var replaced: Bool

    /// - Parameters: see the properties of the same names.
    public init(clip: ClipInfo, replaced: Bool) {
        self.clip = clip
        self.replaced = replaced
    }
}
