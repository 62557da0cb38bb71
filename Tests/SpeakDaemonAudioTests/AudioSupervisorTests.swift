import AnnouncementQueue
import AudioOutput
import Foundation
import SpeakDaemon
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

/// A sink whose opens the test scripts (succeed, fail, or block until released) and whose health
/// it sets: failure logic only, the real sinks are exercised in `AudioRecoveryTests` and
/// `AudioStallTests`.
final class ScriptedSink: ReopenableAudioSink {
    enum Open: Sendable {
        case succeed
        case fail(String)
        /// Blocks until `releaseOpen()`, then succeeds.
        case block
    }

    struct Log {
        var opens = 0
        var closes = 0
        var flushes = 0
        var script: [Open] = []
        var available = true
        var lastError: AudioOutputError?
        /// Thrown by the next flush, which also makes the sink unavailable: a flush that timed out.
        var failNextFlush: AudioOutputError?
        var openGate: CheckedContinuation<Void, Never>?
        var openReleased = false
        var unavailableHandler: (@Sendable () -> Void)?
    }

    let format = AudioFormat(sampleRate: 22_050)
    let name = "scripted"
    let log = Mutex(Log())

    init(_ script: [Open] = []) {
        log.withLock { $0.script = script }
    }

    var opens: Int { log.withLock { $0.opens } }
    var isAvailable: Bool { log.withLock { $0.available } }
    var lastError: AudioOutputError? { log.withLock { $0.lastError } }

    func whenUnavailable(_ handler: @escaping @Sendable () -> Void) {
        log.withLock { $0.unavailableHandler = handler }
    }

    /// Makes the sink say it failed, as a device sink does after a call failed or timed out.
    func breakDown(_ error: AudioOutputError) {
        let handler = log.withLock { log in
            defer {
                log.available = false
                log.lastError = error
            }
            return log.available ? log.unavailableHandler : nil
        }
        handler?()
    }

    func releaseOpen() {
        let gate = log.withLock { log in
            defer { log.openGate = nil }
            if log.openGate == nil { log.openReleased = true }
            return log.openGate
        }
        gate?.resume()
    }

    func reopen() async throws {
        let next = log.withLock { log -> Open in
            log.opens += 1
            return log.script.isEmpty ? .succeed : log.script.removeFirst()
        }
        switch next {
        case .succeed:
            break
        case .fail(let message):
            breakDown(.openFailed(sink: name, message))
            throw AudioOutputError.openFailed(sink: name, message)
        case .block:
            await withCheckedContinuation { continuation in
                let released = log.withLock { log in
                    if log.openReleased {
                        log.openReleased = false
                        return true
                    }
                    log.openGate = continuation
                    return false
                }
                if released { continuation.resume() }
            }
        }
        log.withLock { log in
            log.available = true
            log.lastError = nil
        }
    }

    func write(_ chunk: PCMChunk) async throws {
        try await Task.sleep(for: .milliseconds(5))
    }

    func drain() async throws {}

    func flush() async throws {
        let failure = log.withLock { log in
            log.flushes += 1
            defer { log.failNextFlush = nil }
            return log.failNextFlush
        }
        if let failure {
            breakDown(failure)
            throw failure
        }
    }

    func close() async {
        log.withLock { $0.closes += 1 }
    }
}

/// Polls `condition` for up to five seconds of real time; true once it holds.
func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<1_000 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

@Suite("Audio supervisor")
struct AudioSupervisorTests {
    typealias Phase = AudioSupervisor.Phase

    func makeSupervisor(_ sink: ScriptedSink, clock: ManualClock = ManualClock()) -> AudioSupervisor {
        AudioSupervisor(spec: "scripted", makeSink: { sink }, clock: clock)
    }

    @Test func onlyTheDrawnTransitionsAreAllowed() {
        let allowed: Set<[Phase]> = [
            [.unopened, .opening], [.opening, .ready], [.opening, .failed], [.ready, .failed], [.failed, .opening],
            [.unopened, .stopped], [.opening, .stopped], [.ready, .stopped], [.failed, .stopped],
        ]
        for from in Phase.allCases {
            for to in Phase.allCases {
                #expect(from.allows(to) == allowed.contains([from, to]), "\(from) → \(to)")
            }
        }
    }

    @Test(.timeLimit(.minutes(1))) func unopenedThenOpeningThenReady() async throws {
        let sink = ScriptedSink([.block])
        let supervisor = makeSupervisor(sink)
        #expect(supervisor.status.phase == .unopened)
        #expect(supervisor.status.detail == "the audio sink has not been opened yet")
        #expect(supervisor.lease() == nil)

        let connecting = Task { await supervisor.connect() }
        #expect(await eventually { supervisor.status.phase == .opening })
        #expect(supervisor.status.available == false)
        #expect(supervisor.status.detail == "opening the audio sink")
        #expect(supervisor.lease() == nil)
        let waiter = Task { await supervisor.waitUntilAvailable() }

        sink.releaseOpen()
        #expect(await connecting.value)
        await waiter.value
        let status = supervisor.status
        #expect(status.available && status.sink == "scripted" && status.detail == nil && status.phase == .ready)
        #expect(supervisor.lease() != nil)
        // Already ready: nothing is opened again.
        #expect(await supervisor.connect())
        #expect(sink.opens == 1)
    }

    @Test(.timeLimit(.minutes(1))) func failedOpensBackOffDoublingUpToTheCap() async throws {
        let sink = ScriptedSink(Array(repeating: .fail("no device yet"), count: 7))
        let clock = ManualClock()
        let supervisor = makeSupervisor(sink, clock: clock)
        #expect(await supervisor.connect() == false)
        #expect(supervisor.status.phase == .failed)
        #expect(supervisor.status.detail == "cannot open: no device yet")

        let running = Task { try await supervisor.run() }
        defer { running.cancel() }
        // Each wait, in milliseconds, after the 1st to 7th failed open.
        for (failed, wait) in [50, 100, 200, 400, 500, 500, 500].enumerated() {
            await clock.waitForSleepers(1)
            #expect(sink.opens == failed + 1)
            clock.advance(by: .milliseconds(wait - 1))
            try await Task.sleep(for: .milliseconds(20))
            #expect(sink.opens == failed + 1, "opened again before the \(wait) ms backoff")
            clock.advance(by: .milliseconds(1))
            #expect(await eventually { sink.opens == failed + 2 })
        }
        await supervisor.waitUntilAvailable()
        #expect(supervisor.status.phase == .ready)
        #expect(sink.opens == 8)
    }

    @Test(.timeLimit(.minutes(1))) func aFailureWhileReadyReopensAtOnceAndStaleReportsAreIgnored() async throws {
        let sink = ScriptedSink([.succeed, .fail("Connection refused")])
        let clock = ManualClock()
        let supervisor = makeSupervisor(sink, clock: clock)
        #expect(await supervisor.connect())
        let running = Task { try await supervisor.run() }
        defer { running.cancel() }
        let first = try #require(supervisor.lease())

        supervisor.reportFailure(AudioOutputError.writeFailed(sink: "scripted", "Connection terminated"), on: first)
        #expect(supervisor.status.available == false)
        // The loop may already have tried once.
        let detail = supervisor.status.detail ?? ""
        #expect(detail == "write failed: Connection terminated" || detail == "cannot open: Connection refused")
        #expect(supervisor.lease() == nil)
        // The first reopen does not wait (it fails: the server is still away); the next waits 50 ms.
        #expect(await eventually { sink.opens == 2 && supervisor.status.phase == .failed })
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(50))
        await supervisor.waitUntilAvailable()
        #expect(sink.opens == 3)
        let second = try #require(supervisor.lease())

        // A late failure from before the reopen does not undo it.
        supervisor.reportFailure(AudioOutputError.flushFailed(sink: "scripted", "late"), on: first)
        #expect(supervisor.status.phase == .ready)
        #expect(supervisor.lease() != nil)
        #expect(sink.opens == 3)
        // A failure under the current open does: the sink is reopened.
        supervisor.reportFailure(AudioOutputError.flushFailed(sink: "scripted", "now"), on: second)
        #expect(await eventually { sink.opens == 4 })
        await supervisor.waitUntilAvailable()
    }

    @Test(.timeLimit(.minutes(1))) func aSinkThatSaysItFailedIsNoticedWithoutAReport() async throws {
        let sink = ScriptedSink()
        let clock = ManualClock()
        let supervisor = makeSupervisor(sink, clock: clock)
        #expect(await supervisor.connect())
        let running = Task { try await supervisor.run() }
        defer { running.cancel() }
        // A ready supervisor sets no timer: nothing wakes an idle daemon to look at the sink.
        try await Task.sleep(for: .milliseconds(50))
        #expect(clock.sleeperCount == 0)

        // The sink tells it failed; the loop reopens with no time passing on the clock.
        sink.breakDown(.timedOut(sink: "scripted", operation: "flush", limit: .seconds(2)))
        #expect(await eventually { sink.opens == 2 })
        await supervisor.waitUntilAvailable()
        #expect(supervisor.status.available)
        #expect(clock.sleeperCount == 0)
    }

    /// The reported sequence, reduced: a cancel whose flush times out on a frozen server. Playback
    /// throws only the cancellation; the supervisor must still learn the sink failed and reopen.
    @Test(.timeLimit(.minutes(1))) func aFlushThatFailsWhileCancellingIsReportedAndReopened() async throws {
        let sink = ScriptedSink()
        let clock = ManualClock()
        let supervisor = makeSupervisor(sink, clock: clock)
        #expect(await supervisor.connect())
        let running = Task { try await supervisor.run() }
        defer { running.cancel() }
        let speaker = EngineSpeaker(
            renderer: FakeRenderer(sound: .silence(chunks: 1_000, samples: 220)), audio: supervisor)

        sink.log.withLock {
            $0.failNextFlush = .timedOut(sink: "scripted", operation: "write", limit: .seconds(2))
        }
        let announcement = Announcement(
            id: "a1",
            speech: try await FakeRenderer(sound: .silence(chunks: 1_000, samples: 220)).prepare(
                Utterance("Platform four")))
        let speaking = Task { try await speaker.speak(announcement) }
        try await Task.sleep(for: .milliseconds(50))
        speaking.cancel()
        await #expect(throws: CancellationError.self) { try await speaking.value }
        #expect(sink.log.withLock { $0.flushes } == 1)
        #expect(await eventually { sink.opens == 2 })
        await supervisor.waitUntilAvailable()
        #expect(supervisor.status.available)
    }

    @Test(.timeLimit(.minutes(1))) func speakingWhileUnavailableThrowsTheDetail() async throws {
        let sink = ScriptedSink([.fail("no device yet")])
        let supervisor = makeSupervisor(sink)
        #expect(await supervisor.connect() == false)
        let speaker = EngineSpeaker(
            renderer: FakeRenderer(sound: .silence(chunks: 1_000, samples: 220)), audio: supervisor)
        let announcement = Announcement(
            id: "a1",
            speech: try await FakeRenderer(sound: .silence(chunks: 1_000, samples: 220)).prepare(
                Utterance("Anyone there?")))
        let error = await #expect(throws: (any Error).self) {
            try await speaker.speak(announcement)
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("cannot open: no device yet"))
    }

    @Test(.timeLimit(.minutes(1)), arguments: [Phase.ready, .failed, .opening])
    func shutdownStopsFrom(_ phase: Phase) async throws {
        let sink = ScriptedSink(phase == .failed ? [.fail("no device"), .fail("no device")] : [.succeed, .block])
        let clock = ManualClock()
        let supervisor = makeSupervisor(sink, clock: clock)
        await supervisor.connect()
        let running = Task { try await supervisor.run() }
        if phase == .opening, let lease = supervisor.lease() {
            supervisor.reportFailure(AudioOutputError.writeFailed(sink: "scripted", "gone"), on: lease)
            #expect(await eventually { supervisor.status.phase == .opening })
        }
        if phase == .failed { await clock.waitForSleepers(1) }
        #expect(supervisor.status.phase == phase)
        let waiter = Task { await supervisor.waitUntilAvailable() }

        running.cancel()
        if phase == .opening {
            // An open under way is bounded by the sink's own time limit; then the device is released.
            try await Task.sleep(for: .milliseconds(50))
            sink.releaseOpen()
        }
        try await running.value
        await waiter.value
        #expect(supervisor.status.phase == .stopped)
        #expect(supervisor.status.detail == "speakd is shutting down")
        #expect(supervisor.lease() == nil)
        #expect(sink.log.withLock { $0.closes } >= 1)
        let opens = sink.opens
        #expect(await supervisor.connect() == false)
        #expect(sink.opens == opens)
    }

    @Test(.timeLimit(.minutes(1))) func waitingEndsWhenCancelled() async throws {
        let supervisor = makeSupervisor(ScriptedSink([.fail("no device")]))
        #expect(await supervisor.connect() == false)
        let waiter = Task { await supervisor.waitUntilAvailable() }
        try await Task.sleep(for: .milliseconds(20))
        waiter.cancel()
        await waiter.value
        #expect(supervisor.status.available == false)
    }
}
