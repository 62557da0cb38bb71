import AudioOutput
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

// Against the wall clock (events fire at instants), so in the audio tier, one at a time.

/// A sink that, like a PulseAudio stream, plays nothing until `prebuffer` frames are written,
/// then plays from that moment on. Before it starts, its estimate counts `buffer` of its own
/// (the sink's rendered-ahead audio, which a sound server takes back when the stream starts).
final class PrebufferingSink: AudioSink {
    struct State {
        var written = 0
        var startedAt: ContinuousClock.Instant?
        /// Frames of each write, in order.
        var writes: [Int] = []
    }
    let format: AudioFormat
    let prebuffer: Int
    let buffer: Duration
    let state = Mutex(State())
    var name: String { "prebuffering" }

    init(format: AudioFormat, prebuffer: Int, buffer: Duration) {
        self.format = format
        self.prebuffer = prebuffer
        self.buffer = buffer
    }

    func write(_ chunk: PCMChunk) async throws {
        state.withLock { state in
            state.written += chunk.samples.count
            state.writes.append(chunk.samples.count)
            if state.startedAt == nil && state.written >= prebuffer { state.startedAt = .now }
        }
    }

    var framesToStart: Int {
        state.withLock { $0.startedAt == nil ? max(0, prebuffer - $0.written) : 0 }
    }

    var playedOutAt: ContinuousClock.Instant? {
        state.withLock { state in
            let queued = Self.duration(frames: state.written, format)
            guard let started = state.startedAt else { return .now + buffer + queued }
            return started + queued
        }
    }

    static func duration(frames: Int, _ format: AudioFormat) -> Duration {
        .microseconds(Int64(frames) * 1_000_000 / Int64(format.sampleRate))
    }

    func drain() async throws {
        if let end = playedOutAt { try await Task.sleep(until: end) }
    }
    func flush() async throws {}
    func close() async {}
}

@Suite(.serialized) struct StreamStartTests {
    static let format = TestSignal.format
    /// 10 ms, PulseAudioDevice's prebuffer.
    static let prebuffer = 220

    /// 200 ms of tone in one chunk with a mark at `markFrame`, sound from the first frame.
    static func speech(markFrame: Int) -> PCMChunk {
        var samples = TestSignal.tone(seconds: 0.2, chunk: 10).flatMap(\.samples)
        samples[0] = 4000
        let mark = EngineEvent(
            kind: .mark, sample: markFrame, textPosition: 0, name: "\(EngineEvent.clientMarkPrefix)m")
        return PCMChunk(samples: samples, events: [mark])
    }

    @Test("What is written before the sink starts is placed by when it starts, not by its buffer")
    func framesBeforeTheStartArePlacedFromIt() async throws {
        let sink = PrebufferingSink(format: Self.format, prebuffer: Self.prebuffer, buffer: .milliseconds(40))
        let firstSample = Mutex<ContinuousClock.Instant?>(nil)
        let times = Mutex<[String: ContinuousClock.Instant]>([:])
        let observer = PlaybackObserver(
            event: { event, _ in times.withLock { $0[event.name ?? "?"] = .now } },
            firstSample: { instant in firstSample.withLock { $0 = instant } },
            firstSound: { _ in times.withLock { $0["sound"] = .now } })
        try await AudioPlayback().play(
            stream([Self.speech(markFrame: 100)]), format: Self.format, on: sink, observer: observer)
        let state = sink.state.withLock { $0 }
        let started = try #require(state.startedAt)
        // The write that starts the sink ends at its prebuffer: the first frame alone, then up to
        // the mark, then up to the prebuffer.
        #expect(Array(state.writes.prefix(3)) == [1, 100, Self.prebuffer - 101])
        let first = try #require(firstSample.withLock { $0 })
        // Placed from the start, not 40 ms later where an estimate before the start puts it.
        #expect(
            abs((first - started).seconds) < 0.002,
            "first sample placed \((first - started).seconds * 1000) ms after the start")
        let sound = try #require(times.withLock { $0["sound"] })
        let mark = try #require(times.withLock { $0["\(EngineEvent.clientMarkPrefix)m"] })
        let markDue = started + PrebufferingSink.duration(frames: 100, Self.format)
        for (name, instant, due) in [("first sound", sound, started), ("mark", mark, markDue)] {
            let late = (instant - due).seconds
            #expect(late >= 0, "\(name) fired \(-late * 1000) ms before its frame played")
            #expect(late < 0.015, "\(name) fired \(late * 1000) ms after its frame played")
        }
    }
}
