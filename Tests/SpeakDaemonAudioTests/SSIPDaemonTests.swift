import Foundation
import SpeakDaemon
import SpeakTestSupport
import Testing

/// `--ssip` as `buildDaemon` wires it: ready only once the SSIP socket listens, mode 0600, gone
/// after shutdown; and a path another process answers on stops the start, naming `--ssip`.
@Suite("SSIP listener in the daemon", .serialized)
struct SSIPDaemonTests {
    @Test(.timeLimit(.minutes(1))) func readyMeansTheSSIPSocketListensWithMode0600() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = testConfiguration(directory)
        let path = directory.appendingPathComponent("speech-dispatcher/speechd.sock").path
        configuration.ssipPath = path
        try await withDaemon(configuration) { daemon, _, _ in
            #expect(daemon.ssip?.path == path)
            var info = stat()
            #expect(lstat(path, &info) == 0, "no SSIP socket once ready")
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            #expect(info.st_mode & 0o777 == 0o600)
        }
        #expect(!FileManager.default.fileExists(atPath: path), "the SSIP socket is left behind")
    }

    @Test(.timeLimit(.minutes(1))) func aSocketThatAnswersStopsTheStart() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var first = testConfiguration(directory)
        let path = directory.appendingPathComponent("speechd.sock").path
        first.ssipPath = path
        try await withDaemon(first) { _, _, _ in
            var second = testConfiguration(directory.appendingPathComponent("second"))
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("second"), withIntermediateDirectories: true)
            second.http = nil
            second.ssipPath = path
            await #expect {
                _ = try await buildDaemon(second)
            } throws: { error in
                "\(error)".hasPrefix("--ssip: ") && "\(error)".contains("answers on the socket")
            }
        }
    }
}
