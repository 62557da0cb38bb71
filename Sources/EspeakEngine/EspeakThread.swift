import FoundationEssentials
import PosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// The one thread in the process that calls into libespeak-ng.
///
/// libespeak-ng keeps its state in process globals, and two threads inside it crash the process,
/// so every engine in the process shares this thread and its jobs run one at a time, in order.
/// It is a thread of its own, not a cooperative-pool thread: synthesis blocks while it runs.
final class EspeakThread: @unchecked Sendable {
    // @unchecked Sendable: `jobs` is only touched with `condition` locked, and `session` only by
    // the thread itself; the thread is started once in `init` and never touched again.
    private let condition = ConditionLock()
    private var jobs: [@Sendable (EspeakSession) -> Void] = []
    // Only touched by jobs, which run on the thread one at a time.
    private let session = EspeakSession()

    /// The thread every `EspeakEngine` in the process uses.
    static let shared = EspeakThread(name: "speakd.espeak")

    private init(name: String) {
        // The thread holds `self` for as long as the process lives: espeak's globals do too.
        DetachedThread.start(name: name) { [self] in run() }
    }

    /// Queues `job` to run on the espeak thread after every job queued before it.
    func submit(_ job: @escaping @Sendable (EspeakSession) -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Runs `body` on the espeak thread and returns its result.
    func run<T: Sendable, E: Error>(_ body: @escaping @Sendable (EspeakSession) throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            submit { session in
                do throws(E) {
                    continuation.resume(returning: .success(try body(session)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job(session)
        }
    }
}
