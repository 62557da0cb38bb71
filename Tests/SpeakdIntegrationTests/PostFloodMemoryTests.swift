import Foundation
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// Accepted posts leave nothing behind once they have finished: a flood of them from a public
    /// hall's app holds the daemon's heap where it was, rather than growing it until the next
    /// quiet minute (every event used to start a timer of its own for `--idle-release`, and every
    /// post a timer for its output's session's idle timeout; a cancelled sleep keeps its timer
    /// and task until its deadline).
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct PostFloodMemoryTests {
        /// The daemon's anonymous resident memory (its heap and stacks), in KiB.
        static func anonymousKiB(_ pid: pid_t) -> Int {
            Int(ProcessTable.status(of: pid)["RssAnon"] ?? "") ?? 0
        }

        /// Posts `count` announcements that are dropped at once (one is speaking), from
        /// `clients` clients at a time; returns how many were accepted.
        static func flood(_ daemon: SpeakdProcess, count: Int, clients: Int = 16) async throws -> Int {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for client in 0..<clients {
                    group.addTask {
                        var accepted = 0
                        for _ in stride(from: client, to: count, by: clients) {
                            let response = try await daemon.unixClient.send(
                                "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
                                body: Array(#"{"text": "Gate four.", "dropIfBusy": true}"#.utf8))
                            if response.status == 202 { accepted += 1 }
                        }
                        return accepted
                    }
                }
                return try await group.reduce(0, +)
            }
        }

        @Test(
            "20,000 accepted posts grow the daemon's heap by less than 4 MiB, with or without a session on the output",
            arguments: [false, true])
        func aFloodOfPostsLeavesNothingBehind(withSession: Bool) async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            if withSession {
                // Each post refreshes the session's idle timeout (120 s).
                let put = try await daemon.unixClient.send(
                    "PUT", "/v1/session", headers: [("Content-Type", "application/json")],
                    body: Array(#"{"rate": 1.2}"#.utf8))
                #expect(put.status == 201, "\(String(decoding: put.body, as: UTF8.self))")
            }
            // Warm: the render cache, the finished memory (1,024) and the event history are full.
            _ = try await Self.flood(daemon, count: 3_000)
            let before = Self.anonymousKiB(daemon.pid)
            let accepted = try await Self.flood(daemon, count: 20_000)
            let after = Self.anonymousKiB(daemon.pid)
            #expect(accepted == 20_000)
            #expect(
                after - before < 4 * 1024,
                "the heap grew from \(before) KiB to \(after) KiB over \(accepted) accepted posts")
            let (status, _) = await daemon.stop()
            #expect(status == 0, "speakd exited with \(String(describing: status)); log:\n\(daemon.log)")
        }
    }
}
