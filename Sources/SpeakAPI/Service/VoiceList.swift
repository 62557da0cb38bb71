import SpeechModel

/// The body of `GET /v1/voices`.
public struct VoiceList: Sendable, Hashable, Codable {
    /// Every voice, with the BCP 47 tags it serves.
    public var voices: [VoiceInfo]

    /// - Parameter voices: every voice, with the BCP 47 tags it serves.
    public init(voices: [VoiceInfo]) {
        self.voices = voices
    }
}
