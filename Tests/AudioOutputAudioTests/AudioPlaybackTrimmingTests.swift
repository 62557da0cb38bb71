import AudioOutput
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

// Playback's gap and trimming against the wall clock (the gap between announcements runs in real
// time), so these run in the audio tier, one at a time, not beside the parallel unit tests.

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
