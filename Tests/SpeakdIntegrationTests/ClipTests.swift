import AudioOutput
import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import SpeechRendering
import Testing

extension SpeakdIntegration {
    /// Recorded clips between the speech (`{"clip": "NAME"}` spans), heard at the sink.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct ClipTests {
        /// A clip library with `tone`: 1 kHz for 1 s, recorded 16 dB under the target, 44.1 kHz
        /// stereo (so it is mixed down, resampled and brought up); `long`: 4 s of 1 kHz; and
        /// `broken`: a file that is not audio.
        static func library() async throws -> URL {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("clips-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for (file, seconds) in [("tone.wav", 1.0), ("long.flac", 4.0)] {
                let sox = try ChildProcess(
                    "/usr/bin/sox",
                    [
                        "-n", "-r", "44100", "-c", "2", directory.appendingPathComponent(file).path, "synth",
                        "\(seconds)", "sine", "1000", "gain", "-37",
                    ],
                    environment: ProcessInfo.processInfo.environment)
                #expect(await sox.wait(timeout: .seconds(20)) == 0)
            }
            try Data("RIFF this is not audio".utf8).write(to: directory.appendingPathComponent("broken.wav"))
            return directory
        }

        /// How much of `samples`' energy is at `frequency` (Goertzel), from 0 to about 1 for a pure tone.
        static func toneShare(_ samples: ArraySlice<Int16>, frequency: Double, sampleRate: Int) -> Double {
            let coefficient = 2 * cos(2 * .pi * frequency / Double(sampleRate))
            var (previous, beforePrevious, energy) = (0.0, 0.0, 0.0)
            for sample in samples {
                let value = Double(sample)
                energy += value * value
                let next = value + coefficient * previous - beforePrevious
                beforePrevious = previous
                previous = next
            }
            let power = previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious
            return energy > 0 ? power / (energy * Double(samples.count) / 2) : 0
        }

        @Test(
            "[clip][speech][clip]: the clip's tone is heard in its places, as loud as the speech, with a clip event at each"
        )
        func heardInPlace() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("ClipTests.heardInPlace") { timing in
                let clips = try await Self.library()
                defer { try? FileManager.default.removeItem(at: clips) }
                let speakd = try await AudibleDaemon.start(arguments: ["--clips", clips.path, "--loudness", "-18"])
                let listed = try await speakd.unix.send("GET", "/v1/clips").decode(ClipList.self)
                #expect(listed.clips.map(\.name) == ["long", "tone"], "\(listed)")
                let text = "The next train to Lisboa Santa Apolónia departs from platform four."
                let id = try await speakd.accept([
                    "spans": [["clip": "tone"], ["text": text], ["clip": "tone"]], "chime": NSNull(),
                ])
                #expect(await speakd.events.waitForFinished([id]))
                let speech = try await speakd.reference(["text": text]).soundingDuration
                try await Task.sleep(for: .milliseconds(200))
                let recording = await speakd.stop()
                #expect(speakd.events.finished(id).map(\.reason) == [.completed])

                let analysis = recording.analysis
                let rate = analysis.sampleRate
                let sound = try #require(recording.segments(minimumSilence: 0.6).first)
                let start = analysis.index(at: sound.start)
                let end = analysis.index(at: sound.end)
                #expect(
                    abs(sound.duration - 2 - speech) < 0.5, "heard \(sound.duration) s, the speech alone \(speech) s")
                // The first and the last second are the clip's tone, the rest is speech.
                let first = analysis.samples[(start + rate / 10)..<(start + rate * 9 / 10)]
                let last = analysis.samples[(end - rate * 9 / 10)..<(end - rate / 10)]
                let middle = analysis.samples[(start + rate * 3 / 2)..<(end - rate * 3 / 2)]
                // A tone with a glitch in it (the sink ran dry while a loaded machine starved the
                // stream) is a figure at the sink: a miss runs the test once more.
                for (part, name) in [(first, "first"), (last, "last")] {
                    let share = Self.toneShare(part, frequency: 1000, sampleRate: rate)
                    timing.check(share > 0.9, "the \(name) second is 1 kHz for a share of \(share), not above 0.9")
                }
                #expect(Self.toneShare(middle, frequency: 1000, sampleRate: rate) < 0.2)
                // Recorded 16 dB under the target, the clip is heard as loud as the speech around it.
                let format = AudioFormat(sampleRate: rate)
                let clipLoudness = try #require(LoudnessMeter.loudness(of: Array(first), format: format))
                let speechLoudness = try #require(LoudnessMeter.loudness(of: Array(middle), format: format))
                print("measured: clip \(clipLoudness) LUFS, speech \(speechLoudness) LUFS")
                #expect(abs(clipLoudness - speechLoudness) <= 1, "clip \(clipLoudness), speech \(speechLoudness) LUFS")
                // A clip event where each clip is heard, around the speech's words.
                let progress = speakd.events.received.filter { $0.event.id == id && $0.event.type.isProgress }
                #expect(progress.first?.event.type == .clip && progress.last?.event.type == .clip)
                #expect(progress.filter { $0.event.type == .clip }.map(\.event.name) == ["tone", "tone"])
                #expect(progress.contains { $0.event.type == .word && $0.event.word == "Lisboa" })
                print(
                    "sound \(sound); events:",
                    progress.map {
                        "\($0.event.type) \($0.event.name ?? $0.event.word ?? "") \(recording.time(of: $0.receivedAt) ?? -1)"
                    })
                let lastClip = try #require(progress.last)
                let heard = try #require(recording.playedAt(analysis.duration(ofFrames: end - rate)))
                let early = (heard - lastClip.receivedAt).seconds
                timing.check(
                    abs(early) < 0.1, "the second clip event came \(early) s before its sound, not within 0.1 s")
            }
            #expect(misses.isEmpty, "\(misses)")
        }

        @Test(
            "An unknown clip is 422 naming it; a broken one fails its announcement with a detail; a cancel stops a clip"
        )
        func badClipsAndCancel() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("ClipTests.badClipsAndCancel") { timing in
                let clips = try await Self.library()
                defer { try? FileManager.default.removeItem(at: clips) }
                let speakd = try await AudibleDaemon.start(arguments: ["--clips", clips.path])
                let unknown = try await post(["spans": [["text": "Platform "], ["clip": "gong"]]], via: speakd.unix)
                #expect(unknown.status == 422)
                #expect(try unknown.decode(ErrorResponse.self).error.field == "spans[1].clip")
                let outside = try await post(["spans": [["clip": "../tone"]]], via: speakd.unix)
                #expect(
                    outside.status == 422 && (try? outside.decode(ErrorResponse.self).error.field) == "spans[0].clip")

                let broken = try await speakd.accept(["spans": [["text": "Platform four."], ["clip": "broken"]]])
                #expect(await speakd.events.waitForFinished([broken]))
                let failed = try #require(speakd.events.finished(broken).first)
                #expect(failed.reason == .failed && failed.detail?.contains("clip 'broken'") == true, "\(failed)")

                let long = try await speakd.accept(["spans": [["clip": "long"]], "chime": NSNull()])
                let clipHeard = try #require(await speakd.events.waitFor(.clip, of: long))
                try await Task.sleep(for: .milliseconds(700))
                #expect(try await speakd.unix.send("DELETE", "/v1/announcements/\(long)").status == 200)
                #expect(await speakd.events.waitForFinished([long]))
                let after = try await speakd.accept(["text": "Still speaking.", "chime": NSNull()])
                #expect(await speakd.events.waitForFinished([after]))
                let recording = await speakd.stop()
                #expect(speakd.events.finished(long).map(\.reason) == [.cancelled])
                #expect(speakd.events.finished(after).map(\.reason) == [.completed])
                // The long clip is heard from its clip event until the cancel, well before its 4 s.
                let analysis = recording.analysis
                let window = analysis.sampleRate / 20
                var frame = analysis.index(at: try #require(recording.time(of: clipHeard.receivedAt)))
                let onset = frame
                while frame + window <= analysis.samples.count,
                    Self.toneShare(
                        analysis.samples[frame..<(frame + window)], frequency: 1000, sampleRate: analysis.sampleRate)
                        > 0.9
                {
                    frame += window
                }
                let heard = Double(frame - onset) / Double(analysis.sampleRate)
                timing.check(
                    heard > 0.5 && heard < 2,
                    "the clip was heard for \(heard) s of 4 from its clip event, cancelled 0.7 s after it: not 0.5…2 s")
            }
            #expect(misses.isEmpty, "\(misses)")
        }

        @Test("A paused clip falls silent and, resumed, plays the rest: heard once in full, one finished")
        func pauseAndResumeAClip() async throws {
            let clips = try await Self.library()
            defer { try? FileManager.default.removeItem(at: clips) }
            let speakd = try await AudibleDaemon.start(arguments: ["--clips", clips.path])
            let id = try await speakd.accept(["spans": [["clip": "long"]], "chime": NSNull()])
            #expect(await speakd.events.waitFor(.clip, of: id) != nil)
            try await Task.sleep(for: .seconds(1))
            let pause = try await speakd.unix.send("POST", "/v1/announcements/\(id)/pause")
            #expect(pause.status == 200, "pause answered \(String(decoding: pause.body, as: UTF8.self))")
            try await Task.sleep(for: .milliseconds(1500))
            let resume = try await speakd.unix.send("POST", "/v1/announcements/\(id)/resume")
            #expect(resume.status == 200, "resume answered \(String(decoding: resume.body, as: UTF8.self))")
            #expect(await speakd.events.waitForFinished([id]))
            let recording = await speakd.stop()
            #expect(speakd.events.finished(id).map(\.reason) == [.completed])
            // Two stretches of the tone with the pause between them, together the clip's 4 s.
            let heard = recording.segments(minimumSilence: 1.0)
            #expect(heard.count == 2, "\(heard)")
            let total = heard.reduce(0) { $0 + $1.duration }
            #expect(abs(total - 4) < 0.1, "heard \(total) s of the 4 s clip")
            if heard.count == 2 { #expect(heard[1].start - heard[0].end > 1.2, "\(heard)") }
        }
    }
}

extension AudioAnalysis {
    /// The time in seconds of `frames` frames.
    fileprivate func duration(ofFrames frames: Int) -> Double { Double(frames) / Double(sampleRate) }
}
