import AudioOutput
import Foundation
import SpeakTestSupport
import SpeechModel
import Testing

/// `auto` against a real sound server: a private PulseAudio server that answers.
@Suite struct AudioSinkSpecPulseTests {
    @Test(.timeLimit(.minutes(1)))
    func autoPicksPulseWhenAServerAnswers() async throws {
        try await withPulseServer { server in
            let sink = try await AudioSinkSpec.auto.makeSink(
                format: TestSignal.format, environment: ["PULSE_SERVER": server.serverString],
                autoALSADevice: "speakd_no_such_device")
            #expect(sink is PulseAudioSink)
            #expect((sink as? PulseAudioSink)?.server == server.serverString)
            #expect(sink.isAvailable)
            await sink.close()
        }
    }
}
