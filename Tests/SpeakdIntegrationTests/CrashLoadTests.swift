import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// Engine workers dying under load: crashing texts and SIGKILLs among 50 clients cost only the
    /// jobs they hit, and every accepted announcement still gets exactly one `finished` event.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct CrashLoadTests {
        static let clients = 50
        static let postsPerClient = 4
        static let workers = 2
        static let seed: UInt64 = 20_261_123
        /// What a worker that died under a job leaves as the `finished` detail and the HTTP message.
        static let crashDetails: Set<String> = [
            "engine worker crashed: SIGABRT", "engine worker crashed: SIGSEGV", "engine worker crashed: SIGKILL",
        ]
        /// What the test's own kills leave.
        static let killedDetail = "engine worker crashed: SIGKILL"

        /// One `POST /v1/speech` and how it was answered.
        struct Render: Sendable {
            var crashing: Bool
            var status: Int
            /// The JSON error's message of a non-200 answer.
            var message: String?
            /// The samples of a 200 answer's WAV.
            var samples: Int?
            /// What is wrong with the answer's form (not JSON, not a valid WAV).
            var problem: String?
        }

        /// What one client saw.
        struct ClientLog: Sendable {
            /// Accepted ids, and whether their text crashes libespeak-ng.
            var accepted: [(id: String, crashing: Bool)] = []
            var refused = 0
            var renders: [Render] = []
            var cancelRequests = 0
            var otherFailures: [String] = []
        }

        /// A worker (or the worker template) killed by the test, and whether a worker was
        /// rendering then.
        struct Kill: Sendable {
            var pid: pid_t
            var busy: Bool
        }

        /// Sends `POST /v1/speech` and checks the form of the answer: a valid WAV, or a JSON error.
        static func render(_ text: String, crashing: Bool, via client: SpeakHTTPClient, directory: URL) async throws
            -> Render
        {
            let response = try await client.send("POST", "/v1/speech", json: ["text": text])
            var render = Render(crashing: crashing, status: response.status)
            guard response.status == 200 else {
                if response.header("Content-Type")?.hasPrefix("application/json") != true {
                    render.problem = "Content-Type \(response.header("Content-Type") ?? "none")"
                }
                render.message = response.error?.error.message
                return render
            }
            let file = directory.appendingPathComponent("render-\(UUID().uuidString.prefix(8)).wav")
            try Data(response.body).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            do {
                render.samples = try WAVReader(contentsOf: file).samples.count
            } catch {
                render.problem = "\(error)"
            }
            return render
        }

        @Test(
            "50 clients, crashing texts and killed workers: no finished event lost or duplicated, crashes named, the pool recovers"
        )
        func crashesUnderLoad() async throws {
            let speakd = try await AudibleDaemon.start(arguments: [
                "--engine-workers", "\(Self.workers)", "--max-queue", "32", "--event-history", "8192",
            ])
            let daemon = speakd.daemon
            let crashers = [
                try EngineWorkerCrashTests.crasher("dotted-abbreviations.txt"),
                try EngineWorkerCrashTests.crasher("dotted-initials.txt"),
            ]
            // A request that hangs must fail the test, not wait out the time limit.
            var unix = daemon.unixClient
            unix.timeout = .seconds(15)
            var tcp = daemon.tcpClient
            tcp.timeout = .seconds(15)
            let began = ContinuousClock.now

            // At random moments, SIGKILL a worker, preferring one that is rendering; every fourth
            // time, the worker template, which takes every worker with it.
            let killer = Task { () -> [Kill] in
                var random = SplitMix64(seed: Self.seed ^ 0xDEAD)
                var kills: [Kill] = []
                while !Task.isCancelled {
                    do {
                        try await Task.sleep(for: .milliseconds(Int.random(in: 300...1_200, using: &random)))
                    } catch {
                        break
                    }
                    if kills.count % 4 == 3, let template = ProcessTable.children(of: daemon.pid).first {
                        let busy = !EngineWorkerCrashTests.workers(of: daemon.pid).filter(ProcessTable.isRunning)
                            .isEmpty
                        if kill(template, SIGKILL) == 0 { kills.append(Kill(pid: template, busy: busy)) }
                        continue
                    }
                    let workers = EngineWorkerCrashTests.workers(of: daemon.pid)
                    let busy = workers.filter(ProcessTable.isRunning)
                    guard let victim = (busy.isEmpty ? workers : busy).randomElement(using: &random) else { continue }
                    if kill(victim, SIGKILL) == 0 { kills.append(Kill(pid: victim, busy: !busy.isEmpty)) }
                }
                return kills
            }
            // It holds the daemon: if the test throws, it must end, or the daemon outlives the test.
            defer { killer.cancel() }

            let logs = try await withThrowingTaskGroup(of: ClientLog.self) { group in
                for client in 0..<Self.clients {
                    let http = client.isMultiple(of: 2) ? tcp : unix
                    let other = client.isMultiple(of: 2) ? unix : tcp
                    let directory = daemon.directory
                    group.addTask {
                        var random = SplitMix64(seed: Self.seed &+ UInt64(client))
                        var log = ClientLog()
                        let renderAfter = Int.random(in: 0..<Self.postsPerClient, using: &random)
                        for number in 0..<Self.postsPerClient {
                            let crashing = Double.random(in: 0..<1, using: &random) < 0.2
                            let text = crashing ? crashers.randomElement(using: &random)! : "Gate \(client), \(number)"
                            // Many interrupting defaults, so texts often start at once, and few
                            // highs among normal texts: a high is never interrupted, so highs that
                            // speak would hold the queue. Crashing texts are often high: those
                            // reach a worker for sure (the next interrupting default would often
                            // end them before they crash) and fail at once.
                            let high = crashing ? 0.4 : 0.03
                            let (priority, queue): (AnnouncementPriority, Bool) =
                                switch Double.random(in: 0..<1, using: &random) {
                                case ..<high: (.high, true)
                                case ..<0.4: (.default, false)
                                case ..<0.75: (.default, true)
                                default: (.low, true)
                                }
                            // Every announcement expires soon if it has not started, so the run drains fast.
                            let body = announcement(
                                text, priority: priority, queue: queue,
                                expiresAfter: Double.random(in: 0.5...2, using: &random))
                            let sent = ContinuousClock.now - began
                            let response: SpeakHTTPResponse
                            do {
                                response = try await post(body, via: http)
                            } catch {
                                log.otherFailures.append("POST /v1/announcements sent at \(sent): \(error)")
                                continue
                            }
                            switch response.status {
                            case 202:
                                let id = try response.decode(AnnouncementAccepted.self).id
                                log.accepted.append((id, crashing))
                                if Double.random(in: 0..<1, using: &random) < 0.1 {
                                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...300, using: &random)))
                                    let cancel = try await other.send("DELETE", "/v1/announcements/\(id)")
                                    log.cancelRequests += 1
                                    if cancel.status != 200 {
                                        log.otherFailures.append("DELETE \(id): \(cancel.status)")
                                    }
                                }
                            case 429 where response.error?.error.code == ErrorResponse.Code.queueFull:
                                log.refused += 1
                            default:
                                log.otherFailures.append(
                                    "POST: \(response.status) \(String(decoding: response.body, as: UTF8.self))")
                            }
                            if number == renderAfter {
                                let crashing = Double.random(in: 0..<1, using: &random) < 0.3
                                let text =
                                    crashing
                                    ? crashers.randomElement(using: &random)!
                                    // Long enough to keep a worker busy for a while: kills land in it.
                                    : String(
                                        repeating: "Platform \(client): the train to Porto leaves in five minutes. ",
                                        count: 4)
                                let sent = ContinuousClock.now - began
                                do {
                                    log.renders.append(
                                        try await Self.render(text, crashing: crashing, via: http, directory: directory)
                                    )
                                } catch {
                                    log.otherFailures.append(
                                        "POST /v1/speech (\(crashing ? "crashing" : "normal")) sent at \(sent): \(error)"
                                    )
                                }
                            }
                            try await Task.sleep(for: .milliseconds(Int.random(in: 200...2_500, using: &random)))
                        }
                        return log
                    }
                }
                var logs: [ClientLog] = []
                for try await log in group { logs.append(log) }
                return logs
            }
            killer.cancel()
            let kills = await killer.value
            let posted = ContinuousClock.now - began

            let accepted = logs.flatMap(\.accepted)
            let acceptedIDs = Set(accepted.map(\.id))
            let crashingIDs = Set(accepted.filter(\.crashing).map(\.id))
            // Everything waiting expires within 2 s; what speaks lasts a second or two.
            let allFinished = await speakd.events.waitForFinished(acceptedIDs, timeout: .seconds(20))
            // Let any stray (duplicate) event arrive before counting.
            try await Task.sleep(for: .milliseconds(300))
            let received = speakd.events.received

            // The pool is back to its size (a replacement may be in its backoff) and counted restarts.
            var report: HealthReport?
            let healthDeadline = ContinuousClock.now + .seconds(10)
            repeat {
                let health = try await unix.send("GET", "/healthz")
                report = try? JSONDecoder().decode(HealthReport.self, from: Data(health.body))
                if report?.engine.workers?.running == Self.workers { break }
                try await Task.sleep(for: .milliseconds(50))
            } while ContinuousClock.now < healthDeadline
            let workers = report?.engine.workers
            // And it speaks on.
            let next = try await speakd.accept(announcement("Please go to desk four"))
            #expect(await speakd.events.waitForFinished([next], timeout: .seconds(10)))
            let nextFinished = speakd.events.finished(next)
            let alive = daemon.isRunning
            let log = daemon.log
            _ = await speakd.stop()

            var finishedCount: [String: Int] = [:]
            var byReason: [FinishReason: Int] = [:]
            var failedByDetail: [String: Int] = [:]
            var perID: [String: [AnnouncementEvent.Kind]] = [:]
            for item in received where !item.event.type.isProgress {
                perID[item.event.id, default: []].append(item.event.type)
                guard item.event.type == .finished else { continue }
                finishedCount[item.event.id, default: 0] += 1
                byReason[item.event.reason ?? .failed, default: 0] += 1
                if item.event.reason == .failed { failedByDetail[item.event.detail ?? "none", default: 0] += 1 }
            }
            let lost = acceptedIDs.filter { finishedCount[$0] == nil }
            let duplicated = finishedCount.filter { $0.value > 1 }
            let strangers = Set(finishedCount.keys).subtracting(acceptedIDs)
            let sequences = received.compactMap(\.sequence)
            let renders = logs.flatMap(\.renders)
            let crashRenders = renders.filter(\.crashing)
            let normalRenders = renders.filter { !$0.crashing }
            let failures = logs.flatMap(\.otherFailures)
            let started = acceptedIDs.filter { perID[$0]?.contains(.started) == true }

            print(
                """
                crash load: \(Self.clients) clients × \(Self.postsPerClient) posts + 1 render in \(posted), \
                seed \(Self.seed): accepted \(accepted.count) (crashing \(crashingIDs.count)), \
                refused \(logs.map(\.refused).reduce(0, +)), started \(started.count) \
                (crashing \(started.intersection(crashingIDs).count)), \
                cancel requests \(logs.map(\.cancelRequests).reduce(0, +)), other failures \(failures.count); \
                finished \(FinishReason.allCases.map { "\($0.rawValue) \(byReason[$0] ?? 0)" }.joined(separator: ", ")); \
                failed \(failedByDetail.sorted { $0.key < $1.key }.map { "\($0.value)× \($0.key)" }); \
                renders normal \(normalRenders.count { $0.status == 200 })×200 \(normalRenders.count { $0.status != 200 })×5xx, \
                crashing \(crashRenders.count { $0.status >= 500 })×5xx \(crashRenders.count { $0.status < 500 })×other; \
                workers killed \(kills.count) (\(kills.count(where: \.busy)) rendering), \
                restarts \(workers?.restarts ?? -1), running \(workers?.running ?? -1)/\(workers?.configured ?? -1); \
                lost \(lost.count), duplicated \(duplicated.count), unknown ids \(strangers.count), \
                stream reconnects \(speakd.events.reconnects)
                """)

            #expect(failures.isEmpty, "\(failures)")
            #expect(allFinished)
            #expect(lost.isEmpty, "no finished event for \(lost); speakd log:\n\(log)")
            #expect(duplicated.isEmpty, "several finished events for \(duplicated)")
            #expect(strangers.isEmpty, "finished events for ids never accepted: \(strangers)")
            #expect(sequences.count == Set(sequences).count, "event ids repeated on the stream")
            for id in acceptedIDs {
                let kinds = perID[id] ?? []
                #expect(kinds == [.queued, .finished] || kinds == [.queued, .started, .finished], "\(id): \(kinds)")
            }

            // Crashes are named and cost only the job they hit.
            for item in received where item.event.type == .finished && acceptedIDs.contains(item.event.id) {
                let event = item.event
                if crashingIDs.contains(event.id) {
                    #expect(event.reason != .completed, "a crashing text completed: \(event)")
                    if event.reason == .failed {
                        #expect(Self.crashDetails.contains(event.detail ?? ""), "\(event)")
                    }
                } else if event.reason == .failed {
                    // Only the test's own SIGKILL can fail a text that renders.
                    #expect(event.detail == Self.killedDetail, "\(event)")
                }
            }
            #expect(
                failedByDetail.contains { $0.key != Self.killedDetail },
                "no crashing announcement reached a worker; the crash path was not exercised")

            #expect(!crashRenders.isEmpty && !normalRenders.isEmpty)
            for render in crashRenders {
                #expect(render.status == 500, "\(render)")
                #expect(Self.crashDetails.contains(render.message ?? ""), "\(render)")
                #expect(render.problem == nil, "\(render)")
            }
            for render in normalRenders {
                if render.status == 200 {
                    #expect(render.problem == nil, "\(render)")
                    #expect((render.samples ?? 0) > 22_050, "\(render)")
                } else {
                    #expect(render.status == 500 && render.message == Self.killedDetail, "\(render)")
                    #expect(render.problem == nil, "\(render)")
                }
            }
            #expect(crashRenders.contains { $0.message != Self.killedDetail }, "no crashing render reached a worker")
            #expect(normalRenders.contains { $0.status == 200 })

            #expect(alive, "speakd died; log:\n\(log)")
            #expect(!kills.isEmpty)
            #expect((workers?.restarts ?? 0) > 0)
            #expect(
                workers?.running == Self.workers && workers?.configured == Self.workers,
                "\(String(describing: workers))")
            #expect(nextFinished.count == 1 && nextFinished.first?.reason == .completed, "\(nextFinished)")
        }
    }
}
