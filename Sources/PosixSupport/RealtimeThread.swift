#if canImport(Glibc)
import Glibc
#endif

/// Runs the calling thread ahead of ordinary ones (`SCHED_FIFO`), for a thread whose work is
/// small and on a clock: an RTP sender's pacing, which a busy machine would otherwise wake late.
///
/// The kernel allows it to root, to a process with `CAP_SYS_NICE`, or up to the `RLIMIT_RTPRIO`
/// the process was given (systemd's `LimitRTPRIO=`, with `RestrictRealtime=no`). Elsewhere the
/// thread keeps the scheduling it had. The kernel's real-time throttling
/// (`kernel.sched_rt_runtime_us`, 95 % by default) leaves ordinary threads their share even if
/// such a thread never slept.
public enum RealtimeThread {
    /// Asks for `SCHED_FIFO` at `priority` (1–99) for the calling thread.
    /// - Returns: nil when granted, else why not (the error `pthread_setschedparam` gave).
    public static func raiseCallingThread(priority: Int32) -> String? {
        var parameters = sched_param()
        parameters.sched_priority = priority
        let status = pthread_setschedparam(pthread_self(), Int32(SCHED_FIFO), &parameters)
        return status == 0 ? nil : String(cString: strerror(status))
    }
}
