import AudioOutput
import Foundation
import SpeakTestSupport
import SpeechModel
import Testing

@Suite struct AudioSinkSpecTests {
    @Test(arguments: [
        ("auto", AudioSinkSpec.auto),
        ("pulse", .pulse),
        ("PULSE", .pulse),
        ("pulse:alsa_output.usb-headset.analog-stereo", .pulseSink(name: "alsa_output.usb-headset.analog-stereo")),
        ("null", .null),
        ("alsa", .alsa(device: "default")),
        ("alsa:hw:1,0", .alsa(device: "hw:1,0")),
        ("alsa:plughw:CARD=PCH,DEV=0", .alsa(device: "plughw:CARD=PCH,DEV=0")),
        ("wav:/tmp/out.wav", .wav(path: "/tmp/out.wav")),
        ("wav:relative/with:colon.wav", .wav(path: "relative/with:colon.wav")),
    ])
    func parses(value: String, expected: AudioSinkSpec) throws {
        #expect(try AudioSinkSpec(parsing: value) == expected)
    }

    @Test(arguments: ["auto", "pulse", "pulse:headset", "null", "alsa:default", "alsa:hw:0", "wav:/tmp/x.wav"])
    func descriptionParsesBack(value: String) throws {
        #expect(try AudioSinkSpec(parsing: value).description == value)
    }

    @Test(arguments: [
        (
            "foo",
            "unknown audio sink 'foo'; expected auto, pulse[:SINK], alsa[:DEVICE], wav:PATH, null or rtp://ADDRESS:PORT?…"
        ),
        (
            "",
            "unknown audio sink ''; expected auto, pulse[:SINK], alsa[:DEVICE], wav:PATH, null or rtp://ADDRESS:PORT?…"
        ),
        (
            "pulseaudio",
            "unknown audio sink 'pulseaudio'; expected auto, pulse[:SINK], alsa[:DEVICE], wav:PATH, null or rtp://ADDRESS:PORT?…"
        ),
        ("wav", "audio sink 'wav' needs a file; expected wav:PATH"),
        ("wav:", "audio sink 'wav:' needs a file; expected wav:PATH"),
        ("alsa:", "audio sink 'alsa:' names no ALSA device; expected alsa or alsa:DEVICE"),
        ("null:x", "audio sink 'null:x' takes no argument; expected null"),
        ("pulse:", "audio sink 'pulse:' names no PulseAudio sink; expected pulse or pulse:SINK"),
    ])
    func rejects(value: String, message: String) {
        #expect {
            try AudioSinkSpec(parsing: value)
        } throws: { error in
            let error = error as? AudioOutputError
            return error?.kind == "invalidSpec" && error?.sink == value && error?.description == message
        }
    }

    @Test func makesTheNamedSinks() async throws {
        let format = TestSignal.format
        #expect(try await AudioSinkSpec.null.makeSink(format: format).name == "null")
        #expect(try await AudioSinkSpec.pulse.makeSink(format: format) is PulseAudioSink)
        #expect(try await AudioSinkSpec.alsa(device: "hw:7").makeSink(format: format).name == "alsa:hw:7")
        #expect(try await AudioSinkSpec.wav(path: "/tmp/x.wav").makeSink(format: format).name == "wav:/tmp/x.wav")
    }

    @Test(.timeLimit(.minutes(1)))
    func autoFallsBackToALSA() async throws {
        let nowhere = "unix:\(FileManager.default.temporaryDirectory.path)/speakd-nowhere-\(getpid())/native"
        let sink = try await AudioSinkSpec.auto.makeSink(
            format: TestSignal.format, environment: ["PULSE_SERVER": nowhere], autoALSADevice: "null")
        #expect(sink.name == "alsa:null")
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func autoFailsClearlyWhenNothingWorks() async throws {
        let nowhere = "unix:\(FileManager.default.temporaryDirectory.path)/speakd-nowhere-\(getpid())/native"
        let error = await #expect(throws: AudioOutputError.self) {
            try await AudioSinkSpec.auto.makeSink(
                format: TestSignal.format, environment: ["PULSE_SERVER": nowhere],
                autoALSADevice: "speakd_no_such_device")
        }
        #expect(error?.kind == "noDevice")
        #expect(error?.sink == "auto")
        // Both candidates are named with the library's own reason.
        #expect(error?.message.contains("pulse: cannot open: Connection refused (server \(nowhere))") == true)
        #expect(
            error?.message.contains(
                "alsa:speakd_no_such_device: cannot open: speakd_no_such_device: No such file or directory") == true)
    }
}
