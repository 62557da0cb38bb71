import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension SpeakdIntegration {
    /// `speakd --wyoming` against Home Assistant's own client library (PyPI `wyoming`, in the
    /// environment `scripts/install-deps --test` makes), run by scripts/check-wyoming.py: describe,
    /// one-shot and streamed synthesis compared with `POST /v1/speech`, bad and oversized events,
    /// and the satellite's ping and announce, heard at a private PulseAudio null sink.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct WyomingTests {
        /// A loopback TCP port nothing listens on now.
        private static func waitForListener(_ port: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = UInt16(port).bigEndian
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                    }
                }
                close(descriptor)
                if connected { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            Issue.record("nothing listens on \(port)")
        }

        @Test func homeAssistantsClientSynthesizesStreamsAnnouncesAndIsRefusedSafely() async throws {
            let port = try SpeakdProcess.freeLoopbackPort()
            // A state directory, for the audit log the announcement is checked in.
            let state = URL(fileURLWithPath: "/tmp/speakd-wyoming-\(UUID().uuidString.prefix(8))")
            defer { try? FileManager.default.removeItem(at: state) }
            // With Piper too: describe lists both engines' voices, and a Piper synthesis is checked
            // against /v1/speech like espeak-ng's.
            let speakd = try await AudibleDaemon.start(
                arguments: [
                    "--wyoming", "tcp://127.0.0.1:\(port)", "--wyoming-satellite", "default", "--state-dir", state.path,
                ] + PiperTests.arguments)
            try await Self.waitForListener(port)
            let result = try await PythonTools.script(
                "check-wyoming.py",
                [
                    "--wyoming-port", "\(port)", "--http-port", "\(speakd.daemon.port)", "--token-file",
                    speakd.daemon.tokenFile, "--satellite", "--piper-voice", PiperTests.voice,
                ],
                timeout: .seconds(150))
            let events = speakd.events.events
            let running = speakd.daemon.isRunning
            let recording = await speakd.stop()
            #expect(result.status == 0, "check-wyoming.py:\n\(result.output)\nlog:\n\(speakd.daemon.log)")
            #expect(running, "speakd did not survive the bad events")
            // The announced second of 440 Hz was heard whole, as one announcement from the front.
            let announced = events.filter { $0.type == .finished && $0.text == "Home Assistant announcement" }
            #expect(announced.map(\.reason) == [.completed], "\(events.map(\.type))")
            let longest = recording.segments(minimumSilence: 0.2).map(\.duration).max() ?? 0
            #expect(longest > 0.9, "the longest sound heard was \(longest) s")
        }
    }
}
