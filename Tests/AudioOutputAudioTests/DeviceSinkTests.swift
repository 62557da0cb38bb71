import Dispatch
import Foundation
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

@testable import AudioOutput

/// What a `FakeDevice` was asked to do, and a switch that makes its writes or opens block
/// until released: a fake at the C-call boundary for the failure paths a real device rarely shows.
final class FakeDeviceControl: Sendable {
    struct Log {
        var opens = 0
        /// Opens begun, including those still blocked.
        var opensBegun = 0
        var closes = 0
        var flushes = 0
        var drains = 0
        var bytesWritten = 0
        var blockWrites = false
        var blockOpens = false
        /// How many of the next writes fail as if the connection were gone.
        var failingWrites = 0
        /// How long a drain takes, as if that much audio were still queued.
        var drainTime: Duration = .zero
        var drainsInterrupted = 0
    }

    let log = Mutex(Log())
    let release = DispatchSemaphore(value: 0)

    /// Lets every blocked call return.
    func unblock() {
        let blocked = log.withLock { log in
            defer {
                log.blockWrites = false
                log.blockOpens = false
            }
            return log.blockWrites || log.blockOpens
        }
        if blocked { for _ in 0..<8 { release.signal() } }
    }

    func open() throws(AudioOutputError) -> any BlockingAudioDevice {
        let block = log.withLock { log in
            log.opensBegun += 1
            return log.blockOpens
        }
        if block { release.wait() }
        log.withLock { $0.opens += 1 }
        return FakeDevice(control: self)
    }
}

/// Plays in real time (a write of N ms takes N ms), unless told to block or fail.
final class FakeDevice: BlockingAudioDevice {
    let control: FakeDeviceControl

    init(control: FakeDeviceControl) {
        self.control = control
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(AudioOutputError) {
        let (block, fail) = control.log.withLock { log in
            defer { log.failingWrites = max(0, log.failingWrites - 1) }
            return (log.blockWrites, log.failingWrites > 0)
        }
        if fail { throw .writeFailed(sink: "fake", "Connection terminated") }
        if block { control.release.wait() }
        usleep(UInt32(bytes.count * 1_000_000 / (2 * 22050)))
        control.log.withLock { $0.bytesWritten += bytes.count }
    }

    func drain(until interrupted: () -> Bool) throws(AudioOutputError) {
        let end = ContinuousClock.now + control.log.withLock { $0.drainTime }
        while ContinuousClock.now < end {
            if interrupted() {
                control.log.withLock { $0.drainsInterrupted += 1 }
                return
            }
            usleep(1000)
        }
        control.log.withLock { $0.drains += 1 }
    }

    func flush() throws(AudioOutputError) {
        control.log.withLock { $0.flushes += 1 }
    }

    func close() {
        control.log.withLock { $0.closes += 1 }
    }
}

@Suite struct DeviceSinkTests {
    let control = FakeDeviceControl()
    let options = AudioSinkOptions(openTimeout: .milliseconds(300), callTimeout: .milliseconds(200))

    func makeSink(callTimeout: Duration? = nil) -> DeviceSink {
        let control = control
        var options = options
        if let callTimeout { options.callTimeout = callTimeout }
        return DeviceSink(name: "fake", format: TestSignal.format, options: options) { () throws(AudioOutputError) in
            try control.open()
        }
    }

    /// With no sound server, each retry opened, failed and closed the sink, and the close was
    /// taken for a recovery: "audio sink failed" and "works again" in the same instant, every time.
    @Test(.timeLimit(.minutes(1)))
    func closingASinkThatNeverOpenedIsNoRecovery() async throws {
        let sink = DeviceSink(name: "absent", format: TestSignal.format, options: options) {
            () throws(AudioOutputError) -> any BlockingAudioDevice in
            throw .openFailed(sink: "absent", "Connection refused")
        }
        await #expect(throws: AudioOutputError.self) { try await sink.reopen() }
        #expect(!sink.isAvailable)
        await sink.close()
        #expect(!sink.isAvailable, "closing a sink that never opened made it available")
        #expect(sink.lastError?.kind == "openFailed")
    }

    @Test(.timeLimit(.minutes(1)))
    func wedgedWriteTimesOutThenFailsFastThenRecovers() async throws {
        let sink = makeSink()
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        control.log.withLock { $0.blockWrites = true }

        var start = ContinuousClock.now
        let timeout = await #expect(throws: AudioOutputError.self) {
            try await sink.write(TestSignal.tone(seconds: 0.1)[0])
        }
        #expect(timeout?.kind == "timedOut")
        #expect(timeout?.message.contains("write did not return within") == true)
        #expect(ContinuousClock.now - start < .milliseconds(700))
        #expect(!sink.isAvailable)

        // The stuck call still holds the device: later calls fail at once instead of piling up.
        start = ContinuousClock.now
        let blocked = await #expect(throws: AudioOutputError.self) { try await sink.drain() }
        #expect(blocked?.kind == "blocked")
        #expect(blocked?.isTimeout == true)
        #expect(ContinuousClock.now - start < .milliseconds(100))

        // Once the stuck call returns, its thread closes the device and the next write reopens.
        control.unblock()
        var recovered = false
        for _ in 0..<100 where !recovered {
            recovered = (try? await sink.write(TestSignal.tone(seconds: 0.02)[0])) != nil
            if !recovered { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(recovered)
        #expect(sink.isAvailable)
        let log = control.log.withLock { $0 }
        #expect(log.opens == 2)
        #expect(log.closes == 1)
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func wedgedOpenTimesOut() async throws {
        let sink = makeSink()
        control.log.withLock { $0.blockOpens = true }
        let start = ContinuousClock.now
        let error = await #expect(throws: AudioOutputError.self) {
            try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        }
        #expect(error?.kind == "timedOut")
        #expect(error?.message.contains("open did not return within 0.3 seconds") == true)
        #expect(ContinuousClock.now - start < .milliseconds(800))
        control.unblock()
        await sink.close()
    }

    /// `auto` makes a fresh sink on every attempt: an open that never returns must not cost a
    /// new thread each time.
    @Test(.timeLimit(.minutes(1)))
    func aDeviceStuckInOpenHoldsOneThreadHoweverManySinksRetry() async throws {
        let control = control
        let name = "fake-stuck-\(UUID().uuidString.prefix(8))"
        let makeSink = {
            DeviceSink(name: name, format: TestSignal.format, options: options) { () throws(AudioOutputError) in
                try control.open()
            }
        }
        control.log.withLock { $0.blockOpens = true }
        let first = makeSink()
        let timedOut = await #expect(throws: AudioOutputError.self) { try await first.reopen() }
        #expect(timedOut?.kind == "timedOut")
        await first.close()
        for _ in 0..<5 {
            let retry = makeSink()
            let start = ContinuousClock.now
            let blocked = await #expect(throws: AudioOutputError.self) { try await retry.reopen() }
            #expect(blocked?.kind == "blocked")
            #expect(ContinuousClock.now - start < .milliseconds(100))
            await retry.close()
        }
        #expect(control.log.withLock { $0.opensBegun } == 1)

        // Once the stuck call returns, its thread exits and a new sink opens.
        control.unblock()
        let last = makeSink()
        var opened = false
        for _ in 0..<100 where !opened {
            opened = (try? await last.reopen()) != nil
            if !opened { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(opened)
        #expect(control.log.withLock { $0.opensBegun } == 2)
        await last.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func failedWriteReopensOnTheNextOne() async throws {
        let sink = makeSink()
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        // Lost, and still lost when opened afresh: the write fails.
        control.log.withLock { $0.failingWrites = 2 }
        let error = await #expect(throws: AudioOutputError.self) {
            try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        }
        #expect(error?.description == "audio sink 'fake': write failed: Connection terminated")
        #expect(!sink.isAvailable)
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        #expect(sink.isAvailable)
        #expect(control.log.withLock { ($0.opens, $0.closes) } == (3, 2))
        await sink.close()
        #expect(control.log.withLock { $0.closes } == 3)
    }

    /// The sound server restarted while the sink was idle: the first write finds the old
    /// connection dead, opens afresh and plays, instead of failing the announcement.
    @Test(.timeLimit(.minutes(1)))
    func aConnectionLostWhileIdleIsReopenedByTheNextWrite() async throws {
        let sink = makeSink()
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        control.log.withLock { $0.failingWrites = 1 }
        try await sink.write(TestSignal.tone(seconds: 0.05)[0])
        #expect(sink.isAvailable)
        let log = control.log.withLock { $0 }
        #expect((log.opens, log.closes) == (2, 1))
        #expect(log.bytesWritten == TestSignal.format.byteCount(for: .milliseconds(70)))
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func cancellingAWriteReturnsAtOnceAndStopsTheDevice() async throws {
        let sink = makeSink()
        let chunk = TestSignal.tone(seconds: 2, chunk: 2)[0]
        let writer = Task { try await sink.write(chunk) }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        writer.cancel()
        await #expect(throws: CancellationError.self) { try await writer.value }
        // Bounds are far below the 2 s the write would take, and loose enough for two loaded cores.
        #expect(ContinuousClock.now - cancelled < .milliseconds(500))
        // The thread stops within one 10 ms piece; the rest of the 2 s chunk never reaches it.
        try await Task.sleep(for: .milliseconds(50))
        let written = control.log.withLock { $0.bytesWritten }
        #expect(written < TestSignal.format.byteCount(for: .milliseconds(1200)))
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func flushStopsARunningWrite() async throws {
        let sink = makeSink()
        let chunk = TestSignal.tone(seconds: 2, chunk: 2)[0]
        let writer = Task { try await sink.write(chunk) }
        try await Task.sleep(for: .milliseconds(200))
        let start = ContinuousClock.now
        try await sink.flush()
        #expect(ContinuousClock.now - start < .milliseconds(500))
        try await writer.value
        #expect(control.log.withLock { $0.flushes } == 1)
        #expect(control.log.withLock { $0.bytesWritten } < TestSignal.format.byteCount(for: .milliseconds(1200)))
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func playbackFlushesWhenCancelled() async throws {
        let sink = makeSink()
        let player = Task {
            try await AudioPlayback().play(
                stream(TestSignal.tone(seconds: 3)), format: TestSignal.format, on: sink)
        }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        player.cancel()
        await #expect(throws: CancellationError.self) { try await player.value }
        #expect(ContinuousClock.now - cancelled < .milliseconds(500))
        let log = control.log.withLock { $0 }
        #expect(log.flushes == 1)
        #expect(log.drains == 0)
        #expect(log.bytesWritten < TestSignal.format.byteCount(for: .milliseconds(1500)))
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func cancellingADrainReturnsAtOnceAndFlushes() async throws {
        let sink = makeSink(callTimeout: .seconds(5))
        control.log.withLock { $0.drainTime = .seconds(2) }
        let player = Task {
            try await AudioPlayback().play(
                stream(TestSignal.tone(seconds: 0.05)), format: TestSignal.format, on: sink)
        }
        // The 50 ms tone is written at once; the 2 s drain is then under way.
        try await Task.sleep(for: .milliseconds(800))
        let cancelled = ContinuousClock.now
        player.cancel()
        await #expect(throws: CancellationError.self) { try await player.value }
        #expect(ContinuousClock.now - cancelled < .milliseconds(500))
        // The drain stopped early and the flush behind it ran.
        try await sink.flush()
        let log = control.log.withLock { $0 }
        #expect(log.drainsInterrupted == 1)
        #expect(log.drains == 0)
        #expect(log.flushes == 2)
        await sink.close()
    }

    /// A cancel's flush that had to wait for a frozen device (which then resumed) leaves the
    /// stream to be opened afresh by the next write.
    @Test(.timeLimit(.minutes(1)))
    func aFlushThatWaitedOnAStalledDeviceReopensForTheNextWrite() async throws {
        let sink = makeSink(callTimeout: .seconds(5))
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        control.log.withLock { $0.blockWrites = true }
        let writer = Task { try await sink.write(TestSignal.tone(seconds: 0.1)[0]) }
        try await Task.sleep(for: .milliseconds(50))
        writer.cancel()
        let unblock = Task {
            try await Task.sleep(for: .milliseconds(700))
            control.unblock()
        }
        try await sink.flush()
        try await unblock.value
        #expect(control.log.withLock { ($0.flushes, $0.opens, $0.closes) } == (1, 1, 1))
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        #expect(control.log.withLock { $0.opens } == 2)

        // A quick flush keeps the stream.
        try await sink.flush()
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        #expect(control.log.withLock { ($0.opens, $0.closes) } == (2, 1))
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func aDrainLongerThanTheCallLimitIsAWedge() async throws {
        let sink = makeSink()
        try await sink.write(TestSignal.tone(seconds: 0.02)[0])
        control.log.withLock { $0.drainTime = .seconds(5) }
        let error = await #expect(throws: AudioOutputError.self) { try await sink.drain() }
        #expect(error?.kind == "timedOut")
        // The abandoned thread's drain loop is interrupted rather than left to run its 5 s, so
        // the thread exits and the sink recovers at once.
        let start = ContinuousClock.now
        var recovered = false
        for _ in 0..<100 where !recovered {
            recovered = (try? await sink.write(TestSignal.tone(seconds: 0.02)[0])) != nil
            if !recovered { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(recovered)
        #expect(ContinuousClock.now - start < .milliseconds(500))
        #expect(control.log.withLock { $0.drainsInterrupted } == 1)
        await sink.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func playbackWritesLeadInThenEverythingThenDrains() async throws {
        let sink = makeSink()
        let tone = TestSignal.tone(seconds: 0.2)
        try await AudioPlayback(leadIn: .milliseconds(100)).play(stream(tone), format: TestSignal.format, on: sink)
        let log = control.log.withLock { $0 }
        #expect(log.bytesWritten == TestSignal.format.byteCount(for: .milliseconds(300)))
        #expect(log.drains == 1)
        #expect(log.flushes == 0)
        await sink.close()
    }
}

@Suite struct NullSinkTests {
    @Test func immediateDiscardsAndCounts() async throws {
        let sink = NullSink(format: TestSignal.format)
        let start = ContinuousClock.now
        for chunk in TestSignal.tone(seconds: 10) { try await sink.write(chunk) }
        try await sink.drain()
        #expect(ContinuousClock.now - start < .seconds(1))
        #expect(sink.framesWritten == 220_500)
    }

    @Test(.timeLimit(.minutes(1)))
    func realTimePacingTakesAsLongAsPlaying() async throws {
        let sink = NullSink(format: TestSignal.format, pacing: .realTime(buffer: .milliseconds(50)))
        let start = ContinuousClock.now
        for chunk in TestSignal.tone(seconds: 0.5) { try await sink.write(chunk) }
        let written = ContinuousClock.now - start
        try await sink.drain()
        let drained = ContinuousClock.now - start
        #expect(written >= .milliseconds(440) && written < .milliseconds(700))
        #expect(drained >= .milliseconds(500) && drained < .milliseconds(750))
    }

    @Test(.timeLimit(.minutes(1)))
    func flushEndsTheWaitForDrain() async throws {
        let sink = NullSink(format: TestSignal.format, pacing: .realTime(buffer: .seconds(10)))
        try await sink.write(TestSignal.tone(seconds: 5, chunk: 5)[0])
        try await sink.flush()
        let start = ContinuousClock.now
        try await sink.drain()
        // Without the flush the drain would wait out the 5 s written.
        #expect(ContinuousClock.now - start < .seconds(1))
    }
}
