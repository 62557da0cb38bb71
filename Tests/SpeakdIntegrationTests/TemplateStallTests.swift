import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// A worker template that stops answering (SIGSTOP) while workers must be replaced: the real
    /// `speakd` reports it on `/healthz` within the template's time limit, and renders again once
    /// the template resumes or has been replaced; every announcement still finishes once.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct TemplateStallTests {
        /// The pool's `Launch.templateLimit` and `templateRestartLimit`.
        static let templateLimit: Duration = .seconds(2)
        static let restartLimit: Duration = .seconds(8)

        static func health(_ client: SpeakHTTPClient) async throws -> (status: Int, report: HealthReport?) {
            let response = try await client.send("GET", "/healthz")
            return (response.status, try? JSONDecoder().decode(HealthReport.self, from: Data(response.body)))
        }

        /// Stops the template, kills every worker and posts an announcement, which waits for a
        /// worker; returns the template, the announcement, and `/healthz` once it names the
        /// template, with how long after the kill that was.
        static func stall(
            _ speakd: AudibleDaemon, sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> (template: pid_t, waiting: String, status: Int, report: HealthReport?, after: Duration) {
            let daemon = speakd.daemon
            let workers = try await EngineWorkerCrashTests.waitForWorkers(of: daemon.pid, count: 2)
            let template = try #require(ProcessTable.children(of: daemon.pid).first, sourceLocation: sourceLocation)
            kill(template, SIGSTOP)
            for worker in workers { kill(worker, SIGKILL) }
            let killed = ContinuousClock.now
            // Posted once the workers have ended (their template, stopped, cannot reap them): a
            // job handed to a worker as it is being killed fails with it.
            while !workers.allSatisfy(ProcessTable.hasEnded), ContinuousClock.now - killed < .seconds(1) {
                try await Task.sleep(for: .milliseconds(5))
            }
            let waiting = try await speakd.accept(announcement("Please go to desk four"))
            var last: (status: Int, report: HealthReport?) = (0, nil)
            while ContinuousClock.now - killed < templateLimit + .seconds(5) {
                last = try await health(speakd.unix)
                if last.report?.engine.detail?.contains("worker template") == true { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            return (template, waiting, last.status, last.report, ContinuousClock.now - killed)
        }

        /// What `/healthz` says of a stalled pool with no worker left.
        static func expectStallReported(
            _ stalled: (template: pid_t, waiting: String, status: Int, report: HealthReport?, after: Duration),
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            #expect(
                stalled.report?.engine.detail?.contains("worker template has not answered") == true,
                "\(String(describing: stalled.report))", sourceLocation: sourceLocation)
            #expect(
                stalled.after < templateLimit + .milliseconds(1_500), "reported \(stalled.after) after the kill",
                sourceLocation: sourceLocation)
            #expect(stalled.status == 503, sourceLocation: sourceLocation)
            #expect(stalled.report?.status == .unavailable, sourceLocation: sourceLocation)
            #expect(stalled.report?.engine.workers?.running == 0, sourceLocation: sourceLocation)
        }

        /// Waits until `/healthz` is ok again with both workers, then expects a render and an
        /// announcement to work.
        static func expectRecovered(
            _ speakd: AudibleDaemon, sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> String {
            var last: (status: Int, report: HealthReport?) = (0, nil)
            let deadline = ContinuousClock.now + .seconds(10)
            repeat {
                last = try await health(speakd.unix)
                if last.status == 200 && last.report?.engine.workers?.running == 2 { break }
                try await Task.sleep(for: .milliseconds(50))
            } while ContinuousClock.now < deadline
            #expect(last.status == 200, "\(String(describing: last.report))", sourceLocation: sourceLocation)
            #expect(last.report?.engine.workers?.running == 2, sourceLocation: sourceLocation)
            let render = try await speakd.unix.send("POST", "/v1/speech", json: ["text": "Gate four"])
            #expect(render.status == 200, sourceLocation: sourceLocation)
            let next = try await speakd.accept(announcement("The museum closes soon"))
            #expect(await speakd.events.waitForFinished([next], timeout: .seconds(10)), sourceLocation: sourceLocation)
            #expect(speakd.events.finished(next).first?.reason == .completed, sourceLocation: sourceLocation)
            return next
        }

        @Test("A SIGSTOPped template: /healthz names it within its time limit; after SIGCONT rendering resumes")
        func stoppedTemplateResumes() async throws {
            let speakd = try await AudibleDaemon.start(arguments: ["--engine-workers", "2"])
            let stalled = try await Self.stall(speakd)
            defer { kill(stalled.template, SIGCONT) }
            Self.expectStallReported(stalled)
            #expect(speakd.events.finished(stalled.waiting).isEmpty)

            kill(stalled.template, SIGCONT)
            #expect(await speakd.events.waitForFinished([stalled.waiting], timeout: .seconds(15)))
            #expect(speakd.events.finished(stalled.waiting).first?.reason == .completed)
            let next = try await Self.expectRecovered(speakd)
            // Resumed, not replaced.
            #expect(ProcessTable.children(of: speakd.daemon.pid) == [stalled.template])
            _ = await speakd.stop()
            expectExactlyOneFinished([stalled.waiting, next], in: speakd.events.events)
        }

        @Test("A template that stays stopped is replaced after its restart limit, and rendering resumes")
        func stoppedTemplateReplaced() async throws {
            let speakd = try await AudibleDaemon.start(arguments: ["--engine-workers", "2"])
            let stalled = try await Self.stall(speakd)
            defer { kill(stalled.template, SIGCONT) }
            Self.expectStallReported(stalled)

            #expect(
                await speakd.events.waitForFinished(
                    [stalled.waiting], timeout: Self.restartLimit + Self.templateLimit + .seconds(10)))
            #expect(
                speakd.events.finished(stalled.waiting).first?.reason == .completed,
                "\(speakd.events.finished(stalled.waiting)); log:\n\(speakd.daemon.log)")
            let next = try await Self.expectRecovered(speakd)
            let templates = ProcessTable.children(of: speakd.daemon.pid)
            #expect(templates.count == 1 && !templates.contains(stalled.template), "\(templates)")
            #expect(speakd.daemon.log.contains("the engine worker template stopped answering; starting a new one"))
            _ = await speakd.stop()
            expectExactlyOneFinished([stalled.waiting, next], in: speakd.events.events)
        }
    }
}
