import Foundation
import SpeakAPI
import SpeakDaemon
import SpeakTestSupport
import Testing

@Suite("systemd notification")
struct SystemdNotifierTests {
    @Test(.timeLimit(.minutes(1))) func sendsDatagramsToNotifySocket() async throws {
        let socket = try NotifySocket()
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path])
        try notifier.notify("READY=1")
        #expect(await socket.receive() == "READY=1")
        try notifier.notify("STOPPING=1")
        #expect(await socket.receive() == "STOPPING=1")
    }

    @Test func doesNothingOutsideSystemd() throws {
        let notifier = SystemdNotifier(environment: [:])
        #expect(notifier.socketPath == nil)
        try notifier.notify("READY=1")
    }

    @Test func unreachableSocketIsAnError() {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/notify"])
        #expect(throws: SystemdNotifyError.self) { try notifier.notify("READY=1") }
    }
}
