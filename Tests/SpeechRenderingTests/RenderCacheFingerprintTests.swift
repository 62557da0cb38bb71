import Foundation
import SpeechRendering
import Testing

/// The fingerprint of the engines' files that a render cache on disk holds in its identity.
struct RenderCacheFingerprintTests {
    @Test func theFingerprintFollowsTheFilesNotWhereTheyAre() async throws {
        try await RenderCacheDiskTests.withDirectory { directory in
            let files = FileManager.default
            try files.createDirectory(atPath: directory + "/a/voices", withIntermediateDirectories: true)
            try Data("pitch 80 120".utf8).write(to: URL(fileURLWithPath: directory + "/a/voices/kiosk"))
            try Data(repeating: 1, count: 100_000).write(to: URL(fileURLWithPath: directory + "/a/phondata"))
            // Whole seconds: a `Date` does not keep a file time's nanoseconds.
            let built = Date(timeIntervalSince1970: 1_700_000_000)
            try files.setAttributes([.modificationDate: built], ofItemAtPath: directory + "/a/phondata")
            let first = RenderCache.fingerprint(ofFilesUnder: [directory + "/a"])
            #expect(first.count == 32)
            #expect(RenderCache.fingerprint(ofFilesUnder: [directory + "/a"]) == first)
            // The same files elsewhere (a private data directory made anew at each start).
            try files.copyItem(atPath: directory + "/a", toPath: directory + "/b")
            try files.setAttributes([.modificationDate: built], ofItemAtPath: directory + "/b/phondata")
            #expect(RenderCache.fingerprint(ofFilesUnder: [directory + "/b"]) == first)
            // A variant changed, or a large file replaced.
            try Data("pitch 90 130".utf8).write(to: URL(fileURLWithPath: directory + "/b/voices/kiosk"))
            #expect(RenderCache.fingerprint(ofFilesUnder: [directory + "/b"]) != first)
            try files.setAttributes(
                [.modificationDate: Date(timeIntervalSince1970: 1_000)], ofItemAtPath: directory + "/a/phondata")
            #expect(RenderCache.fingerprint(ofFilesUnder: [directory + "/a"]) != first)
            // Names count as they are.
            #expect(RenderCache.fingerprint(ofFilesUnder: [], with: ["numpy-2.4.6.dist-info"]) != first)
            #expect(
                RenderCache.fingerprint(ofFilesUnder: [], with: ["numpy-2.4.6.dist-info"])
                    != RenderCache.fingerprint(ofFilesUnder: [], with: ["numpy-2.4.7.dist-info"]))
        }
    }

    /// The cache's identity is made of what each engine says it is: another version of an engine,
    /// or other voices, is another identity; on disk, so are other files.
    @Test func theIdentityFollowsEachEnginesVersionAndFiles() async throws {
        try await RenderCacheDiskTests.withDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let voice = directory + "/amy.onnx.json"
            try Data(#"{"audio": {"sample_rate": 22050}}"#.utf8).write(to: URL(fileURLWithPath: voice))
            let espeak = EngineIdentity(name: "espeak-ng", version: "1.52.0")
            let piper = EngineIdentity(
                name: "piper", version: "1.8.0", details: ["amy"], files: [voice], names: ["piper_tts-1.8.0.dist-info"])
            let memory = RenderCache.identity(speakd: "2.0", engines: [espeak, piper], onDisk: false)
            #expect(memory == "speakd 2.0; espeak-ng 1.52.0; piper 1.8.0 (amy)")
            var upgraded = piper
            upgraded.version = "1.9.0"
            #expect(RenderCache.identity(speakd: "2.0", engines: [espeak, upgraded], onDisk: false) != memory)
            var otherVoices = piper
            otherVoices.details = ["amy", "joe"]
            #expect(RenderCache.identity(speakd: "2.0", engines: [espeak, otherVoices], onDisk: false) != memory)
            #expect(RenderCache.identity(speakd: "2.0", engines: [espeak], onDisk: false) != memory)
            // On disk the files count: a voice retrained under the same name and version.
            let disk = RenderCache.identity(speakd: "2.0", engines: [espeak, piper], onDisk: true)
            #expect(disk.hasPrefix(memory + "; files "))
            #expect(RenderCache.identity(speakd: "2.0", engines: [espeak, piper], onDisk: true) == disk)
            try Data(#"{"audio": {"sample_rate": 16000}}"#.utf8).write(to: URL(fileURLWithPath: voice))
            #expect(RenderCache.identity(speakd: "2.0", engines: [espeak, piper], onDisk: true) != disk)
        }
    }
}
