import Foundation
import Logging
import SpeakAPI
import SpeakClient
import SpeakDaemon
import SpeakTestSupport
import Testing

/// The TCP token file: made once, reused, refused when others can read it; found by clients.
@Suite("Access token")
struct AccessTokenTests {
    private static func mode(_ path: String) -> mode_t {
        var info = stat()
        stat(path, &info)
        return info.st_mode & 0o777
    }

    @Test func createdOnceWithGroupReadableModeThenReused() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("token").path
        let first = try AccessToken.loadOrCreate(at: path)
        #expect(first.created)
        #expect(first.token.count == 64)
        #expect(first.token.allSatisfy { $0.isHexDigit })
        #expect(Self.mode(path) == 0o640)
        #expect(try AccessToken.read(from: path) == first.token)
        let second = try AccessToken.loadOrCreate(at: path)
        #expect(!second.created)
        #expect(second.token == first.token)
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["token"])
        // Two tokens made in a row differ: they come from the system's generator.
        #expect(AccessToken.generate() != AccessToken.generate())
    }

    @Test func unusableFilesAreRefusedWithTheReason() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let open = directory.appendingPathComponent("open").path
        try Data((AccessToken.generate() + "\n").utf8).write(to: URL(fileURLWithPath: open))
        chmod(open, 0o644)
        #expect {
            try AccessToken.loadOrCreate(at: open)
        } throws: { error in
            "\(error)".contains("mode 0644") && "\(error)".contains("chmod 0640")
        }
        let short = directory.appendingPathComponent("short").path
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: short))
        chmod(short, 0o600)
        #expect {
            try AccessToken.loadOrCreate(at: short)
        } throws: { error in
            "\(error)".contains("at least 32")
        }
        #expect {
            try AccessToken.loadOrCreate(at: directory.appendingPathComponent("missing/token").path)
        } throws: { error in
            "\(error)".contains("cannot write the token file") && "\(error)".contains("No such file")
        }
        #expect {
            try AccessToken.read(from: directory.appendingPathComponent("absent").path)
        } throws: { error in
            "\(error)".contains("cannot read the token file")
        }
    }

    @Test func clientsFindTheTokenInOrder() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socketDirectory = directory.appendingPathComponent("speakd")
        try FileManager.default.createDirectory(at: socketDirectory, withIntermediateDirectories: true)
        let nextToSocket = try AccessToken.loadOrCreate(at: socketDirectory.appendingPathComponent("token").path).token
        let other = try AccessToken.loadOrCreate(at: directory.appendingPathComponent("other").path).token
        let inline = String(repeating: "z", count: 40)
        let xdg = ["XDG_RUNTIME_DIR": directory.path]
        let otherPath = directory.appendingPathComponent("other").path

        #expect(try AccessToken.find(file: nil, environment: xdg) == nextToSocket)
        #expect(try AccessToken.find(file: nil, environment: xdg.merging(["SPEAKD_TOKEN": inline]) { $1 }) == inline)
        #expect(
            try AccessToken.find(
                file: nil, environment: xdg.merging(["SPEAKD_TOKEN": inline, "SPEAKD_TOKEN_FILE": otherPath]) { $1 })
                == other)
        #expect(
            try AccessToken.find(file: otherPath, environment: xdg.merging(["SPEAKD_TOKEN_FILE": "/nope"]) { $1 })
                == other)
        #expect(
            try AccessToken.find(
                file: nil, environment: ["SPEAKD_SOCKET": socketDirectory.appendingPathComponent("s.sock").path])
                == nextToSocket)
        #expect(throws: AccessTokenError.self) {
            try AccessToken.find(file: nil, environment: ["SPEAKD_TOKEN": "short"])
        }
        #expect(
            AccessToken.defaultFiles(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"]) == [
                "/run/user/1000/speakd/token", "/run/speakd/token",
            ])
    }
}
