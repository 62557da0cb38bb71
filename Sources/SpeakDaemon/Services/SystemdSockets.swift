#if canImport(Glibc)
import Glibc
#endif

/// The listening sockets systemd passed at socket activation (`LISTEN_PID`, `LISTEN_FDS`,
/// `LISTEN_FDNAMES`; sd_listen_fds(3)), by the name the socket unit gives them
/// (`FileDescriptorName=`).
///
/// A socket unit creates the socket at boot or login and keeps it across restarts, so a client
/// that connects once (Chromium, at its first `speechSynthesis` use) finds it listening even while
/// speakd starts.
struct SystemdSockets: Sendable {
    /// systemd passes descriptors from 3 on.
    static let firstDescriptor: Int32 = 3

    /// Descriptors by name.
    let descriptors: [String: Int32]

    /// The sockets passed to this process; none unless `LISTEN_PID` names it.
    init(environment: [String: String], pid: pid_t = getpid()) {
        guard let listenPID = environment["LISTEN_PID"].flatMap({ pid_t($0) }), listenPID == pid,
            let count = environment["LISTEN_FDS"].flatMap({ Int32($0) }), count > 0
        else {
            descriptors = [:]
            return
        }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(separator: ":", omittingEmptySubsequences: false)
        var descriptors: [String: Int32] = [:]
        for index in 0..<count {
            let name = Int(index) < names.count ? String(names[Int(index)]) : "unknown"
            descriptors[name] = Self.firstDescriptor + index
        }
        self.descriptors = descriptors
    }

    /// The SSIP socket (`FileDescriptorName=ssip`), if systemd passed one.
    var ssip: Int32? { descriptors["ssip"] }
}
