import AudioOutput
import Foundation
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

/// A clip library directory made with sox, removed at the end.
struct ClipDirectory: ~Copyable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("clips-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// Makes `file` with sox: a sine tone of `frequency` Hz for `seconds` at `gain` dB, at `rate` Hz
    /// with `channels` channels.
    func tone(
        _ file: String, seconds: Double = 1, frequency: Int = 1000, gain: Double = -20, rate: Int = 44_100,
        channels: Int = 2
    ) async throws {
        let sox = try ChildProcess(
            "/usr/bin/sox",
            [
                "-n", "-r", "\(rate)", "-c", "\(channels)", url.appendingPathComponent(file).path, "synth",
                "\(seconds)",
                "sine", "\(frequency)", "gain", "\(gain)",
            ],
            environment: ProcessInfo.processInfo.environment)
        #expect(await sox.wait(timeout: .seconds(20)) == 0)
    }
}

extension FakeRenderer {
    /// The level of `level()`'s speech.
    static let speechLevel: Int16 = 3_000

    /// Speech made up for the clip renderer: each utterance is a constant level, 0.2 s per
    /// character, with one word event at sample 100 covering the whole text; a text with BAD in
    /// it is refused.
    static func level() -> FakeRenderer {
        FakeRenderer(sound: .level(speechLevel, perCharacter: 22_050 / 5), unspeakable: "BAD")
    }
}

@Suite(.timeLimit(.minutes(1))) struct ClipLibraryTests {
    static let format = AudioFormat(sampleRate: 22_050)

    @Test func clipsAreFoundByNameInEachFormatAndListed() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav", seconds: 1.5)
        try await directory.tone("brand.flac", seconds: 0.8, rate: 48_000, channels: 1)
        try await directory.tone("line.ogg", seconds: 2)
        try Data("not a clip".utf8).write(to: directory.url.appendingPathComponent("notes.txt"))
        let library = try ClipLibrary(directory: directory.url)
        for name in ["gong", "brand", "line"] { #expect(library.file(of: name) != nil, "\(name)") }
        #expect(library.file(of: "notes") == nil)
        #expect(library.file(of: "missing") == nil)
        #expect(library.file(of: "../\(directory.url.lastPathComponent)/gong") == nil)
        let listed = try library.list()
        #expect(listed.map(\.name) == ["brand", "gong", "line"])
        #expect(listed.map(\.file) == ["brand.flac", "gong.wav", "line.ogg"])
        #expect(abs(listed[1].duration - 1.5) < 0.01 && listed[1].sampleRate == 44_100 && listed[1].channels == 2)
        // Decoded at the engine's rate, one channel, whatever they were recorded in.
        let brand = try library.samples(of: try #require(library.file(of: "brand")), format: Self.format, loudness: nil)
        #expect(abs(Double(brand.count) / 22_050 - 0.8) < 0.01, "\(brand.count) samples")
        let line = try library.samples(of: try #require(library.file(of: "line")), format: Self.format, loudness: nil)
        #expect(abs(Double(line.count) / 22_050 - 2) < 0.02, "\(line.count) samples")
    }

    @Test func anUploadIsStoredAndWhatACrashLeftIsRemovedAtStart() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav", seconds: 0.5)
        let library = try ClipLibrary(directory: directory.url)
        let wav = try Data(contentsOf: directory.url.appendingPathComponent("gong.wav"))
        #expect(try library.store(wav, as: "chime", replace: false).listing.file == "chime.wav")
        // What a kill -9 between the write and the rename leaves, and a link of that name.
        let left = directory.url.appendingPathComponent(".upload-1234.part")
        try wav.write(to: left)
        let outside = try ClipDirectory()
        try await outside.tone("kept.wav", seconds: 0.2)
        try FileManager.default.createSymbolicLink(
            atPath: directory.url.appendingPathComponent(".upload-5678.part").path,
            withDestinationPath: outside.url.appendingPathComponent("kept.wav").path)
        #expect(try library.list().map(\.name) == ["chime", "gong"], "a temporary file is listed")
        #expect(library.removeLeftoverUploads() == [".upload-1234.part", ".upload-5678.part"])
        let remaining = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).sorted()
        #expect(remaining == ["chime.wav", "gong.wav"])
        #expect(FileManager.default.fileExists(atPath: outside.url.appendingPathComponent("kept.wav").path))
    }

    @Test func aClipIsBroughtToTheTargetLoudness() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("quiet.wav", gain: -35)
        try await directory.tone("loud.wav", gain: -3)
        let library = try ClipLibrary(directory: directory.url)
        for name in ["quiet", "loud"] {
            let samples = try library.samples(
                of: try #require(library.file(of: name)), format: Self.format, loudness: -20)
            let loudness = try #require(LoudnessMeter.loudness(of: samples, format: Self.format))
            #expect(abs(loudness - -20) < 0.5, "\(name): \(loudness) LUFS")
        }
    }

    @Test func eachClipIsListedWithItsLoudnessMeasuredAgainWhenReplaced() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("quiet.wav", gain: -35)
        try await directory.tone("loud.wav", gain: -3)
        try await directory.tone("blip.wav", seconds: 0.2)
        let library = try ClipLibrary(directory: directory.url)
        // A full-scale 1 kHz sine is -3.01 LUFS; each tone's peak is its gain below that.
        func loudness(_ listing: [ClipLibrary.Listing]) -> [String: Double?] {
            Dictionary(uniqueKeysWithValues: listing.map { ($0.name, $0.loudness) })
        }
        let first = loudness(try library.list())
        #expect(abs((first["quiet"] ?? nil).map { $0 - -38.01 } ?? 99) < 0.5, "\(first)")
        #expect(abs((first["loud"] ?? nil).map { $0 - -6.01 } ?? 99) < 0.5, "\(first)")
        #expect(first["blip"] == .some(nil), "too short to measure: \(first)")
        #expect(loudness(try library.list()) == first)

        // An upload that replaces a clip is measured as it is stored, and listed so.
        let quiet = try Data(contentsOf: directory.url.appendingPathComponent("quiet.wav"))
        let stored = try library.store(quiet, as: "loud", replace: true)
        #expect(stored.listing.loudness == first["quiet"] ?? nil)
        #expect(loudness(try library.list())["loud"] == first["quiet"])
    }

    @Test func aCorruptOrVanishedClipFailsNamingIt() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav")
        let library = try ClipLibrary(directory: directory.url)
        let gong = try #require(library.file(of: "gong"))
        try Data("RIFF nonsense".utf8).write(to: directory.url.appendingPathComponent("gong.wav"))
        #expect { _ = try library.samples(of: gong, format: Self.format, loudness: -20) } throws: { error in
            "\(error)".contains("clip 'gong'") && "\(error)".contains("gong.wav")
        }
        try FileManager.default.removeItem(at: directory.url.appendingPathComponent("gong.wav"))
        #expect { _ = try library.samples(of: gong, format: Self.format, loudness: -20) } throws: { error in
            "\(error)".contains("clip 'gong'") && "\(error)".contains("gone")
        }
        #expect(throws: ClipLibrary.Failure.self) {
            _ = try ClipLibrary(directory: directory.url.appendingPathComponent("missing"))
        }
    }
}

extension ClipLibraryTests {
    /// A clip that is a symbolic link out of the directory is no clip: not found, not listed,
    /// and one swapped for such a link after it was looked up is not played; a link to another
    /// clip of the directory is a clip.
    @Test func aClipLinkedOutOfTheDirectoryIsNotPlayed() async throws {
        let directory = try ClipDirectory()
        let outside = try ClipDirectory()
        try await directory.tone("gong.wav")
        try await outside.tone("secret.wav")
        let files = FileManager.default
        try files.createSymbolicLink(
            atPath: directory.url.appendingPathComponent("leak.wav").path,
            withDestinationPath: outside.url.appendingPathComponent("secret.wav").path)
        try files.createSymbolicLink(
            atPath: directory.url.appendingPathComponent("alias.wav").path, withDestinationPath: "gong.wav")
        let library = try ClipLibrary(directory: directory.url)
        #expect(library.file(of: "leak") == nil)
        #expect(library.file(of: "alias") != nil)
        #expect(try library.list().map(\.name) == ["alias", "gong"])
        let gong = try #require(library.file(of: "gong"))
        try files.removeItem(at: directory.url.appendingPathComponent("gong.wav"))
        try files.createSymbolicLink(
            atPath: directory.url.appendingPathComponent("gong.wav").path,
            withDestinationPath: outside.url.appendingPathComponent("secret.wav").path)
        #expect { _ = try library.samples(of: gong, format: Self.format, loudness: nil) } throws: {
            "\($0)".contains("clip 'gong'") && "\($0)".contains("out of the clip directory")
        }
    }

    /// A float WAV may hold NaN and infinities, which no sound is made of: such a clip fails to
    /// play naming it and the sample, and never traps; one merely past full scale is clamped.
    @Test func aFloatClipWithNaNOrInfinityFailsNamingItAndOnePastFullScaleIsClamped() throws {
        let directory = try ClipDirectory()
        let bad: [(String, Float, String)] = [
            ("nan", .nan, "NaN"), ("plus", .infinity, "infinite"), ("minus", -.infinity, "infinite"),
        ]
        for (name, value, _) in bad {
            try FloatWAV.write(
                FloatWAV.tone(values: [value]), to: directory.url.appendingPathComponent("\(name).wav"))
        }
        try FloatWAV.write(
            FloatWAV.tone(values: [Float](repeating: 7.5, count: 200) + [-1e30]),
            to: directory.url.appendingPathComponent("over.wav"))
        let library = try ClipLibrary(directory: directory.url)
        for (name, _, reason) in bad {
            for loudness in [-20.0, nil] {
                let file = try #require(library.file(of: name))
                #expect { _ = try library.samples(of: file, format: Self.format, loudness: loudness) } throws: {
                    "\($0)".contains("clip '\(name)'") && "\($0)".contains(reason)
                        && "\($0)".contains("sample 1000")
                }
            }
        }
        // Clamped to ±1 and then, as every clip, kept under -1 dBFS and brought to the loudness.
        let over = try library.samples(of: try #require(library.file(of: "over")), format: Self.format, loudness: -20)
        #expect(over.count == 22_050)
        let peak = over.map { abs(Int($0)) }.max() ?? 0
        #expect(peak > 0 && peak <= 29_196, "peak \(peak)")
        // The tone after the loud samples is still heard: clamping kept it from being scaled to nothing.
        let tone = over[5_000...].map { abs(Int($0)) }.max() ?? 0
        #expect(tone > 1_000, "the tone's peak \(tone)")
    }
}

@Suite(.timeLimit(.minutes(1))) struct ClipRendererTests {
    static func render(_ renderer: ClipRenderer, _ utterance: Utterance) async throws -> (PreparedUtterance, [PCMChunk])
    {
        let prepared = try await renderer.prepare(utterance)
        var chunks: [PCMChunk] = []
        for try await chunk in renderer.render(prepared) { chunks.append(chunk) }
        return (prepared, chunks)
    }

    @Test func clipsArePlayedInPlaceBetweenTheSpeech() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav", seconds: 1)
        let renderer = ClipRenderer(
            base: FakeRenderer.level(), library: try ClipLibrary(directory: directory.url), loudness: -20)
        let utterance = Utterance(spans: [.clip("gong"), Span("Lisboa", pauseAfter: 0.5), .clip("gong", mark: "end")])
        let (prepared, chunks) = try await Self.render(renderer, utterance)
        let speechFrames = 6 * 22_050 / 5
        let samples = chunks.flatMap(\.samples)
        #expect(samples.count == 22_050 + speechFrames + 22_050)
        // The clips are at the target already, so the speech's gain passes them by.
        #expect(chunks.prefix { $0.isLevelled }.reduce(0) { $0 + $1.samples.count } == 22_050)
        #expect(
            chunks.filter { !$0.isLevelled }.allSatisfy { $0.samples.allSatisfy { $0 == FakeRenderer.speechLevel } })
        let clip = Array(samples[0..<22_050])
        let loudness = try #require(LoudnessMeter.loudness(of: clip, format: renderer.format))
        #expect(abs(loudness - -20) < 0.5, "\(loudness) LUFS")
        // Events where each part starts, in the whole utterance's terms.
        let events = chunks.flatMap(\.events)
        #expect(events.map(\.kind) == [.clip, .word, .sentence, .clip, .mark])
        #expect(
            events.map(\.sample) == [0, 22_050 + 100, 22_050 + 3_000, 22_050 + speechFrames, 22_050 + speechFrames])
        #expect(events[0].name == "gong" && events[3].name == "gong" && events[4].clientMarkName == "end")
        #expect(prepared.textMap?.range(of: events[1]) == 0..<6)
    }

    @Test func unknownClipsAndEngineErrorsAreNamedInTheWhole() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav")
        let library = try ClipLibrary(directory: directory.url)
        let renderer = ClipRenderer(base: FakeRenderer.level(), library: library, loudness: nil)
        func field(_ spans: [Span], renderer: ClipRenderer = renderer) async -> String? {
            do {
                _ = try await renderer.prepare(Utterance(spans: spans))
                return nil
            } catch {
                return error.field
            }
        }
        #expect(await field([Span("Platform "), .clip("gong"), .clip("bell")]) == "spans[2].clip")
        #expect(await field([.clip("gong"), Span("fine "), Span("BAD")]) == "spans[2].text")
        let none = ClipRenderer(base: FakeRenderer.level(), library: nil, loudness: nil)
        #expect(await field([Span("Platform "), .clip("gong")], renderer: none) == "spans[1].clip")
        // Without clips the engines prepare it as they always did.
        let plain = try await renderer.prepare(Utterance("Platform four"))
        #expect((try? plain.input(as: String.self)) == "Platform four")
        // An engine given a clip refuses it rather than drop it.
        await #expect(throws: SpeechInputError.self) {
            _ = try await FakeRenderer.level().prepare(Utterance(spans: [.clip("gong")]))
        }
    }

    /// A render with clips can be kept on disk, and a clip file replaced is another key: the
    /// cache never plays the sound of a file since changed.
    @Test func aReplacedClipIsAnotherRenderKey() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav", seconds: 1)
        let renderer = ClipRenderer(
            base: FakeRenderer.level(), library: try ClipLibrary(directory: directory.url), loudness: -20)
        func key() async throws -> RenderKeyWriter {
            var key = RenderKeyWriter()
            key.write(try await renderer.prepare(Utterance(spans: [.clip("gong"), Span("Platform")])))
            return key
        }
        let before = try await key()
        #expect(before.isComplete)
        #expect(try await key().bytes == before.bytes)
        try await directory.tone("gong.wav", seconds: 1.2)
        let after = try await key()
        #expect(after.isComplete && after.bytes != before.bytes)
    }

    /// The speech's gain is the speech's own, when a clip comes first: its volume above 1.0 (a
    /// gain under the limiter) is the first spoken span's, not the clip's none.
    @Test func theGainIsTheSpeechsWhenAClipComesFirst() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav")
        let renderer = ClipRenderer(
            base: FakeRenderer.level(), library: try ClipLibrary(directory: directory.url), loudness: nil)
        var loud = SpeechAttributes()
        loud.volume = 1.5
        let prepared = try await renderer.prepare(
            Utterance(spans: [.clip("gong"), Span("Platform", attributes: loud)]))
        #expect(await LoudnessCalibration.playbackGain(for: prepared, calibration: nil) == 1.5)
    }

    @Test func aNaNClipFailsTheRenderNamingIt() async throws {
        let directory = try ClipDirectory()
        try FloatWAV.write(FloatWAV.tone(values: [.nan]), to: directory.url.appendingPathComponent("gong.wav"))
        let renderer = ClipRenderer(
            base: FakeRenderer.level(), library: try ClipLibrary(directory: directory.url), loudness: -20)
        let prepared = try await renderer.prepare(Utterance(spans: [Span("Platform"), .clip("gong")]))
        await #expect { for try await _ in renderer.render(prepared) {} } throws: {
            "\($0)".contains("clip 'gong'") && "\($0)".contains("NaN")
        }
    }

    @Test func aClipThatBreaksAfterItWasAcceptedFailsTheRender() async throws {
        let directory = try ClipDirectory()
        try await directory.tone("gong.wav")
        let renderer = ClipRenderer(
            base: FakeRenderer.level(), library: try ClipLibrary(directory: directory.url), loudness: -20)
        let prepared = try await renderer.prepare(Utterance(spans: [Span("Platform"), .clip("gong")]))
        try Data("RIFF nonsense".utf8).write(to: directory.url.appendingPathComponent("gong.wav"))
        var frames = 0
        await #expect { for try await chunk in renderer.render(prepared) { frames += chunk.samples.count } } throws: {
            "\($0)".contains("clip 'gong'")
        }
        #expect(frames == 8 * 22_050 / 5, "the speech before it was played")
    }
}
