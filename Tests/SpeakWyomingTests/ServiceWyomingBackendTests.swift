import SpeakAPI
import SpeakService
import SpeakTestSupport
import SpeakWyoming
import SpeechRendering
import Testing

/// The Wyoming front over a fake service: it goes through the door's calls, and a refusal keeps
/// the service's error body, so a Wyoming `error` has the code the HTTP API would answer.
@Suite struct ServiceWyomingBackendTests {
    @Test func anAnnounceIsOneRecordingThroughTheDoor() async throws {
        let service = FakeSpeakService()
        let backend = ServiceWyomingBackend(service: service)
        // 0.5 s of stereo at 44.1 kHz: mixed to mono and brought to the engine's 22,050 Hz.
        let recording = WyomingRecording(
            format: AudioFormat(sampleRate: 44_100, channels: 2), samples: Array(repeating: 1_000, count: 44_100))
        let finished = try await backend.announce(
            recording, output: "hall", origin: AnnouncementOrigin(front: "wyoming", detail: "test"))
        #expect(finished.type == .finished && finished.success == true)
        #expect(
            service.calls.map(\.description) == [
                "acceptRecording 11025 samples to hall from wyoming", "finished fake-1",
            ])
    }

    @Test func aRefusedRenderKeepsTheServiceCode() async throws {
        let service = FakeSpeakService()
        let refusal = SpeakError(.notFound, name: "notFound", "no voice 'xx'", field: "voice")
        service.refuse("render", with: refusal)
        let backend = ServiceWyomingBackend(service: service)
        await #expect(throws: refusal.response) {
            _ = try await backend.render(WyomingSpeech(text: "Hello", voice: "xx"))
        }
    }
}
