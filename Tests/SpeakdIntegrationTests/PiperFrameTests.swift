import Foundation
import SpeakdHarness
import SpeechRendering
import Testing
import WorkerRuntime

@testable import PiperEngine

/// The frames between the daemon and the Piper worker, each way, against the files the worker's
/// own tests check too (`workers/piper/tests/test_frames.py`, run by `scripts/test`): the daemon
/// writes `job.bin` byte for byte, which the worker reads there, and reads `worker.bin`, which
/// the worker writes byte for byte there.
@Suite struct PiperFrameTests {
    static let frames = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("workers/piper/tests/frames")

    @Test func theDaemonWritesTheJobFrameTheWorkerReads() throws {
        let input = PiperInput(
            voice: "en_US-joe-medium",
            segments: [
                .init(text: "Gate twelve, now boarding.", position: 0, lengthScale: 1.25, volume: 0.5, pauseAfter: 0.6),
                .init(text: "Olá, São Paulo", position: 27, lengthScale: 1.0, volume: 1.0, pauseAfter: 0.0),
            ])
        let written = PiperRenderer.jobFrame(input, chunking: .streaming)
        let expected = Array(try Data(contentsOf: Self.frames.appendingPathComponent("job.bin")))
        #expect(written == expected, "\(String(decoding: written.dropFirst(7), as: UTF8.self))")
    }

    @Test func theDaemonReadsTheFramesTheWorkerWrites() throws {
        var bytes = Array(try Data(contentsOf: Self.frames.appendingPathComponent("worker.bin")))[...]
        var frames: [WorkerFrame] = []
        while bytes.count >= 5 {
            let kind = bytes[bytes.startIndex]
            let length = (1...4).reduce(0) { $0 | Int(bytes[bytes.startIndex + $1]) << (8 * ($1 - 1)) }
            let payload = Array(bytes.dropFirst(5).prefix(length))
            frames.append(try WorkerFrame.decode(kind: kind, payload: payload))
            bytes = bytes.dropFirst(5 + length)
        }
        #expect(bytes.isEmpty)
        #expect(
            frames == [
                .events([
                    EngineEvent(kind: .word, sample: 441, textPosition: 0, length: 4),
                    EngineEvent(kind: .sentence, sample: 441, textPosition: 0),
                    EngineEvent(kind: .word, sample: 9_000, textPosition: 5, length: 6),
                ]),
                .pcm([0, 1_000, -1_000, 32_767, -32_768]),
                .done,
                .failure("ValueError: no voice"),
            ])
    }
}
