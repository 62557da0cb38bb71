import AnnouncementIntake
import AnnouncementQueue
import Foundation
import Hummingbird
import HummingbirdTesting
import IntakeTestSupport
import ServiceCore
import SpeakAPI
import SpeakServer
import SpeakService
import SpeakState
import SpeakTestSupport
import Testing

/// `GET /v1/audit` over a real database in a temporary directory, through the router.
@Suite("Audit route", .timeLimit(.minutes(1)))
struct AuditRouteTests {
    /// A `front` no row can have is 422 naming it, not an empty page that reads as "no such rows";
    /// each documented front is taken.
    @Test func anUnknownFrontIsRefusedNamingIt() async throws {
        let running = RunningQueue()
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try StateDatabase(directory: directory.path)
        let intake = AnnouncementIntake(
            outputs: AnnouncementOutputs(single: running.queue), renderer: FakeRenderer.tone(),
            health: SwitchableHealth())
        var service = CoreService(intake: intake)
        service.auditLog = database.audit
        let server = SpeakServer(service: service)
        try await running.waitUntilRunning()
        try await Application(router: server.buildRouter()).test(.router) { client in
            for front in ["evil", "HTTP", ""] {
                let response = try await client.execute(uri: "/v1/audit?front=\(front)", method: .get)
                #expect(response.status == .unprocessableContent, "front=\(front)")
                let error = try ScheduleRouteTests.error(response)
                #expect(error.field == "front" && error.message.contains("'\(front)'"), "\(error)")
            }
            for front in ["http", "mqtt", "ssip", "schedule", "local"] {
                let response = try await client.execute(uri: "/v1/audit?front=\(front)", method: .get)
                #expect(response.status == .ok, "front=\(front)")
            }
        }
        await running.shutdown()
    }
}
