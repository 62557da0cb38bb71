import AudioOutput
import Foundation
import SpeakTestSupport
import SpeechRendering
import Testing

@Suite struct PeakLimiterTests {
    /// A sine of `amplitude` (full scale 1) at 440 Hz, 22050 Hz.
    static func sine(amplitude: Double, seconds: Double = 1) -> [Int16] {
        (0..<Int(seconds * 22050)).map {
            Int16((amplitude * 32767 * sin(2 * .pi * 440 * Double($0) / 22050)).rounded())
        }
    }

    @Test func aQuietSignalGetsTheGainExactly() {
        var limiter = PeakLimiter(gain: 2, sampleRate: 22050)
        let input = Self.sine(amplitude: 0.2)
        var output = input
        limiter.process(&output)
        for (a, b) in zip(input, output) { #expect(abs(Int(b) - 2 * Int(a)) <= 1) }
    }

    @Test func noSamplePassesTheCeilingAtSixDecibelsOver() {
        var limiter = PeakLimiter(gain: 2, sampleRate: 22050)
        var samples = Self.sine(amplitude: 0.99)
        // In chunks, as the speaker applies it.
        var limited: [Int16] = []
        for start in stride(from: 0, to: samples.count, by: 1000) {
            var chunk = Array(samples[start..<min(start + 1000, samples.count)])
            limiter.process(&chunk)
            limited += chunk
        }
        samples = limited
        let ceiling = Int(0.891 * 32767) + 1
        #expect(samples.allSatisfy { abs(Int($0)) <= ceiling })
        // And it is still loud: limited, not muted.
        #expect(samples.map { abs(Int($0)) }.max()! > ceiling - 200)
    }

    @Test func theMeterReadsASineAsLibebur128Should() throws {
        // ITU-R BS.1770: a 997 Hz sine at 0 dBFS in one channel reads -3.01 LUFS, so -20 dBFS reads -23.01.
        let samples = (0..<(22050 * 3)).map { Int16((0.1 * 32767 * sin(2 * .pi * 997 * Double($0) / 22050)).rounded()) }
        let loudness = try #require(LoudnessMeter.loudness(of: samples, format: AudioFormat(sampleRate: 22050)))
        #expect(abs(loudness - -23.01) < 0.2, "\(loudness)")
        #expect(abs(loudnessGain(from: -26, to: -20) - 1.995) < 0.01)
    }
}

@Suite struct ChimeLibraryTests {
    static let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Voices/chimes")

    @Test func theShippedChimesLoadAtTheTargetLoudness() throws {
        let format = AudioFormat(sampleRate: 22050)
        let library = try ChimeLibrary(directory: Self.shipped, format: format, loudness: -20)
        #expect(library.names == ["ding", "two-tone"])
        for name in library.names {
            let samples = try #require(library.chimes[name])
            let loudness = try #require(LoudnessMeter.loudness(of: samples, format: format))
            #expect(abs(loudness - -20) < 0.5, "\(name): \(loudness) LUFS")
        }
    }

    @Test(.timeLimit(.minutes(1))) func otherRatesAndChannelsAreConvertedAndABrokenFileNamed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chimes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let sox = try ChildProcess(
            "/usr/bin/sox",
            [
                "-n", "-r", "48000", "-c", "2", directory.appendingPathComponent("bell.flac").path, "synth", "0.8",
                "sine", "660",
            ],
            environment: ProcessInfo.processInfo.environment)
        #expect(await sox.wait(timeout: .seconds(20)) == 0)
        let library = try ChimeLibrary(directory: directory, format: AudioFormat(sampleRate: 22050), loudness: nil)
        let bell = try #require(library.chimes["bell"])
        #expect(abs(Double(bell.count) / 22050 - 0.8) < 0.01, "\(bell.count) samples")

        try Data("RIFF nonsense".utf8).write(to: directory.appendingPathComponent("broken.wav"))
        #expect {
            _ = try ChimeLibrary(directory: directory, format: AudioFormat(sampleRate: 22050), loudness: nil)
        } throws: { error in
            "\(error)".contains("broken.wav")
        }
    }

    /// A chime of NaN or infinite samples is refused naming it, as the daemon's start refuses it;
    /// one merely past full scale is clamped and loads.
    @Test func aFloatChimeWithNaNOrInfinityIsRefusedNamingItAndOnePastFullScaleClamped() throws {
        let format = AudioFormat(sampleRate: 22050)
        for (value, reason) in [(Float.nan, "NaN"), (.infinity, "infinite"), (-.infinity, "infinite")] {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chimes-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try FloatWAV.write(FloatWAV.tone(), to: directory.appendingPathComponent("fine.wav"))
            try FloatWAV.write(FloatWAV.tone(values: [value]), to: directory.appendingPathComponent("bad.wav"))
            for loudness in [-20.0, nil] {
                #expect { _ = try ChimeLibrary(directory: directory, format: format, loudness: loudness) } throws: {
                    "\($0)".contains("chime 'bad'") && "\($0)".contains("bad.wav") && "\($0)".contains(reason)
                }
            }
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chimes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FloatWAV.write(
            FloatWAV.tone(values: [Float](repeating: 3, count: 500) + [-1e38]),
            to: directory.appendingPathComponent("over.wav"))
        let library = try ChimeLibrary(directory: directory, format: format, loudness: nil)
        let over = try #require(library.chimes["over"])
        #expect(over.count == 22_050)
        let peak = over.map { abs(Int($0)) }.max() ?? 0
        #expect(peak > 0 && peak <= 29_196, "peak \(peak)")
        // The tone after the loud samples is still heard: clamping kept it from being scaled to nothing.
        let tone = over[5_000...].map { abs(Int($0)) }.max() ?? 0
        #expect(tone > 1_000, "the tone's peak \(tone)")
    }
}
