import EngineWorkers
import FoundationEssentials
import Logging
import PiperEngine
import PosixSupport
import SpeakdVersion
import SpeechRendering

/// The render cache in front of the engines (`--render-cache-mib`, and `--render-cache-disk-mib`
/// in `render-cache/` of the state directory), with what the engines are, which is part of every
/// key; nil when it keeps nothing (`--render-cache-mib 0` turns it off, on disk too: a
/// configuration that turned the cache off before there was a disk tier keeps it off).
///
/// On disk a render outlives the process, so the identity also holds a fingerprint of the files
/// the engines read (`RenderCache.fingerprint`): the engine worker (with the espeak-ng it links),
/// espeak-ng's data with the variants, and Piper's worker, voices and installed packages. An
/// upgrade of any of them misses every render made before it.
func makeRenderCache(
    _ configuration: DaemonConfiguration, engines: any SpeechRenderer, pool: EngineWorkerPool?, piper: PiperRenderer?,
    logger: Logger
) -> (cache: RenderCache, identity: String)? {
    guard configuration.renderCacheMiB > 0 else { return nil }
    let diskDirectory =
        configuration.renderCacheDiskMiB > 0
        ? configuration.stateDirectory.map { PathText.join($0, "render-cache") } : nil
    let cache = RenderCache(
        capacity: configuration.renderCacheMiB << 20, diskDirectory: diskDirectory,
        diskCapacity: configuration.renderCacheDiskMiB << 20, logger: logger)
    var identity =
        "speakd \(SpeakdVersion.current); \(engines.engineName); piper voices "
        + (piper?.voicesByName.keys.sorted().joined(separator: ",") ?? "none")
    if cache.keepsRendersOnDisk {
        var trees: [String] = []
        var packages: [String] = []
        if let pool { trees += [pool.launch.executable, pool.engine.dataPath] }
        if let piper {
            // The worker and its sandbox, not their directory: Python may write its byte code there.
            trees += [
                piper.launch.script, PathText.join(PathText.directory(of: piper.launch.script), "piper_sandbox.py"),
            ]
            for voice in piper.voicesByName.values.sorted(by: { $0.name < $1.name }) {
                trees += [voice.model, voice.configuration]
            }
            // The venv's packages with their versions: `lib/pythonX.Y/site-packages/NAME-VERSION.dist-info`.
            let files = FileManager.default
            let library = PathText.join(PathText.directory(of: PathText.directory(of: piper.launch.python)), "lib")
            for python in (try? files.contentsOfDirectory(atPath: library))?.sorted() ?? [] {
                let site = PathText.join(PathText.join(library, python), "site-packages")
                packages += ((try? files.contentsOfDirectory(atPath: site)) ?? []).filter { $0.hasSuffix(".dist-info") }
                    .sorted()
            }
        }
        identity += "; files " + RenderCache.fingerprint(ofFilesUnder: trees, with: packages)
        logger.info(
            "render cache on disk",
            metadata: ["speakd.directory": "\(diskDirectory ?? "")", "speakd.identity": "\(identity)"])
    }
    return (cache, identity)
}
