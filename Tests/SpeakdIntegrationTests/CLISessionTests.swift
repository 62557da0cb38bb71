import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration.CLIThroughDaemonTests {
    @Test("speak session start|set|end and speak again through the daemon; errors name the flag or the cause")
    func sessionAndAgain() async throws {
        let speakd = try await AudibleDaemon.start()
        let start = try await speak(speakd, ["session", "start", "--rate", "0.8", "--idle-timeout", "30"])
        #expect(start.status == 0, "stderr: \(start.standardError)")
        let started = try WireFormat.decoder().decode(SessionChange.self, from: Data(start.standardOutput.utf8))
        #expect(started.change == .started && started.session.rate == 0.8 && started.session.idleTimeout == 30)

        let said = try await speak(speakd, ["--wait", "Platform four"])
        let original = try finishedEvent(in: said.standardOutput)
        let set = try await speak(speakd, ["session", "set", "--rate", "0.6"])
        #expect(set.status == 0 && set.standardOutput.contains(#""change":"changed""#), "\(set.standardError)")
        let again = try await speak(speakd, ["again"])
        #expect(again.status == 0, "stderr: \(again.standardError)")
        let repeats = try WireFormat.decoder().decode(RepeatResult.self, from: Data(again.standardOutput.utf8))
        #expect(repeats.announcements.map(\.repeatOf) == [original.id])

        let bad = try await speak(speakd, ["session", "set", "--rate", "9"])
        #expect(bad.status == 2 && bad.standardError.contains("--rate"), "\(bad.standardError)")
        let end = try await speak(speakd, ["session", "end"])
        #expect(end.status == 0 && end.standardOutput.contains(#""reason":"ended""#), "\(end.standardError)")
        let nothing = try await speak(speakd, ["again", "--to", "default"])
        #expect(nothing.status == 1 && nothing.standardError.contains("nothing to repeat"), "\(nothing.standardError)")
        let unknown = try await speak(speakd, ["session", "set", "--to", "lobby"])
        #expect(unknown.status == 2 && unknown.standardError.contains("lobby"), "\(unknown.standardError)")
        _ = await speakd.stop()
    }
}
