import Foundation
import Logging
import SpeakClient
import SpeakDaemon
import SpeakTestSupport
import Testing

/// The TCP token file as the daemon's start reads it.
@Suite("Access token at the daemon's start")
struct AccessTokenDaemonTests {
    /// A daemon whose token file others may read does not start, and says why.
    @Test(.timeLimit(.minutes(1))) func daemonRefusesAnOpenTokenFile() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = testConfiguration(directory)
        try Data((AccessToken.generate() + "\n").utf8).write(to: URL(fileURLWithPath: configuration.tokenFile))
        chmod(configuration.tokenFile, 0o604)
        await #expect {
            _ = try await buildDaemon(configuration, logger: Logger(label: "test"), gracefulShutdownSignals: [])
        } throws: { error in
            "\(error)".contains(configuration.tokenFile) && "\(error)".contains("mode 0604")
        }
    }
}
