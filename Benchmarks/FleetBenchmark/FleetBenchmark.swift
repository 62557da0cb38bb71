import Foundation
import SpeakAPI
import SpeakMQTT
import SpeakTestSupport
import Synchronization

/// Three `speakd` kiosks on one machine, each on its own private PulseAudio server whose null
/// sink's monitor is recorded, and a private mosquitto broker:
///
/// - publish to `all` → first sample at each kiosk's sink (median per kiosk, and the spread
///   between the first and the last kiosk of each round),
/// - 1,000 announcements published to `all` as fast as the broker takes them: how many per
///   second each kiosk accepts (its `queued` events), and the broker's CPU time against the
///   kiosks' over that run.
///
/// Usage: `speakd-fleet-bench [--rounds N] [--count N]` (build with `scripts/build-release`; `speakd` must
/// sit beside this executable).
@main
struct FleetBenchmark {
    static let site = "bench"
    static let soundThreshold: Int16 = 64

    static func main() async throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let rounds = Self.option("--rounds", in: arguments) ?? 10
        let count = Self.option("--count", in: arguments) ?? 1_000
        let speakd = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("speakd").path
        guard FileManager.default.isExecutableFile(atPath: speakd) else {
            FileHandle.standardError.write(Data("no speakd beside this executable at \(speakd)\n".utf8))
            exit(1)
        }

        let broker = try await MosquittoBroker.start()
        var kiosks: [(id: String, pulse: PulseAudioServer, recorder: MonitorRecorder, daemon: SpeakdProcess)] = []
        for index in 1...3 {
            let pulse = try await PulseAudioServer.start(sinkName: "fleet_bench_\(index)")
            let recorder = try await MonitorRecorder.start(pulse)
            let daemon = try await SpeakdProcess.start(
                executable: speakd, audio: "pulse",
                arguments: [
                    "--mqtt", broker.url, "--mqtt-id", "k\(index)", "--mqtt-site", site, "--max-queue",
                    "\(count + 10)", "--log-level", "warning", "--render-cache-mib", "0",
                ], environment: pulse.environment)
            kiosks.append(("k\(index)", pulse, recorder, daemon))
        }
        let control = try await Control.start(broker)
        try await control.waitForOnline(kiosks.map(\.id))
        print("speakd fleet: 3 kiosks, a private mosquitto, PulseAudio null sinks recorded from their monitors")

        // Publish → first sample, each round after every kiosk has finished the last one.
        var perKiosk: [String: [Double]] = [:]
        var spreads: [Double] = []
        for round in 0...rounds {
            let starts = kiosks.map { $0.recorder.recordedFrames }
            let published = ContinuousClock.now
            try control.publish(FleetTopics(site: site).all, #"{"text": "Platform four", "requestId": "r\#(round)"}"#)
            var firsts: [Double] = []
            for (index, kiosk) in kiosks.enumerated() {
                let frame = try await Self.firstSound(kiosk.recorder, after: starts[index])
                let played = try require(kiosk.recorder.playedAt(frame: frame), "the play time")
                let latency =
                    Double((played - published).components.attoseconds) / 1e18
                    + Double((played - published).components.seconds)
                firsts.append(latency)
                if round > 0 { perKiosk[kiosk.id, default: []].append(latency) }
            }
            if round > 0 { spreads.append(firsts.max()! - firsts.min()!) }
            try await control.waitForFinished(requestId: "r\(round)", kiosks: kiosks.count)
            // `finished` comes when the sink has played the audio; its monitor passes the last
            // blocks on a little later, and they must not count as the next round's first sound.
            try await Task.sleep(for: .milliseconds(500))
        }
        for kiosk in kiosks {
            print("publish → first sample, \(kiosk.id): median \(ms(median(perKiosk[kiosk.id] ?? []))) over \(rounds)")
        }
        print("spread between kiosks per round: median \(ms(median(spreads))), max \(ms(spreads.max() ?? 0))")

        // Fan-out: accepted per second, and who spent the CPU.
        let brokerBefore = cpuSeconds(broker.pid)
        let kiosksBefore = kiosks.map { cpuSeconds($0.daemon.pid) }.reduce(0, +)
        let began = ContinuousClock.now
        for index in 0..<count {
            try control.publish(
                FleetTopics(site: site).all,
                #"{"text": "Fan out \#(index)", "priority": "low", "requestId": "f\#(index)"}"#)
        }
        let reached = try await control.waitForQueued(prefix: "f", count: count, kiosks: kiosks.map(\.id))
        let elapsed = seconds(ContinuousClock.now - began)
        let brokerCPU = cpuSeconds(broker.pid) - brokerBefore
        let kiosksCPU = kiosks.map { cpuSeconds($0.daemon.pid) }.reduce(0, +) - kiosksBefore
        for (id, at) in reached.sorted(by: { $0.key < $1.key }) {
            print("\(count) announcements fanned out, \(id): \(Int(Double(count) / seconds(at - began))) accepted/s")
        }
        print(
            String(
                format: "over %.2f s: broker CPU %.2f s (%.0f%% of one core), kiosks' CPU %.2f s; broker share %.0f%%",
                elapsed, brokerCPU, 100 * brokerCPU / elapsed, kiosksCPU, 100 * brokerCPU / (brokerCPU + kiosksCPU)))

        for kiosk in kiosks {
            _ = try? await kiosk.daemon.unixClient.send("DELETE", "/v1/announcements")
            await kiosk.daemon.stop()
            _ = await kiosk.recorder.stop()
            await kiosk.pulse.stop()
        }
        await broker.stop()
    }

    static func option(_ name: String, in arguments: [String]) -> Int? {
        guard let index = arguments.firstIndex(of: name) else { return nil }
        guard index + 1 < arguments.count, let value = Int(arguments[index + 1]), value > 0 else {
            FileHandle.standardError.write(Data("\(name): expected a positive whole number\n".utf8))
            exit(2)
        }
        return value
    }

    /// The first frame after `start` louder than the threshold.
    static func firstSound(_ recorder: MonitorRecorder, after start: Int) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let samples = recorder.samplesSoFar()
            if samples.count > start * recorder.channels,
                let index = samples[(start * recorder.channels)...].firstIndex(where: {
                    abs(Int($0)) > Int(soundThreshold)
                })
            {
                return index / recorder.channels
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw BenchFailure(description: "no sound within 10 s")
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
}

func require<T>(_ value: T?, _ what: String = "value") throws -> T {
    guard let value else { throw BenchFailure(description: "missing \(what)") }
    return value
}

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func ms(_ seconds: Double) -> String { String(format: "%.1f ms", seconds * 1000) }

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// User plus system CPU seconds of `pid`, from /proc.
func cpuSeconds(_ pid: pid_t?) -> Double {
    guard let pid, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime 14 and stime 15 (1-based over the whole line).
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The control room's client: publishes, and counts what the kiosks report.
final class Control: Sendable {
    private let client: MQTTClient
    private let reports = Mutex<[(report: FleetReport, at: ContinuousClock.Instant)]>([])
    private let online = Mutex<Set<String>>([])
    private let connected = Mutex(false)

    static func start(_ broker: MosquittoBroker) async throws -> Control {
        let control = try Control(broker)
        let deadline = ContinuousClock.now + .seconds(10)
        while !control.connected.withLock({ $0 }) {
            guard ContinuousClock.now < deadline else { throw BenchFailure(description: "no broker") }
            try await Task.sleep(for: .milliseconds(10))
        }
        return control
    }

    private init(_ broker: MosquittoBroker) throws {
        client = try MQTTClient(
            .init(
                broker: try MQTTBrokerURL(parsing: broker.url), clientID: "fleet-bench", cleanStart: true,
                sessionExpiry: 0))
        let client = client
        Task { [self] in
            for await event in client.events {
                switch event {
                case .connected:
                    client.subscribe("speakd/\(FleetBenchmark.site)/device/+/events")
                    client.subscribe("speakd/\(FleetBenchmark.site)/device/+/status")
                    self.connected.withLock { $0 = true }
                case .disconnected:
                    break
                case .published:
                    break
                case .message(let message):
                    if message.topic.hasSuffix("/status"),
                        let status = try? WireFormat.decoder().decode(FleetStatus.self, from: message.payload),
                        status.state == .online
                    {
                        self.online.withLock { _ = $0.insert(status.device) }
                    } else if let report = try? WireFormat.decoder().decode(FleetReport.self, from: message.payload) {
                        self.reports.withLock { $0.append((report, .now)) }
                    }
                }
            }
        }
        client.start()
    }

    func publish(_ topic: String, _ body: String) throws {
        try client.publish(MQTTOutgoing(topic: topic, payload: Data(body.utf8)))
    }

    func waitForOnline(_ devices: [String]) async throws {
        try await waitUntil("kiosks online") { online.withLock { Set(devices).isSubset(of: $0) } }
    }

    func waitForFinished(requestId: String, kiosks: Int) async throws {
        try await waitUntil("\(requestId) finished") {
            reports.withLock { $0.filter { $0.report.requestId == requestId && $0.report.type == .finished }.count }
                >= kiosks
        }
    }

    /// Waits until every kiosk has queued `count` requests whose ids start with `prefix`;
    /// returns when each got there.
    func waitForQueued(prefix: String, count: Int, kiosks: [String]) async throws -> [String: ContinuousClock.Instant] {
        var reached: [String: ContinuousClock.Instant] = [:]
        try await waitUntil("\(count) queued", timeout: .seconds(300)) {
            let queued = reports.withLock { reports in
                reports.filter { $0.report.type == .queued && $0.report.requestId?.hasPrefix(prefix) == true }
            }
            for kiosk in kiosks where reached[kiosk] == nil {
                let mine = queued.filter { $0.report.device == kiosk }
                if mine.count >= count { reached[kiosk] = mine[count - 1].at }
            }
            return reached.count == kiosks.count
        }
        return reached
    }

    private func waitUntil(
        _ what: String, timeout: Duration = .seconds(30), _ condition: () -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw BenchFailure(description: "timed out: \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
