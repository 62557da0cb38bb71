import Foundation
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// An idle daemon sleeps: no timer, poll or watchdog wakes it or its workers while there is
    /// nothing to do (DESIGN: at most one wake-up a second; a fanless kiosk pays for each).
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct IdleWakeupTests {
        /// Seconds counted, after the daemon has settled.
        static let window = 5.0

        @Test(
            "An idle speakd with two workers on a PulseAudio sink, after one announcement: its threads and its workers' wake at most once a second over 5 s"
        )
        func idleDaemonAndWorkersSleep() async throws {
            let pulse = try await PulseAudioServer.start()
            do {
                let daemon = try await SpeakdProcess.start(
                    audio: "pulse", arguments: ["--engine-workers", "2"], environment: pulse.environment)
                // One announcement spoken to the end, so every part that works for speech (the
                // stall watch, the sink, playback) has run once and must have gone quiet again.
                let response = try await daemon.unixClient.send(
                    "POST", "/v1/announcements?wait=true", json: ["text": "Platform four."])
                #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
                // Over by then: the stream's idle release (0.5 s), a worker's heap trim (1 s), and
                // the exit of the Dispatch threads the announcement woke (idle for 5 s).
                try await Task.sleep(for: .seconds(7))

                let before = ProcessTable.threadSwitches(of: daemon.pid)
                let cpuBefore = ProcessTable.tree(of: daemon.pid).map(ProcessTable.cpuSeconds).reduce(0, +)
                try await Task.sleep(for: .seconds(Self.window))
                let woken = ProcessTable.wakeups(from: before, to: ProcessTable.threadSwitches(of: daemon.pid))
                let cpu = ProcessTable.tree(of: daemon.pid).map(ProcessTable.cpuSeconds).reduce(0, +) - cpuBefore
                // Nor does anything spin: a thread that never sleeps makes no wake-ups.
                #expect(cpu < 0.05, "the daemon and its workers used \(cpu) s of CPU while idle")
                let total = woken.reduce(0) { $0 + $1.switches }
                let threads = woken.map { "\($0.name): \($0.switches)" }.joined(separator: ", ")
                // One a second is the limit, and libdispatch's own once a second (its worker pool
                // monitor, on Linux, in every process that has used a Dispatch worker) is left:
                // a 1 Hz source is seen 5 or 6 times in 5 s.
                #expect(
                    Double(total) <= Self.window + 1,
                    "\(total) wake-ups in \(Self.window) s over \(before.count) threads: \(threads)")
                let (status, _) = await daemon.stop()
                #expect(status == 0, "speakd exited with \(String(describing: status)); log:\n\(daemon.log)")
            } catch {
                await pulse.stop()
                throw error
            }
            await pulse.stop()
        }
    }
}
