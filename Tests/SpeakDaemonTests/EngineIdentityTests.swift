import Foundation
import Logging
import PiperEngine
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Testing

/// Each engine says what it is for the render cache's identity, read by the engine itself.
struct EngineIdentityTests {
    /// Piper reads its version and packages from its own venv, beside its Python.
    @Test func piperReadsItsVersionFromItsVenv() throws {
        let venv = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: venv) }
        let site = venv.appendingPathComponent("lib/python3.11/site-packages")
        for package in ["numpy-2.4.6.dist-info", "piper_tts-1.8.0.dist-info", "piper"] {
            try FileManager.default.createDirectory(
                at: site.appendingPathComponent(package), withIntermediateDirectories: true)
        }
        let launch = PiperRenderer.Launch(
            python: venv.appendingPathComponent("bin/python3").path,
            script: venv.appendingPathComponent("worker/speakd-piper-worker.py").path)
        let format = AudioFormat(sampleRate: 22050)
        let piper = PiperRenderer(voices: [], launch: launch, format: format, logger: Logger(label: "test"))
        let identity = try #require(piper.engineIdentities.first)
        #expect(piper.engineIdentities.count == 1)
        #expect(identity.name == "piper")
        #expect(identity.version == "1.8.0")
        #expect(identity.names == ["numpy-2.4.6.dist-info", "piper_tts-1.8.0.dist-info"])
        #expect(identity.files.contains(launch.script))
        // An upgrade of piper-tts is another engine, before any file is read.
        try FileManager.default.moveItem(
            at: site.appendingPathComponent("piper_tts-1.8.0.dist-info"),
            to: site.appendingPathComponent("piper_tts-1.9.0.dist-info"))
        #expect(piper.engineIdentities.first?.version == "1.9.0")
        #expect(
            RenderCache.identity(speakd: "1", engines: piper.engineIdentities, onDisk: false)
                != RenderCache.identity(speakd: "1", engines: [identity], onDisk: false))
    }

    /// The router's engines are its primary engine's and its named engine's, in that order; the
    /// render cache in front says the same.
    @Test func theRouterSaysBothEngines() throws {
        let venv = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: venv) }
        let format = AudioFormat(sampleRate: 22050)
        let piper = PiperRenderer(
            voices: [], launch: .init(python: venv.path + "/bin/python3", script: venv.path + "/worker.py"),
            format: format, logger: Logger(label: "test"))
        let router = EngineRouter(primary: piper, named: piper)
        #expect(router.engineIdentities.map(\.name) == ["piper", "piper"])
        let cached = CachingRenderer(base: router, cache: RenderCache(capacity: 1 << 20), identity: "test")
        #expect(cached.engineIdentities == router.engineIdentities)
    }
}
