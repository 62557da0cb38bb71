import EngineWorkers
import EspeakEngine
import Foundation
import SpeechModel
import SpeechRendering
import Testing
import WorkerRuntime

@Suite("Engine worker frames")
struct WorkerFrameTests {
    static let inputs = [
        EspeakInput(voice: "gmw/en", rate: 175, volume: 100, text: "Olá", isMarkup: false, switchesVoice: false),
        EspeakInput(
            voice: "roa/pt+speakd-kiosk", rate: 350, volume: 200,
            text: #"<speak><s>Next train to <voice name="gmw/en">Porto</voice></s></speak>"#, isMarkup: true,
            switchesVoice: true),
        EspeakInput(voice: "", rate: 0, volume: 0, text: "", isMarkup: true, switchesVoice: false),
    ]

    @Test(
        "Every frame survives encoding, a pipe and decoding",
        arguments: [
            WorkerFrame.ready(sampleRate: 22_050, sandbox: "no_new_privs, seccomp, landlock ABI 7"),
            .job(WorkerJob(Self.inputs[0], chunking: .streaming)),
            .job(WorkerJob(Self.inputs[1], chunking: .whole)),
            .job(WorkerJob(Self.inputs[2], chunking: .whole)),
            .job(WorkerJob(chunking: .streaming, input: Array(#"{"segments":[],"voice":"en_US-joe-medium"}"#.utf8))),
            .cancel,
            .pcm([0, 1, -1, .max, .min, 12_345]), .pcm([]),
            .events([
                EngineEvent(kind: .sentence, sample: 0, textPosition: 1),
                EngineEvent(kind: .word, sample: 1_102, textPosition: 1, length: 8),
                EngineEvent(kind: .mark, sample: 22_050, textPosition: 31, name: "café"),
            ]), .events([]), .done, .failure("espeak-ng: no voice 'xx'"),
            .forked(pid: 4_194_304), .exited(pid: 77, status: 0x0b), .exited(pid: 78, status: 0x0100),
        ])
    func roundTrip(_ frame: WorkerFrame) throws {
        let pipe = Pipe()
        try frame.write(to: pipe.fileHandleForWriting.fileDescriptor)
        try pipe.fileHandleForWriting.close()
        #expect(try WorkerFrame.read(from: pipe.fileHandleForReading.fileDescriptor) == frame)
        #expect(try WorkerFrame.read(from: pipe.fileHandleForReading.fileDescriptor) == nil)
    }

    @Test(
        "Truncated, oversized and unknown frames are errors that say what is wrong",
        arguments: [
            ([UInt8(ascii: "P"), 4, 0, 0, 0, 1, 2], "ended inside a frame"),
            ([UInt8(ascii: "P"), 3, 0, 0, 0, 1, 2, 3], "odd number of bytes"),
            ([UInt8(ascii: "R"), 2, 0, 0, 0, 1, 2], "not 4 or more"),
            ([UInt8(ascii: "Z"), 0, 0, 0, 0], "unknown frame kind"),
            ([UInt8(ascii: "J"), 0xFF, 0xFF, 0xFF, 0x7F], "over the limit"),
            ([UInt8(ascii: "J"), 2, 0, 0, 0, UInt8(ascii: "X"), UInt8(ascii: "{")], "starts with S or W"),
            // A job as utterance JSON (an older daemon's) is refused, never parsed.
            (
                [UInt8(ascii: "J"), 3, 0, 0, 0, UInt8(ascii: "S"), UInt8(ascii: "{"), UInt8(ascii: "}")],
                "of version 123; this build reads version 1"
            ),
            ([UInt8(ascii: "J"), 1, 0, 0, 0, UInt8(ascii: "W")], "of version none"),
            ([UInt8(ascii: "D"), 0, 0], "ended inside a frame"),
            ([UInt8(ascii: "K"), 2, 0, 0, 0, 1, 2], "a forked frame has 2 bytes, not 4"),
            ([UInt8(ascii: "X"), 4, 0, 0, 0, 1, 2, 3, 4], "an exited frame has 4 bytes, not 8"),
            ([UInt8(ascii: "E"), 3, 0, 0, 0, 1, 0, 0], "cut short"),
            ([UInt8(ascii: "E"), 15, 0, 0, 0, 3] + [UInt8](repeating: 0, count: 12) + [5, 0], "runs past the frame"),
        ])
    func malformed(_ bytes: [UInt8], message: String) throws {
        let pipe = Pipe()
        pipe.fileHandleForWriting.write(Data(bytes))
        try pipe.fileHandleForWriting.close()
        #expect {
            try WorkerFrame.read(from: pipe.fileHandleForReading.fileDescriptor)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test("espeak-ng's input survives its worker's encoding", arguments: inputs)
    func espeakInputRoundTrip(_ input: EspeakInput) throws {
        #expect(try EspeakInput(workerInput: input.workerInput) == input)
    }

    @Test(
        "An espeak-ng job's input that does not read as its layout is an error that says what is wrong",
        arguments: [
            ([0, 175, 0], "not 7 or more"),
            ([0, 175, 0, 100, 0, 2, 0, UInt8(ascii: "x")], "voice name runs past the frame"),
        ])
    func malformedEspeakInput(_ bytes: [UInt8], message: String) {
        #expect {
            try EspeakInput(workerInput: bytes)
        } throws: { error in
            "\(error)".contains(message)
        }
    }
}
