import FoundationEssentials
import Logging
import SpeakServer

#if canImport(Glibc)
import Glibc
#endif

/// The process's file-descriptor limit, raised for a server and shared with the connection limit.
enum DescriptorLimit {
    /// Descriptors kept for the daemon's own work whatever the clients do: the audio sink, the
    /// engine and its files, logs, and connections being accepted or closed.
    static let reserve = 256

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (the soft default, often 1,024, is for
    /// programs that never hold many files; servers raise it, and the hard limit is what the
    /// administrator allows) and lowers `limits.maxConnections` so every listener at its limit
    /// still leaves `reserve` descriptors free.
    static func raise(fitting limits: ConnectionLimits, listeners: Int, logger: Logger) -> ConnectionLimits {
        var limit = rlimit()
        guard getrlimit(descriptorResource, &limit) == 0 else { return limits }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(descriptorResource, &raised) == 0 { limit = raised }
        }
        let available = Int(clamping: limit.rlim_cur) - reserve
        let perListener = max(1, available / max(1, listeners))
        var fitted = limits
        if limits.maxConnections > perListener {
            fitted.maxConnections = perListener
            logger.warning(
                "max-connections lowered to fit the descriptor limit",
                metadata: [
                    "speakd.max_connections": "\(perListener)", "speakd.nofile": "\(limit.rlim_cur)",
                ])
        }
        return fitted
    }

    // Glibc declares RLIMIT_NOFILE as an enum case, not an Int32.
    private static var descriptorResource: __rlimit_resource_t {
        __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    }
}
