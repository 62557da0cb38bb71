import Synchronization

/// Kills the workers that send nothing for too long while rendering: a look at the rendering
/// workers every `interval`, from the moment a job starts (`start`) until none renders. A set of
/// idle workers has no timer, so an idle daemon is not woken for it.
package final class StallWatch: Sendable {
    private let limit: Duration
    private let interval: Duration
    private let watching = Mutex(false)

    /// - Parameters:
    ///   - limit: how long a rendering worker may send nothing (`EngineWorker.killIfStalled`).
    ///   - interval: how often it looks.
    package init(limit: Duration, interval: Duration = .milliseconds(500)) {
        self.limit = limit
        self.interval = interval
    }

    /// Starts watching unless it watches already; called after a worker was given a job.
    /// `rendering` gives the workers that render now, or nil once their owner stopped (it is
    /// called with the watch's lock held, so it must not start the watch itself).
    package func start(rendering: @escaping @Sendable () -> [EngineWorker]?) {
        let start = watching.withLock { watching -> Bool in
            defer { watching = true }
            return !watching
        }
        guard start else { return }
        Task { [weak self] in
            while true {
                guard let interval = self?.interval else { return }
                try? await Task.sleep(for: interval)
                guard let self else { return }
                let limit = self.limit
                // Decided under the watch's lock, which `start` takes too: a job started after
                // this look finds the watch ended and starts it again, one started before it is
                // seen rendering here.
                let workers = self.watching.withLock { watching -> [EngineWorker]? in
                    guard let rendering = rendering(), !rendering.isEmpty else {
                        watching = false
                        return nil
                    }
                    return rendering
                }
                guard let workers else { return }
                for worker in workers { worker.killIfStalled(limit: limit) }
            }
        }
    }
}
