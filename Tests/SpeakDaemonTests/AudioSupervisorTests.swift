import AudioOutput
import Foundation
import SpeakDaemon
import SpeechModel
import Synchronization
import Testing

/// A sink whose device opens only after a number of failed attempts: failure logic only, the
/// real sinks are exercised in `AudioRecoveryTests`.
final class FlakySink: ReopenableAudioSink {
    let format = AudioFormat(sampleRate: 22_050)
    let name = "flaky"
    private let state: Mutex<(failuresLeft: Int, attempts: Int, open: Bool)>

    init(failures: Int) {
        state = Mutex((failures, 0, false))
    }

    var attempts: Int { state.withLock { $0.attempts } }
    var isAvailable: Bool { state.withLock { $0.open } }

    func reopen() async throws {
        try state.withLock { state in
            state.attempts += 1
            if state.failuresLeft > 0 {
                state.failuresLeft -= 1
                state.open = false
                throw AudioOutputError.openFailed(sink: "flaky", "no device yet")
            }
            state.open = true
        }
    }

    /// Makes the next `failures` opens fail and marks the device lost.
    func lose(failures: Int) {
        state.withLock { state in
            state.failuresLeft = failures
            state.open = false
        }
    }

    func write(_ chunk: PCMChunk) async throws {}
    func drain() async throws {}
    func flush() async throws {}
    func close() async {}
}

@Suite("Audio supervisor")
struct AudioSupervisorTests {
    @Test(.timeLimit(.minutes(1))) func reconnectsWithBackoffAfterStartFailure() async throws {
        let sink = FlakySink(failures: 3)
        let supervisor = AudioSupervisor(
            spec: "flaky", makeSink: { sink }, initialBackoff: .milliseconds(10), maximumBackoff: .milliseconds(40))
        #expect(await supervisor.connect() == false)
        #expect(supervisor.status.available == false)
        #expect(supervisor.status.detail?.contains("no device yet") == true)
        #expect(supervisor.sink == nil)

        let running = Task { try await supervisor.run() }
        defer { running.cancel() }
        await supervisor.waitUntilAvailable()
        #expect(supervisor.status.available && supervisor.status.sink == "flaky" && supervisor.status.detail == nil)
        #expect(sink.attempts == 4)

        // Lost while running: reported, retried, recovered.
        sink.lose(failures: 2)
        supervisor.reportFailure(AudioOutputError.writeFailed(sink: "flaky", "device unplugged"))
        #expect(supervisor.status.available == false)
        #expect(supervisor.status.detail?.contains("device unplugged") == true)
        await supervisor.waitUntilAvailable()
        #expect(supervisor.status.available)
        #expect(sink.attempts == 7)
    }

    @Test(.timeLimit(.minutes(1))) func waitingEndsWhenCancelled() async throws {
        let supervisor = AudioSupervisor(spec: "flaky", makeSink: { FlakySink(failures: .max) })
        #expect(await supervisor.connect() == false)
        let waiter = Task { await supervisor.waitUntilAvailable() }
        try await Task.sleep(for: .milliseconds(20))
        waiter.cancel()
        await waiter.value
        #expect(supervisor.status.available == false)
    }
}
