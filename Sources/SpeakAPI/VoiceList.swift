import SpeechModel

/// The body of `GET /v1/voices`.
public struct VoiceList: Sendable, Hashable, Codable {
    public var voices: [VoiceInfo]

    public init(voices: [VoiceInfo]) {
        self.voices = voices
    }
}
