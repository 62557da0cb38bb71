import Foundation
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// Accepted posts leave nothing behind once they have finished: a flood of them from a public
    /// hall's app holds the daemon's heap where it was. Each of these once started a timer that
    /// a later event cancelled, and a cancelled `Task.sleep` keeps its timer and its task until
    /// its deadline: every event a timer for `--idle-release` (a minute), every post to a
    /// session's output one for the session's idle timeout (two minutes), every waiting
    /// announcement one for its `expiresAfter` (up to a day).
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct PostFloodMemoryTests {
        enum Flood: String, CaseIterable, CustomTestStringConvertible {
            /// Each post is dropped at once, one speaking.
            case dropped
            /// The same, to an output with a session, which each post refreshes.
            case droppedWithSession
            /// Each post waits behind a long announcement with `expiresAfter` of a day, and the
            /// next replaces it (its `replaceGroup`) before it expires.
            case replacedWhileWaiting

            var body: String {
                switch self {
                case .dropped, .droppedWithSession: #"{"text": "Gate four.", "dropIfBusy": true}"#
                case .replacedWhileWaiting:
                    #"{"text": "Gate four.", "expiresAfter": 86400, "replaceGroup": "gate"}"#
                }
            }

            var testDescription: String { rawValue }
        }

        /// The daemon's anonymous resident memory (its heap and stacks), in KiB.
        static func anonymousKiB(_ pid: pid_t) -> Int {
            Int(ProcessTable.status(of: pid)["RssAnon"] ?? "") ?? 0
        }

        /// Posts `count` announcements with `body`, from `clients` clients at a time; returns how
        /// many were accepted.
        static func flood(_ daemon: SpeakdProcess, _ body: String, count: Int, clients: Int = 16) async throws -> Int {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for client in 0..<clients {
                    group.addTask {
                        var accepted = 0
                        for _ in stride(from: client, to: count, by: clients) {
                            let response = try await daemon.unixClient.send(
                                "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
                                body: Array(body.utf8))
                            if response.status == 202 { accepted += 1 }
                        }
                        return accepted
                    }
                }
                return try await group.reduce(0, +)
            }
        }

        @Test("20,000 accepted posts grow the daemon's heap by less than 4 MiB", arguments: Flood.allCases)
        func aFloodOfPostsLeavesNothingBehind(_ flood: Flood) async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            switch flood {
            case .dropped: break
            case .droppedWithSession:
                // Each post refreshes the session's idle timeout (120 s).
                let put = try await daemon.unixClient.send(
                    "PUT", "/v1/session", headers: [("Content-Type", "application/json")],
                    body: Array(#"{"rate": 1.2}"#.utf8))
                #expect(put.status == 201, "\(String(decoding: put.body, as: UTF8.self))")
            case .replacedWhileWaiting:
                // Speaks for minutes, so every post of the flood waits behind it.
                let long = String(repeating: "This announcement keeps the queue busy. ", count: 60)
                let first = try await daemon.unixClient.send(
                    "POST", "/v1/announcements", json: ["text": long])
                #expect(first.status == 202, "\(String(decoding: first.body, as: UTF8.self))")
            }
            // Warm: the render cache, the finished memory (1,024) and the event history are full.
            _ = try await Self.flood(daemon, flood.body, count: 3_000)
            let before = Self.anonymousKiB(daemon.pid)
            let accepted = try await Self.flood(daemon, flood.body, count: 20_000)
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
