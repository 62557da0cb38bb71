import CPosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// glibc's malloc gives threads that allocate at the same time arenas of their own, up to eight
/// per core, and each keeps the pages it touched. The daemon's threads mostly wait (event loops,
/// device and pipe readers), so two arenas serve them without contention: measured idle, two
/// instead of the default save about 1.3 MB of speakd's and its workers' PSS.
public enum MallocArenas {
    /// Limits malloc to `count` arenas, unless `MALLOC_ARENA_MAX` in the environment says
    /// otherwise (glibc has then applied it). Call before starting threads.
    public static func limit(to count: Int32) {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return }
        _ = mallopt(M_ARENA_MAX, count)
    }

    /// Hands the pages of memory that malloc holds free back to the kernel (`malloc_trim`), for
    /// a process about to sit idle after a burst of work (start-up, a job).
    public static func releaseFreePages() {
        _ = malloc_trim(0)
    }
}
