import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// Pause and resume through the real daemon, heard at a PulseAudio null sink's monitor.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct PauseResumeTests {
        static let text = "Attention please the train now standing at platform nine will be divided at the next station"
        /// A sample is audible above this absolute value; the sink's silence is zeros.
        static let audible = 64
        /// What a loaded machine may add to one measurement of request → silence.
        static let silenceBound = 0.035

        /// Seconds of audible samples among `samples` (interleaved, `channels` each frame).
        static func audibleSeconds(_ samples: ArraySlice<Int16>, channels: Int, sampleRate: Int) -> Double {
            Double(samples.count(where: { abs(Int($0)) > audible })) / Double(channels * sampleRate)
        }

        /// Seconds of audible samples `recording` holds from frame `from` to frame `to` (or its end).
        static func audibleSeconds(_ recording: Recording, channels: Int, from: Int, to: Int) -> Double {
            let samples = recording.analysis.samples
            return audibleSeconds(
                samples[(from * channels)..<min(samples.count, to * channels)], channels: channels,
                sampleRate: recording.analysis.sampleRate)
        }

        /// The text ranges of `id`'s word events, in the order they were heard.
        static func words(_ speakd: AudibleDaemon, _ id: String) -> [TextRange] {
            speakd.events.events(for: id).filter { $0.type == .word }.compactMap(\.range)
        }

        static func lastAudibleFrame(_ speakd: AudibleDaemon, from: Int, to: Int) -> Int? {
            let channels = speakd.recorder.channels
            let samples = speakd.recorder.samplesSoFar()
            let end = min(samples.count, to * channels)
            guard from * channels < end,
                let last = samples[(from * channels)..<end].lastIndex(where: { abs(Int($0)) > audible })
            else { return nil }
            return last / channels
        }

        @Test("pause silences the sink at once; resume plays the rest, nothing repeated or skipped")
        func pauseThenResume() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("PauseResumeTests.pauseThenResume") { timing in
                let speakd = try await AudibleDaemon.start()
                let body = announcement(Self.text)
                let plainFrom = speakd.recorder.recordedFrames
                let plain = try await speakd.accept(body)
                #expect(await speakd.events.waitForFinished([plain], timeout: .seconds(20)))
                try await Task.sleep(for: .milliseconds(300))

                let pausedFrom = speakd.recorder.recordedFrames
                let id = try await speakd.accept(body)
                _ = try #require(await speakd.events.waitFor(.started, of: id))
                var delays: [(atLeast: Double, atMost: Double)] = []
                for cycle in 0..<3 {
                    try await Task.sleep(for: .milliseconds(600))
                    // The first and last pauses are immediate, the second waits for the end of the word.
                    let atWord = cycle == 1
                    let path = cycle != 1 ? "/v1/pause" : "/v1/announcements/\(id)/pause"
                    let requested = ContinuousClock.now
                    let response = try await speakd.unix.send("POST", atWord ? path + "?at=word" : path)
                    try #require(
                        response.status == 200, "pause answered \(String(decoding: response.body, as: UTF8.self))")
                    #expect(try response.decode(AnnouncementStatus.self).state == .paused)
                    try await Task.sleep(for: .milliseconds(500))
                    let pauseEnd = speakd.recorder.recordedFrames
                    let last = try #require(Self.lastAudibleFrame(speakd, from: pausedFrom, to: pauseEnd))
                    // Silent through the pause: the last sound is near its start, not its end.
                    let lastArrived = try #require(speakd.recorder.arrivedAt(frame: last))
                    timing.check(
                        (ContinuousClock.now - lastArrived).seconds > 0.3,
                        "sound during the pause, \((ContinuousClock.now - lastArrived).seconds) s before its end")
                    if !atWord {
                        let early = try #require(speakd.recorder.playedAt(frame: last))
                        delays.append((atLeast: (early - requested).seconds, atMost: (lastArrived - requested).seconds))
                    }
                    let resume = try await speakd.unix.send(
                        "POST", cycle == 1 ? "/v1/resume" : "/v1/announcements/\(id)/resume")
                    #expect(resume.status == 200, "resume answered \(String(decoding: resume.body, as: UTF8.self))")
                }
                let finished = try #require(await speakd.events.waitFor(.finished, of: id, timeout: .seconds(20)))
                #expect(finished.event.reason == .completed)
                try await Task.sleep(for: .milliseconds(300))
                let pausedTo = speakd.recorder.recordedFrames
                let recording = await speakd.stop()

                let expectedTypes: [AnnouncementEvent.Kind] = [
                    .queued, .started, .paused, .resumed, .paused, .resumed, .paused, .resumed, .finished,
                ]
                let events = speakd.events.events(for: id)
                #expect(events.filter { !$0.type.isProgress }.map(\.type) == expectedTypes)
                // Every word is reported once, in order, through the pauses: what a pause took back
                // is reported again when it is heard, and nothing twice.
                #expect(!Self.words(speakd, plain).isEmpty)
                #expect(Self.words(speakd, id) == Self.words(speakd, plain))
                let channels = speakd.recorder.channels
                let unpaused = Self.audibleSeconds(recording, channels: channels, from: plainFrom, to: pausedFrom)
                let paused = Self.audibleSeconds(recording, channels: channels, from: pausedFrom, to: pausedTo)
                let text = delays.map { String(format: "%.1f–%.1f ms", $0.atLeast * 1000, $0.atMost * 1000) }
                print(
                    "measured: pause request → last audible sample: \(text.joined(separator: ", ")); audible length "
                        + String(
                            format: "unpaused %.3f s, paused three times %.3f s (%+.1f ms)", unpaused, paused,
                            (paused - unpaused) * 1000))
                #expect(unpaused > 2)
                timing.check(
                    abs(paused - unpaused) <= 0.030,
                    "audible \(paused) s with pauses, \(unpaused) s without, not within 30 ms")
                for delay in delays {
                    timing.check(
                        delay.atLeast <= Self.silenceBound,
                        "sound until \(delay.atLeast * 1000) ms after the pause request, over \(Self.silenceBound * 1000) ms"
                    )
                }
            }
            #expect(misses.isEmpty, "\(misses)")
        }

        @Test("a pause at the word's end during the chime stops after the chime, before the first word")
        func pauseAtWordDuringTheChime() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("PauseResumeTests.pauseAtWordDuringTheChime") { timing in
                let speakd = try await AudibleDaemon.start()
                var body = announcement("Doors closing")
                body["chime"] = "two-tone"
                let plainFrom = speakd.recorder.recordedFrames
                let plain = try await speakd.accept(body)
                #expect(await speakd.events.waitForFinished([plain], timeout: .seconds(20)))
                try await Task.sleep(for: .milliseconds(300))

                let pausedFrom = speakd.recorder.recordedFrames
                let id = try await speakd.accept(body)
                _ = try #require(await speakd.events.waitFor(.started, of: id))
                // 0.3 s into the 0.85 s chime: the next word start is the speech's first word.
                try await Task.sleep(for: .milliseconds(300))
                let pause = try await speakd.unix.send("POST", "/v1/pause?at=word")
                try #require(pause.status == 200, "pause answered \(String(decoding: pause.body, as: UTF8.self))")
                try await Task.sleep(for: .milliseconds(1200))
                let pauseEnd = speakd.recorder.recordedFrames
                let last = try #require(Self.lastAudibleFrame(speakd, from: pausedFrom, to: pauseEnd))
                let lastArrived = try #require(speakd.recorder.arrivedAt(frame: last))
                timing.check(
                    (ContinuousClock.now - lastArrived).seconds > 0.5,
                    "sound late in the pause, \((ContinuousClock.now - lastArrived).seconds) s before its end")
                let resumed = try await speakd.unix.send("POST", "/v1/resume")
                #expect(resumed.status == 200, "resume answered \(String(decoding: resumed.body, as: UTF8.self))")
                let finished = try #require(await speakd.events.waitFor(.finished, of: id, timeout: .seconds(20)))
                try await Task.sleep(for: .milliseconds(300))
                let pausedTo = speakd.recorder.recordedFrames
                let recording = await speakd.stop()

                #expect(finished.event.reason == .completed)
                let events = speakd.events.events(for: id)
                // No word was heard before the resume, and every word once, in order, after it.
                let resumedAt = try #require(events.firstIndex { $0.type == .resumed })
                #expect(!events[..<resumedAt].contains { $0.type == .word }, "\(events.map(\.type))")
                #expect(!Self.words(speakd, plain).isEmpty)
                #expect(Self.words(speakd, id) == Self.words(speakd, plain))
                // The chime played to its end before the pause: chime and speech heard in full, once.
                let channels = speakd.recorder.channels
                let unpaused = Self.audibleSeconds(recording, channels: channels, from: plainFrom, to: pausedFrom)
                let paused = Self.audibleSeconds(recording, channels: channels, from: pausedFrom, to: pausedTo)
                print(String(format: "measured: audible unpaused %.3f s, paused in the chime %.3f s", unpaused, paused))
                timing.check(
                    abs(paused - unpaused) <= 0.030,
                    "audible \(paused) s with the pause, \(unpaused) s without, not within 30 ms")
                // Silent from the chime's end to the resume: the pause came after the chime, not in it.
                let pausedSound = Self.audibleSeconds(recording, channels: channels, from: pausedFrom, to: pauseEnd)
                #expect(pausedSound > 0.6 && pausedSound < 1.0, "heard \(pausedSound) s before the resume")
            }
            #expect(misses.isEmpty, "\(misses)")
        }

        @Test("a paused one is interrupted by a high, cancelled, timed out; refusals are 404 and 409")
        func pausedOnesFinishAndRefusals() async throws {
            let speakd = try await AudibleDaemon.start(arguments: ["--pause-timeout", "1"])
            let client = speakd.unix
            func expectError(
                _ method: String, _ path: String, status: Int, code: String, field: String? = "id",
                sourceLocation: SourceLocation = #_sourceLocation
            ) async throws {
                let response = try await client.send(method, path)
                #expect(response.status == status, sourceLocation: sourceLocation)
                let error = try response.decode(ErrorResponse.self)
                #expect(error.error.code == code, "\(error)", sourceLocation: sourceLocation)
                #expect(!error.error.message.isEmpty, sourceLocation: sourceLocation)
                #expect(error.error.field == field, "\(error)", sourceLocation: sourceLocation)
            }
            // Without an id there is no field at fault.
            try await expectError("POST", "/v1/pause", status: 409, code: "notSpeaking", field: nil)
            try await expectError("POST", "/v1/resume", status: 409, code: "notPaused", field: nil)
            try await expectError("POST", "/v1/pause?output=hall", status: 422, code: "invalidValue", field: "output")
            try await expectError("POST", "/v1/resume?output=hall", status: 422, code: "invalidValue", field: "output")
            try await expectError(
                "POST", "/v1/pause?output=default", status: 409, code: "notSpeaking", field: nil)
            try await expectError(
                "POST", "/v1/announcements/000000000000/pause", status: 404, code: "unknownAnnouncement")

            let speaking = try await speakd.accept(announcement(Self.text))
            _ = try #require(await speakd.events.waitFor(.started, of: speaking))
            let waiting = try await speakd.accept(announcement("Mind the gap", priority: .low))
            try await expectError("POST", "/v1/announcements/\(waiting)/pause", status: 409, code: "notSpeaking")
            try await expectError("POST", "/v1/announcements/\(speaking)/resume", status: 409, code: "notPaused")
            try await expectError(
                "POST", "/v1/announcements/\(speaking)/pause?at=later", status: 422, code: "invalidValue", field: "at")
            #expect(try await client.send("POST", "/v1/announcements/\(speaking)/pause").status == 200)
            try await expectError("POST", "/v1/announcements/\(speaking)/pause", status: 409, code: "notSpeaking")
            let list = try await client.send("GET", "/v1/announcements").decode(AnnouncementList.self)
            #expect(list.announcements.map(\.state) == [.paused, .queued])

            // A high interrupts the paused one as it would a speaking one.
            let urgent = try await speakd.accept(announcement("Platform change", priority: .high))
            let interrupted = try #require(await speakd.events.waitFor(.finished, of: speaking, timeout: .seconds(5)))
            #expect(interrupted.event.reason == .interrupted)
            _ = try #require(await speakd.events.waitFor(.finished, of: urgent, timeout: .seconds(10)))

            // The low one starts next; cancelled while paused, it finishes `cancelled`.
            _ = try #require(await speakd.events.waitFor(.started, of: waiting, timeout: .seconds(5)))
            #expect(try await client.send("POST", "/v1/pause").status == 200)
            #expect(try await client.send("DELETE", "/v1/announcements/\(waiting)").status == 200)
            let cancelled = try #require(await speakd.events.waitFor(.finished, of: waiting, timeout: .seconds(5)))
            #expect(cancelled.event.reason == .cancelled)
            try await expectError("POST", "/v1/announcements/\(waiting)/resume", status: 409, code: "notPaused")

            // Left paused past --pause-timeout, it finishes `interrupted` saying why.
            let forgotten = try await speakd.accept(announcement(Self.text))
            _ = try #require(await speakd.events.waitFor(.started, of: forgotten))
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await client.send("POST", "/v1/pause").status == 200)
            let pausedAt = ContinuousClock.now
            let timedOut = try #require(await speakd.events.waitFor(.finished, of: forgotten, timeout: .seconds(5)))
            let waited = (timedOut.receivedAt - pausedAt).seconds
            #expect(timedOut.event.reason == .interrupted)
            #expect(timedOut.event.detail?.contains("pause timeout") == true, "\(timedOut.event)")
            #expect(waited > 0.9 && waited < 2.5, "finished \(waited) s after the pause")
            _ = await speakd.stop()
            expectExactlyOneFinished([speaking, waiting, urgent, forgotten], in: speakd.events.events)
        }
    }
}
