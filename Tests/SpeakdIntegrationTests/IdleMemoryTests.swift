import Foundation
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// An idle daemon and its engine processes keep little of their code mapped: starting and
    /// speaking map most of it (the kernel maps the 64 kB around every page run), and each
    /// process releases those mappings once it is idle (`CodePages`, `--idle-release`;
    /// docs/performance.md, "The plain release build was over").
    @Suite(.serialized, .timeLimit(.minutes(1)))
    struct IdleMemoryTests {
        /// The code `pid` has mapped in, and how much it has mapped, in KiB, with the three files
        /// it has most of in.
        static func code(of pid: pid_t) -> (resident: Int, mapped: Int, most: [String]) {
            let code = ProcessTable.codeMappings(of: pid)
            let most = code.sorted { $0.residentKiB > $1.residentKiB }.prefix(3)
                .map { "\(($0.path as NSString).lastPathComponent) \($0.residentKiB) KiB" }
            return (code.reduce(0) { $0 + $1.residentKiB }, code.reduce(0) { $0 + $1.bytes } / 1024, most)
        }

        @Test(
            "Two seconds after speaking, speakd, its worker template and its workers each keep under a fifth of their code mapped"
        )
        func idleProcessesReleaseTheirCode() async throws {
            let daemon = try await SpeakdProcess.start(
                audio: "null", arguments: ["--engine-workers", "2", "--idle-release", "1"])
            // Both workers render (two at once), and the daemon handles requests and speaks.
            async let first = daemon.unixClient.send(
                "POST", "/v1/announcements?wait=true", json: ["text": "The museum closes in fifteen minutes."])
            async let second = daemon.unixClient.send(
                "POST", "/v1/speech", json: ["text": "Boarding will begin shortly at gate four."])
            let (spoken, rendered) = try await (first, second)
            #expect(spoken.status == 200, "\(String(decoding: spoken.body, as: UTF8.self))")
            #expect(rendered.status == 200)
            let busy = ProcessTable.tree(of: daemon.pid).map { Self.code(of: $0) }
            // A second without announcements, and the worker's second after its job, have passed.
            try await Task.sleep(for: .seconds(2.5))
            let processes = ProcessTable.tree(of: daemon.pid)
            #expect(processes.count == 4, "speakd, the template and two workers: \(processes)")
            for pid in processes {
                let (resident, mapped, most) = Self.code(of: pid)
                #expect(
                    resident * 5 < mapped,
                    "process \(pid): \(resident) KiB of its \(mapped) KiB of code mapped in; most: \(most); busy: \(busy.map(\.resident))"
                )
            }
            let (status, _) = await daemon.stop()
            #expect(status == 0, "speakd exited with \(String(describing: status)); log:\n\(daemon.log)")
        }
    }
}
