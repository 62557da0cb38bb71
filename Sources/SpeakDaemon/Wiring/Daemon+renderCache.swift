import Logging
import PosixSupport
import SpeakdVersion
import SpeechRendering

/// The render cache in front of the engines (`--render-cache-mib`, and `--render-cache-disk-mib`
/// in `render-cache/` of the state directory), with what the engines are, which is part of every
/// key; nil when it keeps nothing (`--render-cache-mib 0` turns it off, on disk too: a
/// configuration that turned the cache off before there was a disk tier keeps it off).
///
/// Each engine says what it is (`SpeechRenderer.engineIdentities`): espeak-ng its version, its
/// worker and its data with the variants; Piper its version, voices, worker and installed
/// packages. On disk a render outlives the process, so the identity also holds a fingerprint of
/// those files (`RenderCache.identity`): an upgrade of any of them misses every render made
/// before it.
func makeRenderCache(
    _ configuration: DaemonConfiguration, engines: any SpeechRenderer, logger: Logger
) -> (cache: RenderCache, identity: String)? {
    guard configuration.renderCacheMiB > 0 else { return nil }
    let diskDirectory =
        configuration.renderCacheDiskMiB > 0
        ? configuration.stateDirectory.map { PathText.join($0, "render-cache") } : nil
    let cache = RenderCache(
        capacity: configuration.renderCacheMiB << 20, diskDirectory: diskDirectory,
        diskCapacity: configuration.renderCacheDiskMiB << 20, logger: logger)
    let identity = RenderCache.identity(
        speakd: SpeakdVersion.current, engines: engines.engineIdentities, onDisk: cache.keepsRendersOnDisk)
    if cache.keepsRendersOnDisk {
        logger.info(
            "render cache on disk",
            metadata: ["speakd.directory": "\(diskDirectory ?? "")", "speakd.identity": "\(identity)"])
    }
    return (cache, identity)
}
