import CPosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// How glibc's malloc keeps memory, tuned for processes that mostly sit idle: how many arenas
/// it keeps, which blocks it maps on their own, and handing free pages back.
///
/// glibc gives threads that allocate at the same time arenas of their own, up to eight per core,
/// and each keeps the pages it touched. The daemon's threads mostly wait (event loops, device and
/// pipe readers), and glibc's per-thread caches serve small blocks without the arena's lock, so
/// one arena serves them: measured idle, two instead of the default saved about 1.3 MB of
/// speakd's and its workers' PSS, and one instead of two another 0.2 MiB, with no measurable
/// change in `POST /v1/speech` throughput, nor in playback underruns under a render flood.
public enum Malloc {
    /// Limits malloc to `count` arenas, unless `MALLOC_ARENA_MAX` in the environment says
    /// otherwise (glibc has then applied it). Call before starting threads.
    public static func limitArenas(to count: Int32) {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return }
        _ = mallopt(M_ARENA_MAX, count)
    }

    /// Keeps blocks of up to `bytes` on the heap and the heap's free top until it exceeds
    /// `bytes`, instead of mapping each large block fresh and unmapping it when freed. A worker's
    /// chunk buffers (about 128 kB for a short announcement, right at glibc's default threshold)
    /// then reuse the same pages, rather than fault in and zero about 30 new pages per job.
    /// Memory freed this way is handed back by `releaseFreePages()` when the process goes idle.
    public static func keepLargeBlocksOnHeap(upTo bytes: Int32) {
        _ = mallopt(M_MMAP_THRESHOLD, bytes)
        _ = mallopt(M_TRIM_THRESHOLD, bytes)
    }

    /// Hands the pages of memory that malloc holds free back to the kernel (`malloc_trim`), for
    /// a process about to sit idle after a burst of work (start-up, a job).
    public static func releaseFreePages() {
        _ = malloc_trim(0)
    }
}
