import AnnouncementQueue
import AudioOutput
import FoundationEssentials
import SpeakAPI
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What is played around and to the speech of an announcement: its chime and its loudness.
public struct AnnouncementSound: Sendable {
    /// The chimes, converted and normalised at start-up.
    public let chimes: ChimeLibrary
    /// The chime each priority plays when a request names none; a missing key plays none.
    public let defaultChimes: [AnnouncementPriority: String]
    /// The chime each priority plays after the speech when a request names none.
    public let defaultChimesAfter: [AnnouncementPriority: String]
    /// Brings speech to the target loudness; nil leaves it as the engine renders it.
    public let loudness: LoudnessCalibration?

    /// - Parameters:
    ///   - chimes: the chimes.
    ///   - defaultChimes: each priority's chime, every name one of `chimes`.
    ///   - defaultChimesAfter: each priority's chime after the speech, every name one of `chimes`.
    ///   - loudness: the speech loudness calibration; nil for `--loudness off`.
    public init(
        chimes: ChimeLibrary, defaultChimes: [AnnouncementPriority: String] = [:],
        defaultChimesAfter: [AnnouncementPriority: String] = [:], loudness: LoudnessCalibration? = nil
    ) {
        self.chimes = chimes
        self.defaultChimes = defaultChimes
        self.defaultChimesAfter = defaultChimesAfter
        self.loudness = loudness
    }

    /// No chimes and the engine's own loudness: the speaker as it was before either existed.
    public static func plain(format: AudioFormat) -> AnnouncementSound {
        AnnouncementSound(chimes: ChimeLibrary(format: format))
    }

    /// The samples of the chime `announcement` plays, or nil for none.
    func chime(for announcement: Announcement) -> [Int16]? {
        samples(of: announcement.delivery.chime, byPriority: defaultChimes, announcement.delivery.priority)
    }

    /// The samples of the chime `announcement` plays after its speech, or nil for none.
    func chimeAfter(for announcement: Announcement) -> [Int16]? {
        samples(of: announcement.delivery.chimeAfter, byPriority: defaultChimesAfter, announcement.delivery.priority)
    }

    /// The samples of the chime before the speech that `choice` names, or the priority's.
    func chime(_ choice: ChimeChoice, priority: AnnouncementPriority) -> [Int16]? {
        samples(of: choice, byPriority: defaultChimes, priority)
    }

    /// The samples of the chime after the speech that `choice` names, or the priority's.
    func chimeAfter(_ choice: ChimeChoice, priority: AnnouncementPriority) -> [Int16]? {
        samples(of: choice, byPriority: defaultChimesAfter, priority)
    }

    private func samples(
        of choice: ChimeChoice, byPriority defaults: [AnnouncementPriority: String], _ priority: AnnouncementPriority
    ) -> [Int16]? {
        switch choice {
        case .none: return nil
        case .named(let name): return chimes.chimes[name]
        case .priorityDefault: return defaults[priority].flatMap { chimes.chimes[$0] }
        }
    }
}
