import Foundation
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// Which state directories the real daemon starts on: speakd's user's, writable by it alone
    /// (as the units' StateDirectory= makes it, or systemd's default 0755), also through a
    /// symbolic link; one its group or others may write to, or another user's, stops the start.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct StateDirectoryModeTests {
        /// A fresh directory under /tmp to hold the state directory, 0700 whatever the umask.
        static func parent() throws -> URL {
            let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent(
                "speakd-statemode-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            return directory
        }

        /// The permission bits of `path`, a symbolic link not followed.
        static func mode(_ path: String) -> mode_t? {
            var status = stat()
            return lstat(path, &status) == 0 ? status.st_mode & 0o7777 : nil
        }

        @Test(
            "A state directory only its owner may write to is used: 0700 as the units make it, 0750, 0755 (StateDirectory='s default); the database is 0600",
            arguments: [0o700, 0o750, 0o755] as [mode_t])
        func closedToWritersIsUsed(mode: mode_t) async throws {
            let parent = try Self.parent()
            defer { try? FileManager.default.removeItem(at: parent) }
            let state = parent.appendingPathComponent("state").path
            #expect(mkdir(state, 0o700) == 0 && chmod(state, mode) == 0)
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--state-dir", state])
            #expect(try await daemon.unixClient.send("GET", "/v1/schedules").status == 200, "\(daemon.log)")
            #expect(Self.mode(state + "/speakd.sqlite") == 0o600)
            #expect(Self.mode(state) == mode, "the directory's mode is left as its owner set it")
            let (status, _) = await daemon.stop()
            #expect(status == 0, "\(daemon.log)")
        }

        @Test("A state directory reached through a symbolic link, its target speakd's user's and 0700, is used")
        func throughALinkIsUsed() async throws {
            let parent = try Self.parent()
            defer { try? FileManager.default.removeItem(at: parent) }
            let target = parent.appendingPathComponent("data").path
            #expect(mkdir(target, 0o700) == 0)
            let link = parent.appendingPathComponent("state").path
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--state-dir", link])
            #expect(try await daemon.unixClient.send("GET", "/v1/schedules").status == 200, "\(daemon.log)")
            #expect(FileManager.default.fileExists(atPath: target + "/speakd.sqlite"))
            let (status, _) = await daemon.stop()
            #expect(status == 0, "\(daemon.log)")
        }

        @Test(
            "A state directory its group or others may write to stops the start, exit 1 naming it and its mode; nothing is created in it",
            arguments: [0o770, 0o775, 0o757, 0o777, 0o1777] as [mode_t])
        func openToWritersIsRefused(mode: mode_t) async throws {
            let parent = try Self.parent()
            defer { try? FileManager.default.removeItem(at: parent) }
            let state = parent.appendingPathComponent("state").path
            #expect(mkdir(state, 0o700) == 0 && chmod(state, mode) == 0)
            let refused = try await SpeakdProcess.startRefused(
                audio: "null", arguments: ["--state-dir", state], timeout: .seconds(20))
            #expect(refused.status == 1, "\(refused)")
            #expect(refused.log.contains("--state-dir"), "\(refused)")
            #expect(refused.log.contains("\(state) is refused"), "\(refused)")
            #expect(refused.log.contains("its mode \(String(mode, radix: 8))"), "\(refused)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: state).isEmpty)
        }

        @Test(
            "Another user's state directory, even 0700, stops the start naming its owner",
            .enabled(if: geteuid() == 0, "giving a directory to another user needs root (as CI has)"))
        func anotherUsersIsRefused() async throws {
            let parent = try Self.parent()
            defer { try? FileManager.default.removeItem(at: parent) }
            let state = parent.appendingPathComponent("state").path
            #expect(mkdir(state, 0o700) == 0 && chown(state, 65_534, 65_534) == 0)
            let refused = try await SpeakdProcess.startRefused(
                audio: "null", arguments: ["--state-dir", state], timeout: .seconds(20))
            #expect(refused.status == 1, "\(refused)")
            #expect(refused.log.contains("\(state) is refused"), "\(refused)")
            #expect(refused.log.contains("owned by uid 65534"), "\(refused)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: state).isEmpty)
        }
    }
}
