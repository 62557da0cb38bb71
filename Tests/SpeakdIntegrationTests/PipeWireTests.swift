import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// The real `speakd` through a private PipeWire instance (pipewire, WirePlumber 0.4 and
    /// pipewire-pulse, as desktops run it), judged from recordings of its null sinks' monitors:
    /// playback, named outputs on their own sinks, ducking by `contrib/wireplumber`'s script, and
    /// a restart of PipeWire with announcements queued.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct PipeWireTests {
        /// The instance, a recorder on each of its sinks, the daemon and its event stream.
        struct Daemon {
            let pipewire: PipeWireServer
            let recorders: [String: MonitorRecorder]
            let daemon: SpeakdProcess
            let events: EventStreamRecorder

            /// Starts PipeWire with a null sink per name in `sinks` (the first is the default),
            /// a recorder on each, and `speakd --audio AUDIO ARGUMENTS`.
            static func start(
                sinks: [String] = ["speakd_test"], ducking: Bool = false, audio: String = "pulse",
                arguments: [String] = []
            ) async throws -> Daemon {
                let pipewire = try await PipeWireServer.start(
                    sinkName: sinks[0], extraSinks: Array(sinks.dropFirst()), ducking: ducking)
                do {
                    var recorders: [String: MonitorRecorder] = [:]
                    for sink in sinks { recorders[sink] = try await MonitorRecorder.start(pipewire, sink: sink) }
                    let daemon = try await SpeakdProcess.start(
                        audio: audio, arguments: arguments, environment: pipewire.environment)
                    let events = EventStreamRecorder(client: daemon.unixClient)
                    try await daemon.waitForEventStreams(1)
                    return Daemon(pipewire: pipewire, recorders: recorders, daemon: daemon, events: events)
                } catch {
                    await pipewire.stop()
                    throw error
                }
            }

            var unix: SpeakHTTPClient { daemon.unixClient }

            /// Posts and expects 202; returns the accepted id.
            func accept(_ body: [String: Any]) async throws -> String {
                let response = try await post(body, via: unix)
                #expect(
                    response.status == 202,
                    "POST answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
                return try response.decode(AnnouncementAccepted.self).id
            }

            /// How long the engine's speech of `text` sounds, rendered without playing it.
            func soundingDuration(_ text: String) async throws -> Double {
                let wav = try await daemon.speech(["text": text], raw: true)
                return AudioAnalysis(samples: wav.samples, sampleRate: wav.sampleRate)
                    .soundingDuration(silenceLevel: Recording.silenceLevel)
            }

            /// How long the engine's speech of `text` sounds, its pauses left out.
            func soundingTime(_ text: String) async throws -> Double {
                let wav = try await daemon.speech(["text": text], raw: true)
                return PipeWireTests.soundingTime(AudioAnalysis(samples: wav.samples, sampleRate: wav.sampleRate))
            }

            /// Stops the daemon (SIGTERM), the recorders and PipeWire; returns what each sink played.
            func stop() async -> [String: AudioAnalysis] {
                if daemon.isRunning {
                    let (status, _) = await daemon.stop()
                    #expect(status == 0, "speakd exited with \(String(describing: status)); log:\n\(daemon.log)")
                }
                _ = await events.wait(timeout: .seconds(5)) { _ in events.hasEnded }
                events.stop()
                var heard: [String: AudioAnalysis] = [:]
                for (sink, recorder) in recorders {
                    heard[sink] = AudioAnalysis(samples: await recorder.stop(), sampleRate: recorder.sampleRate)
                }
                await pipewire.stop()
                return heard
            }
        }

        @Test("speech is heard in full at a PipeWire null sink, once, with one finished")
        func playback() async throws {
            let speakd = try await Daemon.start()
            let text = "Doors closing, please stand clear"
            let expected = try await speakd.soundingDuration(text)
            let id = try await speakd.accept(["text": text])
            #expect(await speakd.events.waitForFinished([id]))
            try await Task.sleep(for: .milliseconds(300))
            let heard = try #require(await speakd.stop()["speakd_test"])

            let segments = heard.soundingSegments(
                minimumSilence: 0.5, silenceLevel: Recording.silenceLevel, minimumSound: 0.05)
            #expect(segments.count == 1, "heard \(segments)")
            let segment = try #require(segments.first, "nothing heard")
            #expect(abs(segment.duration - expected) < 0.2, "heard \(segment.duration) s of \(expected) s")
            #expect(speakd.events.finished(id).first?.success == true, "\(speakd.events.events(for: id))")
            expectExactlyOneFinished([id], in: speakd.events.events)
        }

        @Test("named outputs (--output NAME=pulse:SINK) are each heard on their own PipeWire sink, and only there")
        func namedOutputs() async throws {
            let speakd = try await Daemon.start(
                sinks: ["hall", "headset"], audio: "pulse:hall", arguments: ["--output", "headset=pulse:headset"])
            let hallText = "The train at platform nine will be divided at the next station"
            let headsetText = "Your order is ready"
            let hallDuration = try await speakd.soundingDuration(hallText)
            let headsetDuration = try await speakd.soundingDuration(headsetText)
            let hall = try await speakd.accept(["text": hallText])
            #expect(await speakd.events.waitForFinished([hall]))
            try await Task.sleep(for: .milliseconds(700))
            let headset = try await speakd.accept(["text": headsetText, "output": "headset"])
            #expect(await speakd.events.waitForFinished([headset]))
            try await Task.sleep(for: .milliseconds(300))
            let heard = await speakd.stop()

            for (sink, expected) in [("hall", hallDuration), ("headset", headsetDuration)] {
                let segments = try #require(heard[sink]).soundingSegments(
                    minimumSilence: 0.5, silenceLevel: Recording.silenceLevel, minimumSound: 0.05)
                #expect(segments.count == 1, "\(sink) heard \(segments)")
                #expect(
                    segments.first.map { abs($0.duration - expected) < 0.2 } == true,
                    "\(sink) heard \(segments), expected one of \(expected) s")
            }
            #expect(speakd.events.finished(hall).first?.success == true)
            #expect(speakd.events.finished(headset).first?.success == true)
            #expect(speakd.events.finished(headset).first?.output == "headset")
            expectExactlyOneFinished([hall, headset], in: speakd.events.events)
        }

        /// Who ducks: WirePlumber with `contrib/wireplumber`'s script, speakd itself (`--duck`), or
        /// nobody.
        enum Ducking: String, CaseIterable, Sendable {
            case script, speakd, none
        }

        /// pipewire-pulse has no module-role-ducking and WirePlumber 0.4 ducks nothing by default
        /// (checked without the script); `contrib/wireplumber/scripts/speakd-ducking.lua` lowers
        /// `music` to 0.2 while a stream with media.role=announcement exists, and speakd's own
        /// `--duck music` lowers it to 0.2 through pipewire-pulse, whatever WirePlumber does. speakd
        /// closes its stream, and puts the music back, 0.5 s after speaking.
        @Test(
            "a music stream is ducked while speakd speaks and restored after, by contrib/wireplumber's script or by --duck; not without either",
            arguments: Ducking.allCases)
        func ducking(_ ducking: Ducking) async throws {
            let speakd = try await Daemon.start(
                ducking: ducking == .script, arguments: ducking == .speakd ? ["--duck", "music"] : [])
            let recorder = try #require(speakd.recorders["speakd_test"])
            let tone = speakd.pipewire.directory.appendingPathComponent("music.wav")
            let sox = try ChildProcess(
                "/usr/bin/sox",
                ["-n", "-r", "22050", "-c", "1", "-b", "16", tone.path, "synth", "60", "sine", "330", "gain", "-12"],
                environment: ProcessInfo.processInfo.environment, output: "/dev/null")
            #expect(await sox.wait(timeout: .seconds(10)) == 0)
            let music = try ChildProcess(
                "/usr/bin/paplay", ["--property=media.role=music", tone.path],
                environment: speakd.pipewire.clientProcessEnvironment, output: "/dev/null")
            defer { music.send(SIGKILL) }
            // speakd's stream from start-up is released within 0.5 s; the music plays undisturbed.
            try await Task.sleep(for: .seconds(1.5))
            let rate = Double(recorder.sampleRate)
            let beforeEnd = recorder.recordedFrames
            let id = try await speakd.accept([
                "text": "Mind the gap", "chime": NSNull(), "repeat": ["count": 2, "gap": 1.5],
            ])
            _ = try #require(await speakd.events.waitFor(.started, of: id))
            try await Task.sleep(for: .milliseconds(300))
            let inputs = try await speakd.pipewire.output("/usr/bin/pactl", ["list", "sink-inputs"])
            #expect(inputs.contains("media.role = \"announcement\""), "\(inputs)")
            #expect(await speakd.events.waitForFinished([id]))
            let finishedAt = recorder.recordedFrames
            try await Task.sleep(for: .seconds(1.5))
            let samples = recorder.samplesSoFar()
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
            print(
                "measured: PipeWire ducking (\(ducking)): music RMS \(before) before, \(quietest) while speaking, \(after) after"
            )
            #expect(before > 0.05, "the music was not heard before: RMS \(before)")
            if ducking != .none {
                #expect(quietest < before * 0.3, "not ducked: music \(before), quietest while speaking \(quietest)")
                #expect(quietest > before * 0.1, "music silenced, not ducked: \(before) → \(quietest)")
            } else {
                #expect(quietest > before * 0.85, "lowered without ducking: \(before) → \(quietest)")
            }
            #expect(abs(after - before) < before * 0.15, "not restored: before \(before), after \(after)")
        }

        /// pipewire, wireplumber and pipewire-pulse killed at once (SIGKILL) 0.5 s into the first
        /// of four queued announcements and started again: the one playing may fail, the rest are
        /// spoken after the restart, each announcement has exactly one finished, and speech is heard
        /// on the new instance's sink.
        @Test("announcements queued across a PipeWire restart are each finished once and heard after it")
        func restart() async throws {
            let speakd = try await Daemon.start()
            let texts = [
                "Attention please, the train now standing at platform nine will be divided",
                "The front four coaches continue to the coast", "The rear coaches go to the airport",
                "Mind the gap",
            ]
            var expected = 0.0
            for text in texts.dropFirst() + ["Back again"] { expected += try await speakd.soundingTime(text) }
            var ids: [String] = []
            for text in texts { ids.append(try await speakd.accept(["text": text, "chime": NSNull()])) }
            _ = try #require(await speakd.events.waitFor(.started, of: ids[0]))
            try await Task.sleep(for: .milliseconds(500))
            let oldPIDs = speakd.pipewire.serverPIDs
            _ = await speakd.recorders["speakd_test"]?.stop()
            try await speakd.pipewire.restart()
            #expect(Set(oldPIDs).isDisjoint(with: speakd.pipewire.serverPIDs))
            // The old monitor went with the old instance: record the new one's.
            let recorder = try await MonitorRecorder.start(speakd.pipewire)

            #expect(
                await speakd.events.waitForFinished(ids, timeout: .seconds(60)),
                "not all finished: \(speakd.events.events.filter { $0.type == .finished }); log:\n\(speakd.daemon.log)"
            )
            let back = try await speakd.accept(["text": "Back again", "chime": NSNull()])
            #expect(await speakd.events.waitForFinished([back], timeout: .seconds(20)))
            try await Task.sleep(for: .milliseconds(300))
            let heard = AudioAnalysis(samples: recorder.samplesSoFar(), sampleRate: recorder.sampleRate)
            _ = await recorder.stop()
            _ = await speakd.stop()

            let reasons = ids.map { speakd.events.finished($0).first?.reason }
            print("measured: PipeWire restart: finished \(reasons.map { $0.map { "\($0)" } ?? "none" })")
            expectExactlyOneFinished(ids + [back], in: speakd.events.events)
            // The one playing when PipeWire died fails or, had its samples all been played, completes.
            #expect(reasons[0] == .failed || reasons[0] == .completed, "\(reasons)")
            // Nothing queued behind it is lost: each is spoken on the restarted instance.
            let spoken = ids.dropFirst().filter { speakd.events.finished($0).first?.reason == .completed }
            #expect(spoken.count == ids.count - 1, "\(reasons)")
            #expect(speakd.events.finished(back).first?.reason == .completed)
            // The three queued announcements and "Back again" were heard on the new sink.
            #expect(
                Self.soundingTime(heard) > expected * 0.9,
                "heard \(Self.soundingTime(heard)) s after the restart of \(expected) s")
        }
    }
}

extension SpeakdIntegration.PipeWireTests {
    /// Seconds of sound in `analysis`: 10 ms frames above the silence level.
    static func soundingTime(_ analysis: AudioAnalysis) -> Double {
        analysis.soundingSegments(minimumSilence: 0.01, silenceLevel: Recording.silenceLevel, minimumSound: 0)
            .reduce(0) { $0 + $1.duration }
    }
}

/// Root mean square of `samples`, full scale 1.
private func rms(_ samples: ArraySlice<Int16>) -> Double {
    guard !samples.isEmpty else { return 0 }
    return (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples.count)).squareRoot() / 32768
}
