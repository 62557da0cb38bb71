import Foundation
import SpeakTestSupport
import Testing

extension SpeakdIntegration {
    /// The private espeak-ng data directory (the overlay with the voice variants) lives only as
    /// long as the daemon.
    @Suite(.serialized, .timeLimit(.minutes(1)))
    struct DataOverlayTests {
        @Test("speakd removes its espeak-ng data overlay from its runtime directory when it exits")
        func overlayRemovedAtExit() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let runtime = daemon.directory.appendingPathComponent("runtime").path
            func overlays() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: runtime).filter { $0.hasPrefix("speakd-espeak-") }
            }
            let running = try overlays()
            #expect(running.count == 1, "\(running)")
            #expect(running.first?.hasPrefix("speakd-espeak-\(daemon.pid)-") == true, "\(running)")
            let (status, _) = await daemon.stop()
            #expect(status == 0)
            let after = try overlays()
            #expect(after.isEmpty, "left behind: \(after)")
        }
    }
}
