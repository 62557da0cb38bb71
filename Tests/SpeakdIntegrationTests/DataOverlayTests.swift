import Foundation
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// The private espeak-ng data directory (the overlay with the voice variants) lives only as
    /// long as the daemon.
    @Suite(.serialized, .timeLimit(.minutes(1)))
    struct DataOverlayTests {
        @Test("speakd removes its espeak-ng data overlay from its runtime directory when it exits")
        func overlayRemovedAtExit() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let runtime = daemon.directory.appendingPathComponent("runtime").path
            func overlays() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: runtime).filter { $0.hasPrefix("speakd-espeak-") }
            }
            let running = try overlays()
            #expect(running.count == 1, "\(running)")
            #expect(running.first?.hasPrefix("speakd-espeak-\(daemon.pid)-") == true, "\(running)")
            let (status, _) = await daemon.stop()
            #expect(status == 0)
            let after = try overlays()
            #expect(after.isEmpty, "left behind: \(after)")
        }

        /// Its modes do not follow the umask: only the daemon's user may change what espeak-ng
        /// reads (a group-writable overlay let any client replace a dictionary), and a root
        /// daemon's workers, which run as another user, can still read it.
        @Test("the overlay is writable by the daemon's user alone, whatever the umask", arguments: [0o002, 0o077])
        func overlayModeIgnoresTheUmask(umask mask: Int) async throws {
            let previous = umask(mode_t(mask))
            defer { umask(previous) }
            let daemon = try await SpeakdProcess.start(audio: "null")
            umask(previous)
            let runtime = daemon.directory.appendingPathComponent("runtime")
            let name = try #require(
                try FileManager.default.contentsOfDirectory(atPath: runtime.path).first {
                    $0.hasPrefix("speakd-espeak-")
                })
            let overlay = runtime.appendingPathComponent(name)
            let variants = overlay.appendingPathComponent("voices/!v")
            let copied = try FileManager.default.contentsOfDirectory(atPath: variants.path).map {
                variants.appendingPathComponent($0)
            }.filter { (try? $0.resourceValues(forKeys: [.isSymbolicLinkKey]).isSymbolicLink) == false }
            #expect(!copied.isEmpty, "no variant of the project's own in \(variants.path)")
            let (directoryMode, fileMode) = geteuid() == 0 ? (0o755, 0o644) : (0o700, 0o600)
            func mode(_ url: URL) throws -> Int {
                try (FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int) ?? -1
            }
            for directory in [overlay, overlay.appendingPathComponent("voices"), variants] {
                #expect(try mode(directory) == directoryMode, "\(directory.path)")
            }
            for file in copied { #expect(try mode(file) == fileMode, "\(file.path)") }
            let wav = try await daemon.speech(["text": "Olá, bom dia", "language": "pt-PT"], raw: true)
            #expect(wav.samples.count > 8_000, "the workers read the overlay")
            _ = await daemon.stop()
        }
    }
}
