import AnnouncementQueue
import AudioOutput

/// A private output's speaker: a private announcement finishes `failed` at once, before anything
/// is rendered, while the output's headphones are known to be unplugged, instead of playing into
/// nothing (or, on a sink that falls back to its speaker port, aloud). Unknown presence (a sink
/// without jack detection) plays as before; so does every announcement that is not private.
struct HeadsetGatedSpeaker: AnnouncementSpeaker {
    let speaker: any AnnouncementSpeaker
    let presence: HeadsetPresence

    /// Why a private announcement was not played.
    struct HeadsetAbsent: Error, CustomStringConvertible {
        let output: String
        var description: String {
            "no headset is plugged into output '\(output)' (its sink reports the headphones unplugged); "
                + "a private announcement is not played"
        }
    }

    func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        try check(announcement)
        return try await speaker.speak(announcement)
    }

    func speak(_ announcement: Announcement, listener: SpeechListener) async throws -> SpeechOutcome {
        try check(announcement)
        return try await speaker.speak(announcement, listener: listener)
    }

    private func check(_ announcement: Announcement) throws(HeadsetAbsent) {
        if announcement.delivery.isPrivate, presence.present == false {
            throw HeadsetAbsent(output: presence.output)
        }
    }

    func waitUntilAvailable() async {
        await speaker.waitUntilAvailable()
    }

    func pause(atWordEnd: Bool) async -> Bool {
        await speaker.pause(atWordEnd: atWordEnd)
    }

    func resume() -> Bool {
        speaker.resume()
    }
}
