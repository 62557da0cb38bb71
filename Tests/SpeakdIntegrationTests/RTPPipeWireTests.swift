import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// An RTP output found by PipeWire without configuration: a private PipeWire instance in the
    /// network namespace, its RTP source listening to the SAP group speakd announces on, plays
    /// the stream into a null sink whose monitor is recorded.
    @Suite(
        .serialized, .timeLimit(.minutes(2)),
        .enabled(
            if: rtpReceiversMissing == nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/pipewire"),
            "needs root (network namespaces), ip, python3 and PipeWire: scripts/install-deps --test"))
    struct RTPPipeWireTests {
        static let text = RTPOutputTests.text

        /// PipeWire's RTP source (0.3.65 listens to SAP itself), on RFC 2974's group for a
        /// 239.255.0.0/16 stream, where speakd announces by default. L16 at 48 kHz: 0.3.65 takes
        /// a G.711 stream too, but plays it stretched (docs/audio.md).
        static let rtpSource = """
            { name = libpipewire-module-rtp-source
              args = { sap.ip = 239.255.255.255 sap.port = 9875 sess.latency.msec = 100 } }
            """

        @Test("PipeWire's RTP source finds an L16 stream through SAP and plays it in full into a null sink")
        func pipeWireFindsTheStreamThroughSAP() async throws {
            let namespace = try NetworkNamespace()
            defer { namespace.remove() }
            let pipewire = try await PipeWireServer.start(
                sinkName: "ip_speaker", modules: Self.rtpSource, networkNamespace: namespace.name)
            let recorder: MonitorRecorder
            let speakd: SpeakdProcess
            do {
                recorder = try await MonitorRecorder.start(pipewire, sink: "ip_speaker")
                speakd = try await SpeakdProcess.start(
                    audio: "null",
                    arguments: [
                        "--output", "platform1=rtp://\(RTPOutputTests.group):5004?codec=l16&rate=48000&ptime=20&ttl=1",
                    ],
                    networkNamespace: namespace.name)
            } catch {
                await pipewire.stop()
                throw error
            }
            let answer = try await speakd.unixClient.send(
                "POST", "/v1/announcements?wait=true", json: ["text": Self.text, "output": "platform1"])
            #expect(String(decoding: answer.body, as: UTF8.self).contains(#""success":true"#))
            // What the output plays: the render at the daemon's loudness.
            let rendered = try await speakd.speech(["text": Self.text])
            // The source's own latency (sess.latency.msec) and the null sink's.
            try await Task.sleep(for: .milliseconds(500))
            let samples = await recorder.stop()
            let (status, _) = await speakd.stop()
            #expect(status == 0, "speakd exited with \(String(describing: status)); log:\n\(speakd.log)")
            let log = pipewire.log
            await pipewire.stop()

            let reference = AudioAnalysis(samples: rendered.samples, sampleRate: rendered.sampleRate)
            let heard = AudioAnalysis(samples: samples, sampleRate: recorder.sampleRate)
            let referenceSound = reference.soundingSegments(minimumSilence: 0.5)
            let heardSound = heard.soundingSegments(minimumSilence: 0.5)
            let expected = try #require(referenceSound.last?.end) - (referenceSound.first?.start ?? 0)
            let got =
                try #require(heardSound.last?.end, "PipeWire played nothing into the sink:\n\(log)")
                - (heardSound.first?.start ?? 0)
            // Its level where it sounds (the recording starts before speakd does).
            let heardRMS = heard.slice(from: heardSound.first?.start ?? 0, to: heardSound.last?.end ?? 0).rms
            let referenceRMS = reference.slice(
                from: referenceSound.first?.start ?? 0, to: referenceSound.last?.end ?? 0
            ).rms
            #expect(abs(got - expected) < 0.1, "heard \(got) s of sound, rendered \(expected) s: \(heardSound)")
            // L16 carries the samples as they are: as loud as the render, within 10 %.
            #expect(abs(heardRMS / referenceRMS - 1) < 0.1, "RMS \(heardRMS) against \(referenceRMS)")
        }
    }
}
