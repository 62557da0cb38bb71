import AudioOutput
import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import SpeechRendering
import Testing

extension SpeakdIntegration {
    /// Chimes, ducking, loudness and repeats, heard on the private server's null sink.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct SoundTests {
        @Test("a chime is heard before the speech, and a cancel during the chime silences both")
        func chime() async throws {
            let speakd = try await AudibleDaemon.start()
            let chimes = try await speakd.unix.send("GET", "/v1/chimes").decode(ChimeList.self)
            #expect(chimes.chimes == ["ding", "two-tone"])

            let reference = try await speakd.reference(["text": "Doors closing"])
            let (id, heard) = try await heardToTheEnd(speakd, ["text": "Doors closing", "chime": "ding"])

            // Cancelled 0.3 s into a long announcement's 0.85 s chime: nothing of its speech is heard.
            let (long, cancelAt) = try await cancelLongAnnouncement(
                speakd, extra: ["chime": "two-tone"], after: .milliseconds(300))
            try await Task.sleep(for: .milliseconds(600))
            let recording = await speakd.stop()

            let rate = Double(recording.analysis.sampleRate)
            let analysis = AudioAnalysis(samples: heard, sampleRate: recording.analysis.sampleRate)
            let segments = analysis.soundingSegments(
                minimumSilence: 0.15, silenceLevel: Recording.silenceLevel, minimumSound: 0.05)
            let first = try #require(segments.first, "nothing heard")
            // The first 0.3 s of sound is the ding (880 Hz and its octave); the last 0.3 s is speech.
            let chimePart = Array(heard[Int(first.start * rate)..<Int((first.start + 0.3) * rate)])
            let last = try #require(segments.last)
            let speechPart = Array(heard[Int((last.end - 0.3) * rate)..<Int(last.end * rate)])
            #expect(toneShare(chimePart, frequencies: [880, 1760], rate: rate) > 0.6)
            #expect(toneShare(speechPart, frequencies: [880, 1760], rate: rate) < 0.2)
            let total = (segments.last!.end - first.start)
            #expect(
                abs(total - (reference.soundingDuration + 0.6)) < 0.35,
                "heard \(total) s; speech \(reference.soundingDuration) s + chime 0.6 s")

            let finished = speakd.events.finished(long).first
            #expect(finished?.reason == .cancelled)
            expectSilence(in: recording, from: cancelAt)
            expectExactlyOneFinished([id, long], in: speakd.events.events)
        }

        @Test("a chime after the speech is heard after it, before finished; a cancel during the speech stops it too")
        func chimeAfter() async throws {
            // The priority's chime after (--chime-after-default) for the first, a request's for the second.
            let speakd = try await AudibleDaemon.start(arguments: ["--chime-after-default", "ding"])
            let reference = try await speakd.reference(["text": "Doors closing"])
            // Taken when finished arrives: the chime must have been played by then.
            let (id, heard) = try await heardToTheEnd(speakd, ["text": "Doors closing"])

            let (long, cancelAt) = try await cancelLongAnnouncement(
                speakd, extra: ["chimeAfter": "ding"], after: .milliseconds(800))
            // Long enough for the rest of the speech and the chime, had the cancel not stopped them.
            try await Task.sleep(for: .seconds(2))
            let recording = await speakd.stop()

            let rate = Double(recording.analysis.sampleRate)
            let analysis = AudioAnalysis(samples: heard, sampleRate: recording.analysis.sampleRate)
            let segments = analysis.soundingSegments(
                minimumSilence: 0.1, silenceLevel: Recording.silenceLevel, minimumSound: 0.05)
            let first = try #require(segments.first, "nothing heard")
            let last = try #require(segments.last)
            // Speech first, the ding (880 Hz and its octave) last, in a sound of its own.
            let speechPart = Array(heard[Int(first.start * rate)..<Int((first.start + 0.3) * rate)])
            let chimePart = Array(heard[Int(last.start * rate)..<min(heard.count, Int((last.start + 0.3) * rate))])
            #expect(segments.count >= 2, "\(segments)")
            #expect(toneShare(speechPart, frequencies: [880, 1760], rate: rate) < 0.2)
            #expect(toneShare(chimePart, frequencies: [880, 1760], rate: rate) > 0.6)
            #expect(last.start - first.start > reference.soundingDuration * 0.9, "\(segments)")
            #expect(speakd.events.finished(id).first?.success == true)

            #expect(speakd.events.finished(long).first?.reason == .cancelled)
            expectSilence(in: recording, from: cancelAt)
            expectExactlyOneFinished([id, long], in: speakd.events.events)
        }

        /// `auto` finds the private server first: its stream is tagged and released like `pulse`'s.
        /// With `--duck music` speakd lowers the music itself, without the server's module.
        @Test(
            "a music stream is ducked while speakd speaks and restored after, by module-role-ducking or by speakd's own --duck",
            arguments: ["pulse", "auto", "pulse --duck"])
        func ducking(mode: String) async throws {
            let ownDucking = mode.hasSuffix("--duck")
            let speakd = try await AudibleDaemon.start(
                audio: String(mode.prefix { $0 != " " }),
                arguments: ownDucking ? ["--duck", "music", "--duck-level", "0.1"] : [])
            if !ownDucking {
                let status = try await speakd.pulse.run(
                    "/usr/bin/pactl",
                    [
                        "load-module", "module-role-ducking", "trigger_roles=announcement", "ducking_roles=music",
                        "volume=10%",
                    ])
                try #require(status == 0)
            }
            let tone = speakd.daemon.directory.appendingPathComponent("music.wav")
            let sox = try ChildProcess(
                "/usr/bin/sox",
                ["-n", "-r", "22050", "-c", "1", "-b", "16", tone.path, "synth", "60", "sine", "330", "gain", "-12"],
                environment: ProcessInfo.processInfo.environment, output: "/dev/null")
            #expect(await sox.wait(timeout: .seconds(10)) == 0)
            let music = try ChildProcess(
                "/usr/bin/paplay", ["--property=media.role=music", tone.path],
                environment: speakd.pulse.clientProcessEnvironment, output: "/dev/null")
            defer { music.send(SIGKILL) }
            // speakd's stream from start-up is released within 0.5 s; the music plays undisturbed.
            try await Task.sleep(for: .seconds(1.5))
            let rate = Double(speakd.recorder.sampleRate)
            let beforeEnd = speakd.recorder.recordedFrames
            let id = try await speakd.accept([
                "text": "Mind the gap", "chime": NSNull(), "repeat": ["count": 2, "gap": 1.5],
            ])
            _ = try #require(await speakd.events.waitFor(.started, of: id))
            try await Task.sleep(for: .milliseconds(300))
            let inputs = try await sinkInputs(speakd.pulse)
            #expect(inputs.contains("media.role = \"announcement\""), "\(inputs)")
            #expect(await speakd.events.waitForFinished([id]))
            let finishedAt = speakd.recorder.recordedFrames
            try await Task.sleep(for: .seconds(1.5))
            let samples = speakd.recorder.samplesSoFar()
            _ = await speakd.stop()

            let before = rms(samples[(beforeEnd - Int(0.5 * rate))..<beforeEnd])
            // The quietest 100 ms while it spoke (the gap between repeats): music alone, ducked.
            var quietest = Double.infinity
            var index = beforeEnd
            while index + Int(0.1 * rate) <= finishedAt {
                quietest = min(quietest, rms(samples[index..<(index + Int(0.1 * rate))]))
                index += Int(0.05 * rate)
            }
            let after = rms(samples[(samples.count - Int(0.5 * rate))..<samples.count])
            #expect(before > 0.05, "the music was not heard before: RMS \(before)")
            #expect(quietest < before * 0.3, "not ducked: music \(before), quietest while speaking \(quietest)")
            #expect(abs(after - before) < before * 0.15, "not restored: before \(before), after \(after)")
        }

        @Test("five voices, pitches and volumes are heard at the target loudness (±1 LU), none clipped")
        func loudness() async throws {
            let speakd = try await AudibleDaemon.start(arguments: ["--loudness", "-18"])
            let text = "Passengers for the airport should change at the next station for the express service."
            let cases: [(body: [String: Any], target: Double)] = [
                (["text": text], -18),
                (["text": text, "language": "de", "pitch": 1.5], -18),
                (["text": text, "language": "fr", "pitch": 0.6, "rate": 1.3], -18),
                (["text": text, "language": "es", "volume": 0.5], -18 - 6.02),
                (["text": text, "language": "en-GB", "pitch": 1.3, "volume": 1.4], -18 + 2.92),
                // Volume 2.0 (+6 dB) pushes the peaks into the limiter: measured for clipping only.
                (["text": text, "volume": 2.0], .nan),
            ]
            var measured: [(Double?, Double)] = []
            var clipped = 0
            for (body, target) in cases {
                let start = speakd.recorder.recordedFrames
                let id = try await speakd.accept(body.merging(["chime": NSNull()]) { $1 })
                #expect(await speakd.events.waitForFinished([id]))
                try await Task.sleep(for: .milliseconds(150))
                let samples = Array(speakd.recorder.samplesSoFar()[start...])
                clipped += samples.filter { $0 == .max || $0 == .min }.count
                measured.append((LoudnessMeter.loudness(of: samples, format: AudioFormat(sampleRate: 22050)), target))
            }
            _ = await speakd.stop()
            for (index, (loudness, target)) in measured.enumerated() where !target.isNaN {
                let loudness = try #require(loudness, "case \(index): nothing measured")
                #expect(abs(loudness - target) <= 1, "case \(index): \(loudness) LUFS, target \(target)")
            }
            #expect(clipped == 0)
            // The limiter holds the loudest under the ceiling but it is still louder than volume 1.0.
            let loudest = try #require(measured.last?.0)
            #expect(loudest > -18 + 2, "volume 2.0 measured \(loudest) LUFS")
        }

        @Test("repeats are heard N times with one finished; a cancel stops the rest")
        func repeats() async throws {
            let speakd = try await AudibleDaemon.start()
            let reference = try await speakd.reference(["text": "Mind the gap"])
            let id = try await speakd.accept(["text": "Mind the gap", "repeat": ["count": 3, "gap": 0.8]])
            #expect(await speakd.events.waitForFinished([id]))
            let afterFirst = speakd.recorder.recordedFrames

            let cancelled = try await speakd.accept(["text": "Mind the gap", "repeat": ["count": 5, "gap": 0.8]])
            _ = try #require(await speakd.events.waitFor(.started, of: cancelled))
            try await Task.sleep(for: .seconds(reference.soundingDuration + 0.4))
            #expect(try await speakd.unix.send("DELETE", "/v1/announcements/\(cancelled)").status == 200)
            #expect(await speakd.events.waitForFinished([cancelled]))
            try await Task.sleep(for: .seconds(1.5))
            let recording = await speakd.stop()

            let rate = recording.analysis.sampleRate
            let first = AudioAnalysis(samples: Array(recording.analysis.samples[..<afterFirst]), sampleRate: rate)
                .soundingSegments(minimumSilence: 0.5, silenceLevel: Recording.silenceLevel, minimumSound: 0.05)
            #expect(first.count == 3, "heard \(first)")
            for segment in first {
                #expect(
                    abs(segment.duration - reference.soundingDuration) < 0.2,
                    "\(segment) vs \(reference.soundingDuration)")
            }
            let second = AudioAnalysis(samples: Array(recording.analysis.samples[afterFirst...]), sampleRate: rate)
                .soundingSegments(minimumSilence: 0.5, silenceLevel: Recording.silenceLevel, minimumSound: 0.05)
            #expect((1...2).contains(second.count), "heard \(second) of a cancelled five")
            #expect(speakd.events.finished(id).first?.success == true)
            #expect(speakd.events.finished(cancelled).first?.reason == .cancelled)
            expectExactlyOneFinished([id, cancelled], in: speakd.events.events)
        }

        @Test("bad chimes and repeats are 422 naming the field; an unknown configured chime stops the start")
        func refused() async throws {
            let speakd = try await AudibleDaemon.start()
            let bodies: [([String: Any], String)] = [
                (["text": "x", "chime": "gong"], "chime"),
                (["text": "x", "chime": 3], "chime"),
                (["text": "x", "chimeAfter": "gong"], "chimeAfter"),
                (["text": "x", "chimeAfter": ""], "chimeAfter"),
                (["text": "x", "repeat": ["count": 0]], "repeat.count"),
                (["text": "x", "repeat": ["count": 11]], "repeat.count"),
                (["text": "x", "repeat": ["count": 2, "gap": 10.5]], "repeat.gap"),
                (["text": "x", "repeat": ["count": 2, "gap": "long"]], "repeat.gap"),
                (["text": "x", "repeat": ["count": 2, "pause": 1]], "repeat.pause"),
            ]
            for (body, field) in bodies {
                let response = try await post(body, via: speakd.unix)
                #expect(response.status == 422, "\(body): \(response.status)")
                #expect(
                    response.error?.error.field == field, "\(body): \(String(decoding: response.body, as: UTF8.self))")
            }
            _ = await speakd.stop()

            await #expect(throws: (any Error).self) {
                _ = try await SpeakdProcess.start(
                    audio: "null", arguments: ["--chime-high", "gong"], timeout: .seconds(10))
            }
            await #expect(throws: (any Error).self) {
                _ = try await SpeakdProcess.start(
                    audio: "null", arguments: ["--chime-after-low", "gong"], timeout: .seconds(10))
            }
        }
    }
}

/// Posts `body`, waits for its finished event, and returns its id with what the sink played from
/// the post until then.
private func heardToTheEnd(_ speakd: AudibleDaemon, _ body: [String: Any]) async throws -> (String, [Int16]) {
    let start = speakd.recorder.recordedFrames
    let id = try await speakd.accept(body)
    #expect(await speakd.events.waitForFinished([id]))
    return (id, Array(speakd.recorder.samplesSoFar()[start...]))
}

/// Posts a long announcement with `extra` (its chimes), cancels it `after` it started and waits
/// for its finished event; returns its id and the recorded frame at the cancel.
private func cancelLongAnnouncement(
    _ speakd: AudibleDaemon, extra: [String: Any], after delay: Duration
) async throws -> (String, Int) {
    let body = ["text": "Attention please, the train now standing at platform nine is for the coast"].merging(extra) {
        $1
    }
    let long = try await speakd.accept(body)
    _ = try #require(await speakd.events.waitFor(.started, of: long))
    try await Task.sleep(for: delay)
    let cancelAt = speakd.recorder.recordedFrames
    #expect(try await speakd.unix.send("DELETE", "/v1/announcements/\(long)").status == 200)
    #expect(await speakd.events.waitForFinished([long]))
    return (long, cancelAt)
}

/// Nothing is heard from 0.25 s after the frame `cancelAt` on.
private func expectSilence(in recording: Recording, from cancelAt: Int) {
    let rate = Double(recording.analysis.sampleRate)
    let after = AudioAnalysis(
        samples: Array(
            recording.analysis.samples[min(cancelAt + Int(0.25 * rate), recording.analysis.samples.count)...]),
        sampleRate: recording.analysis.sampleRate)
    #expect(after.rms < 0.002, "sound after the cancel: RMS \(after.rms)")
}

/// The share of `samples`' energy at `frequencies` (Goertzel), 0 … 1, measured in 20 ms frames:
/// a frame is short enough that a brief gap in the sound (an underrun under load) shifts the
/// phase of only one frame, where a measure over the whole window would lose the tone to the
/// phase jump.
private func toneShare(_ samples: [Int16], frequencies: [Double], rate: Double) -> Double {
    let values = samples.map { Double($0) / 32768 }
    let total = values.reduce(0) { $0 + $1 * $1 }
    guard total > 0 else { return 0 }
    let frameLength = max(1, Int(0.02 * rate))
    var tone = 0.0
    for frameStart in stride(from: 0, to: values.count, by: frameLength) {
        let frame = values[frameStart..<min(values.count, frameStart + frameLength)]
        for frequency in frequencies {
            let coefficient = 2 * cos(2 * Double.pi * frequency / rate)
            var (previous, beforePrevious) = (0.0, 0.0)
            for value in frame {
                let current = value + coefficient * previous - beforePrevious
                beforePrevious = previous
                previous = current
            }
            let power =
                previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious
            tone += 2 * power / Double(frame.count)
        }
    }
    return tone / total
}

/// `pactl list sink-inputs` on `pulse`.
private func sinkInputs(_ pulse: PulseAudioServer) async throws -> String {
    let output = pulse.directory.appendingPathComponent("sink-inputs.txt")
    let process = try ChildProcess(
        "/usr/bin/pactl", ["list", "sink-inputs"], environment: pulse.clientProcessEnvironment, output: output.path)
    _ = await process.wait(timeout: .seconds(5))
    return (try? String(contentsOf: output, encoding: .utf8)) ?? ""
}

/// Root mean square of `samples`, full scale 1.
private func rms(_ samples: ArraySlice<Int16>) -> Double {
    guard !samples.isEmpty else { return 0 }
    return (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples.count)).squareRoot() / 32768
}
