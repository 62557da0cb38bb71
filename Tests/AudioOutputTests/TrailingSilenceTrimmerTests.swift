import AudioOutput
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

@Suite struct TrailingSilenceTrimmerTests {
    static let format = TestSignal.format
    static let sound: [Int16] = [1000, -2000, 3000, -500]

    static func silence(_ frames: Int, level: Int16 = 0) -> [Int16] {
        (0..<frames).map { $0.isMultiple(of: 2) ? level : -level }
    }

    /// Pushes `chunks` through a trimmer; returns what it released, in order, and what `finish()` said.
    static func trim(
        _ chunks: [PCMChunk], maximumHeld: Duration = .seconds(1)
    ) -> (released: [PCMChunk], releasedSilentFrames: Int, events: [EngineEvent]) {
        var trimmer = TrailingSilenceTrimmer(format: format, maximumHeld: maximumHeld)
        let released = chunks.compactMap { trimmer.push($0) }
        let (frames, events) = trimmer.finish()
        return (released, frames, events)
    }

    @Test func soundIsReleasedAtOnceAndTheSilentEndIsDropped() {
        var trimmer = TrailingSilenceTrimmer(format: Self.format)
        let first = trimmer.push(PCMChunk(samples: Self.silence(50) + Self.sound + Self.silence(300)))
        // Everything up to the last sounding sample, the silence before it included, at once.
        #expect(first?.samples == Self.silence(50) + Self.sound)
        #expect(trimmer.heldFrames == 300)
        #expect(trimmer.push(PCMChunk(samples: Self.silence(6000))) == nil)
        #expect(trimmer.heldFrames == 6300)
        let (releasedSilence, _) = trimmer.finish()
        #expect(releasedSilence == 0)
        #expect(trimmer.heldFrames == 0)
    }

    @Test func heldSilenceIsReleasedWhenSoundResumes() {
        // A pause inside the speech, across chunks, comes out whole and in order.
        let chunks = [
            PCMChunk(samples: Self.sound + Self.silence(400, level: 30)),
            PCMChunk(samples: Self.silence(2000)),
            PCMChunk(samples: Self.silence(100) + Self.sound + Self.silence(700)),
        ]
        let result = Self.trim(chunks)
        let played = result.released.flatMap(\.samples)
        #expect(
            played == Self.sound + Self.silence(400, level: 30) + Self.silence(2000) + Self.silence(100) + Self.sound)
        #expect(result.released.count == 2, "the silent chunk is held, not written alone")
    }

    @Test func quietSamplesAtTheThresholdAreSilenceAndOneAboveIsSound() {
        var trimmer = TrailingSilenceTrimmer(format: Self.format, threshold: 64)
        #expect(trimmer.push(PCMChunk(samples: [64, -64, 0])) == nil)
        #expect(trimmer.push(PCMChunk(samples: [0, -65, 3]))?.samples == [64, -64, 0, 0, -65])
    }

    @Test func holdingIsBoundedAndWhatWasReleasedIsCounted() {
        let maximum = Self.format.sampleRate / 10
        var trimmer = TrailingSilenceTrimmer(format: Self.format, maximumHeld: .milliseconds(100))
        _ = trimmer.push(PCMChunk(samples: Self.sound))
        var released = 0
        for _ in 0..<50 {
            released += trimmer.push(PCMChunk(samples: Self.silence(1000)))?.samples.count ?? 0
            #expect(trimmer.heldFrames <= maximum)
        }
        #expect(released == 50_000 - maximum)
        #expect(trimmer.finish().releasedSilentFrames == released)

        // Sound after a long pause releases the rest of it and starts a new count.
        var again = TrailingSilenceTrimmer(format: Self.format, maximumHeld: .milliseconds(100))
        _ = again.push(PCMChunk(samples: Self.silence(5000)))
        let resumed = again.push(PCMChunk(samples: Self.sound))
        #expect(resumed?.samples.count == maximum + Self.sound.count)
        #expect(again.finish().releasedSilentFrames == 0)
    }

    @Test func stereoFramesAreKeptWhole() {
        let stereo = AudioFormat(sampleRate: 22050, channels: 2)
        var trimmer = TrailingSilenceTrimmer(format: stereo)
        // The last sounding sample is a frame's left one: its right one goes with it.
        let out = trimmer.push(PCMChunk(samples: [0, 0, 900, 0, 0, 0]))
        #expect(out?.samples == [0, 0, 900, 0])
        #expect(trimmer.heldFrames == 1)
    }

    @Test func eventsOfHeldSamplesTravelWithTheNextReleaseOrComeBackAtTheEnd() {
        let word = EngineEvent(kind: .word, sample: 10, textPosition: 1, length: 3)
        let mark = EngineEvent(kind: .mark, sample: 900, textPosition: 0, name: "end")
        var trimmer = TrailingSilenceTrimmer(format: Self.format)
        #expect(trimmer.push(PCMChunk(samples: Self.silence(100), events: [word])) == nil)
        #expect(trimmer.push(PCMChunk(samples: Self.sound))?.events == [word])
        #expect(trimmer.push(PCMChunk(samples: Self.silence(100), events: [mark])) == nil)
        #expect(trimmer.finish().events == [mark])
    }
}

/// What a playback wrote, sample by sample, and how often it drained and flushed.
final class RecordingSink: AudioSink {
    struct Log {
        var samples: [Int16] = []
        var writes: [PCMChunk] = []
        var drains = 0
        var flushes = 0
    }
    let log = Mutex(Log())
    var name: String { "recording" }

    func write(_ chunk: PCMChunk) async throws {
        log.withLock {
            $0.samples += chunk.samples
            $0.writes.append(chunk)
        }
    }
    func drain() async throws { log.withLock { $0.drains += 1 } }
    func flush() async throws { log.withLock { $0.flushes += 1 } }
    func close() async {}
}

@Suite struct AudioPlaybackTrimmingTests {
    static let format = TestSignal.format
    static var rate: Int { format.sampleRate }

    /// A tone, then `silence` seconds of engine silence, in espeak-sized chunks.
    static func speech(tone: Double = 0.2, silence: Double) -> [PCMChunk] {
        var samples = TestSignal.tone(seconds: tone, chunk: 10).flatMap(\.samples)
        // Start and end the tone on a loud sample, so where the sound starts and ends is exact.
        samples[0] = 4000
        samples[samples.count - 1] = 4000
        samples += Array(repeating: 0, count: Int(silence * Double(rate)))
        return stride(from: 0, to: samples.count, by: 1082).map {
            PCMChunk(samples: Array(samples[$0..<min($0 + 1082, samples.count)]))
        }
    }

    @Test func theEngineSilenceAtTheEndIsNotPlayed() async throws {
        let sink = RecordingSink()
        let chunks = Self.speech(silence: 0.3)
        try await AudioPlayback().play(stream(chunks), format: Self.format, on: sink)
        let log = sink.log.withLock { $0 }
        #expect(log.samples.count == Int(0.2 * Double(Self.rate)))
        #expect(log.samples.last == 4000)
        #expect(log.drains == 1)
    }

    @Test(arguments: [0.1, 0.5, 2.5])
    func aTrailingPauseIsPlayedInFull(pause: Double) async throws {
        // The engine renders the pause with its own silence after it; what is played after the
        // last sound is the pause, to the frame, however much of it the trimmer had to release.
        let sink = RecordingSink()
        let chunks = Self.speech(silence: pause + 0.3)
        try await AudioPlayback().play(
            stream(chunks), format: Self.format, trailingPause: .milliseconds(Int64(pause * 1000)), on: sink)
        let samples = sink.log.withLock { $0.samples }
        let lastSound = try #require(samples.lastIndex { $0 != 0 })
        #expect(lastSound == Int(0.2 * Double(Self.rate)) - 1)
        #expect(samples.count - 1 - lastSound == Int(pause * Double(Self.rate)))
    }

    @Test func theNextStreamStartsAGapAfterTheLastSound() async throws {
        let sink = RecordingSink()
        let playback = AudioPlayback(leadIn: .milliseconds(20), gap: .milliseconds(250))
        // The first stream: only the lead-in, nothing was played before it.
        try await playback.play(stream(Self.speech(silence: 0.3)), format: Self.format, on: sink)
        let first = sink.log.withLock { $0.samples }
        #expect(first.firstIndex { $0 != 0 } == Self.rate / 50)
        // At once after it: about the whole gap of silence before the next (the silence counts
        // from when the last sound was played, a moment ago).
        try await playback.play(stream(Self.speech(silence: 0.3)), format: Self.format, on: sink)
        let second = sink.log.withLock { Array($0.samples[first.count...]) }
        let silenceBefore = Double(try #require(second.firstIndex { $0 != 0 })) / Double(Self.rate)
        #expect(silenceBefore > 0.2 && silenceBefore <= 0.25 + 0.001, "\(silenceBefore) s before the next")
        // Once the gap has passed, only the lead-in.
        try await Task.sleep(for: .milliseconds(300))
        let before = sink.log.withLock { $0.samples.count }
        try await playback.play(stream(Self.speech(silence: 0.3)), format: Self.format, on: sink)
        let third = sink.log.withLock { Array($0.samples[before...]) }
        #expect(third.firstIndex { $0 != 0 } == Self.rate / 50)
    }

    @Test func aCancelledStreamCountsForTheGapFromWhenItWasSilenced() async throws {
        let sink = RecordingSink()
        let playback = AudioPlayback(gap: .milliseconds(250))
        let never = AsyncStream<PCMChunk> { continuation in
            continuation.yield(Self.speech(silence: 0)[0])
        }
        let task = Task { try await playback.play(never, format: Self.format, on: sink) }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(sink.log.withLock { $0.flushes } == 1)
        let before = sink.log.withLock { $0.samples.count }
        try await playback.play(stream(Self.speech(silence: 0.3)), format: Self.format, on: sink)
        let next = sink.log.withLock { Array($0.samples[before...]) }
        let silenceBefore = Double(try #require(next.firstIndex { $0 != 0 })) / Double(Self.rate)
        #expect(silenceBefore > 0.15 && silenceBefore <= 0.251, "\(silenceBefore) s before the next")
    }
}
