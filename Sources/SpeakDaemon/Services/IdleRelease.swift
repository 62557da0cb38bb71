import AnnouncementQueue
import PosixSupport
import ServiceLifecycle

/// Hands back what an idle daemon holds but does not use: the heap that malloc holds free, and
/// the mappings of the daemon's code and its libraries' (`CodePages`), which starting and
/// speaking leave mapped far beyond what an idle daemon runs. Once `settle` after the start
/// (start-up's last parts, the sound server's connection and the loudness warm-up, are done by
/// then) unless an announcement came first, and then whenever the outputs have been quiet for
/// `quiet` (`--idle-release`) after announcements.
///
/// The next announcement maps the code it runs again with minor faults, about 0.6 ms before its
/// first sample (docs/performance.md, "The plain release build was over"), so `quiet` is long enough that announcements
/// in a burst never pay it. A timer runs only after an event, once, so an idle daemon is never
/// woken for this.
struct IdleRelease: Service {
    let outputs: AnnouncementOutputs
    let quiet: Duration
    /// How long after the start the first release waits.
    static let settle = Duration.seconds(3)

    func run() async throws {
        var pending: Task<Void, Never>? = release(after: min(Self.settle, quiet))
        for await _ in outputs.events() {
            pending?.cancel()
            pending = release(after: quiet)
        }
        pending?.cancel()
        // The stream ends when the last queue shuts down, before this service's turn.
        try? await gracefulShutdown()
    }

    /// Releases after `delay`, unless cancelled first or an announcement is still queued or
    /// speaking then (its `finished` starts the wait again).
    private func release(after delay: Duration) -> Task<Void, Never> {
        Task { [outputs] in
            guard (try? await Task.sleep(for: delay)) != nil else { return }
            guard await outputs.snapshot().isEmpty else { return }
            Malloc.releaseFreePages()
            CodePages.release()
        }
    }
}
