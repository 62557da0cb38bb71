import CPosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// Starts `body` on a new thread of its own, outside Swift's cooperative pool, for work that
/// blocks (a read from a pipe, a device write, libespeak-ng's synthesis).
///
/// Foundation's `Thread` would do the same, but it would load Foundation, ICU and CoreFoundation
/// into the daemon and its engine workers: several megabytes per process for a `pthread_create`.
public enum DetachedThread {
    private final class Start {
        let name: String
        let body: () -> Void
        init(name: String, body: @escaping () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Runs `body` on a new detached thread called `name` (at most 15 bytes are kept, the
    /// kernel's limit). Fails only when the system cannot create a thread.
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let status = pthread_create(
            &thread, &attributes,
            { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                _ = speakd_name_this_thread(start.name)
                start.body()
                return nil
            }, start)
        precondition(status == 0, "pthread_create failed: \(String(cString: strerror(status)))")
    }
}

/// A mutex with a condition variable, for a thread that sleeps until work arrives.
///
/// Swift's `Synchronization.Mutex` has no condition to wait on; this is the pthread pair.
public final class ConditionLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread objects are only used through the pthread calls below,
    // which are thread-safe; they live in heap storage that never moves.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        // Timed waits count on the monotonic clock, so a change of the wall clock moves no deadline.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    /// Sleeps until `signal`; the lock must be held, and is held again on return.
    public func wait() { pthread_cond_wait(condition, mutex) }
    /// Sleeps until `signal` or until `deadline` (`CLOCK_MONOTONIC`, as `ContinuousClock` counts
    /// on Linux); false when the deadline passed. The lock must be held, and is held again on return.
    public func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }
    /// The monotonic clock `wait(until:)` counts on, `duration` from now.
    public static func deadline(in duration: Duration) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
        return timespec(
            tv_sec: now.tv_sec + Int(seconds) + nanoseconds / 1_000_000_000, tv_nsec: nanoseconds % 1_000_000_000)
    }
    /// Wakes one waiting thread.
    public func signal() { pthread_cond_signal(condition) }
    /// Wakes every waiting thread.
    public func broadcast() { pthread_cond_broadcast(condition) }
}

/// `format` filled in as C's `printf` does (`"%.3g"`, `"%.1f"`): the number formatting Swift's
/// standard library lacks, without Foundation's `String(format:)`.
public func cFormat(_ format: String, _ arguments: any CVarArg...) -> String {
    withVaList(arguments) { list in
        var buffer = [CChar](repeating: 0, count: 64)
        let written = Int(vsnprintf(&buffer, buffer.count, format, list))
        let length = min(max(written, 0), buffer.count - 1)
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
