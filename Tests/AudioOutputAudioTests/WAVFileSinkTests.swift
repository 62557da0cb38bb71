import AudioOutput
import Foundation
import SpeakTestSupport
import SpeechModel
import Testing

@Suite struct WAVFileSinkTests {
    let format = TestSignal.format

    func temporaryPath() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("speakd-wav-\(UUID().uuidString).wav")
    }

    @Test func writesAValidFileWhoseSamplesMatch() async throws {
        let url = temporaryPath()
        defer { try? FileManager.default.removeItem(at: url) }
        let tone = TestSignal.tone(seconds: 0.5)
        let sink = WAVFileSink(path: url.path, format: format)
        try await AudioPlayback().play(stream(tone), format: format, on: sink)

        // Valid after drain, before close.
        let drained = try WAVReader(contentsOf: url)
        #expect(drained.sampleRate == 22050)
        #expect(drained.channels == 1)
        #expect(drained.samples == tone.flatMap(\.samples))
        await sink.close()
        #expect(try WAVReader(contentsOf: url).samples == tone.flatMap(\.samples))
    }

    @Test func soxAcceptsIt() async throws {
        let url = temporaryPath()
        defer { try? FileManager.default.removeItem(at: url) }
        let sink = WAVFileSink(path: url.path, format: format)
        for chunk in TestSignal.tone(seconds: 1) { try await sink.write(chunk) }
        await sink.close()

        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "speakd-sox-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: output) }
        let sox = try ChildProcess(
            "/usr/bin/sox", ["--i", url.path], environment: ["PATH": "/usr/bin:/bin"], output: output.path)
        #expect(await sox.wait(timeout: .seconds(10)) == 0)
        let info = try String(contentsOf: output, encoding: .utf8)
        #expect(info.contains("Channels       : 1"), "\(info)")
        #expect(info.contains("Sample Rate    : 22050"), "\(info)")
        #expect(info.contains("Precision      : 16-bit"), "\(info)")
        #expect(info.contains("Duration       : 00:00:01.00 = 22050 samples"), "\(info)")
    }

    @Test func writesAfterCloseAppend() async throws {
        let url = temporaryPath()
        defer { try? FileManager.default.removeItem(at: url) }
        let first = TestSignal.tone(seconds: 0.1, frequency: 300)
        let second = TestSignal.tone(seconds: 0.2, frequency: 600)
        let sink = WAVFileSink(path: url.path, format: format)
        for chunk in first { try await sink.write(chunk) }
        await sink.close()
        for chunk in second { try await sink.write(chunk) }
        await sink.close()
        #expect(try WAVReader(contentsOf: url).samples == (first + second).flatMap(\.samples))
    }

    @Test func anUnwritablePathNamesTheFileAndTheReason() async throws {
        let path = "/nonexistent-speakd-dir/out.wav"
        let sink = WAVFileSink(path: path, format: format)
        let error = await #expect(throws: AudioOutputError.self) {
            try await sink.write(TestSignal.tone(seconds: 0.05)[0])
        }
        #expect(error?.description == "audio sink 'wav:\(path)': cannot open: \(path): No such file or directory")
        #expect(!sink.isAvailable)
    }
}
