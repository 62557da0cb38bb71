import Logging
import PosixSupport
import ServiceLifecycle
import SpeakSSIP
import SpeakServer
import SpeakWyoming

/// Tells systemd `READY=1` once every listener accepts connections, and `STOPPING=1` when
/// graceful shutdown begins.
struct SystemdReadiness: Service {
    let front: SpeakFront
    /// The SSIP listener (`--ssip`), which must listen too.
    let ssip: SSIPListener?
    /// The Wyoming listener (`--wyoming`), which must listen too.
    let wyoming: WyomingServer?
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async throws {
        let addresses = try await front.waitUntilListening()
        try await ssip?.waitUntilListening()
        try await wyoming?.waitUntilListening()
        let listening =
            addresses.map(\.description) + (ssip.map { ["ssip:\($0.path)"] } ?? [])
            + (wyoming.map { ["wyoming:\($0.address)"] } ?? [])
        send("READY=1\nSTATUS=listening on \(listening.joined(separator: ", "))")
        // Start-up (configuration, voice catalogue, routes) is done: what it freed goes back.
        Malloc.releaseFreePages()
        try? await gracefulShutdown()
        send("STOPPING=1")
    }

    private func send(_ message: String) {
        do {
            try notifier.notify(message)
        } catch {
            logger.warning("systemd notification failed", metadata: ["speakd.error": "\(error)"])
        }
    }
}
