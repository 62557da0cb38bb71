import Foundation
import Synchronization

/// Records what a `NullSinkServer`'s null sink plays, from its monitor source, with `parec`.
///
/// `start` returns only once data flows (the capture file grows): `parec` takes about a second
/// to deliver its first block, and anything played before that would be lost. While recording,
/// a watcher thread notes when each block of the file arrived, so a test can tell when a given
/// recorded sample was played (`playedAt(frame:)`) and measure latencies against its own clock.
public final class MonitorRecorder: Sendable {
    public let file: URL
    public let sampleRate: Int
    public let channels: Int
    /// The `parec` process's PID.
    public let pid: pid_t
    private let process: ChildProcess
    /// (when a size was first seen, the file's size in frames then), in order.
    private let arrivals = Mutex<[(ContinuousClock.Instant, Int)]>([])
    private let watching = Atomic<Bool>(true)

    /// Starts `parec` on `server`'s monitor and returns once recorded data flows.
    /// - Parameters:
    ///   - server: the server whose null sink to record.
    ///   - sink: which of its null sinks; nil for `sinkName`.
    ///   - timeout: how long to wait for data.
    ///   - blockMilliseconds: the latency `parec` asks of the monitor, so the size of the blocks
    ///     it delivers. The null sink renders ahead by the least latency any of its streams asks
    ///     for, so this is also how far ahead it renders before a player's stream asks for less.
    public static func start(
        _ server: some NullSinkServer, sink: String? = nil, timeout: Duration = .seconds(10),
        blockMilliseconds: Int = 20
    ) async throws -> MonitorRecorder {
        let file = server.directory.appendingPathComponent("monitor-\(UUID().uuidString.prefix(8)).raw")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let process = try ChildProcess(
            "/usr/bin/parec",
            [
                "--device=\(sink.map(server.monitorSource(of:)) ?? server.monitorSource)",
                "--latency-msec=\(blockMilliseconds)",
                "--format=s16le",
                "--rate=\(server.sampleRate)", "--channels=\(server.channels)", "--raw", file.path,
            ],
            environment: server.clientProcessEnvironment)
        let recorder = MonitorRecorder(
            file: file, sampleRate: server.sampleRate, channels: server.channels, process: process)
        let deadline = ContinuousClock.now + timeout
        while recorder.recordedFrames == 0 {
            if let status = process.exitStatus {
                throw PulseAudioServer.Failure(description: "parec exited with status \(status)")
            }
            if ContinuousClock.now > deadline {
                _ = await recorder.stop()
                throw PulseAudioServer.Failure(description: "parec recorded nothing within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return recorder
    }

    private init(file: URL, sampleRate: Int, channels: Int, process: ChildProcess) {
        self.file = file
        self.sampleRate = sampleRate
        self.channels = channels
        self.process = process
        self.pid = process.pid
        let watcher = Thread { [weak self] in
            var last = 0
            while let recorder = self, recorder.watching.load(ordering: .acquiring) {
                last = recorder.noteArrival(after: last)
                usleep(500)
            }
        }
        watcher.name = "MonitorRecorder watcher"
        watcher.start()
    }

    /// Frames in the capture file so far.
    public var recordedFrames: Int {
        var status = stat()
        guard stat(file.path, &status) == 0 else { return 0 }
        return Int(status.st_size) / (2 * channels)
    }

    /// The samples recorded so far.
    public func samplesSoFar() -> [Int16] {
        Self.samples(from: (try? Data(contentsOf: file)) ?? Data())
    }

    /// When recorded frame `frame` was played at the sink, by the test's clock; nil when it has
    /// not arrived yet.
    ///
    /// The null sink renders on its own clock, a block at a time, when the block is due, and the
    /// monitor passes each block on as it is rendered: so the first new frame of every arrival was
    /// due no later than the moment it arrived. The earliest such bound over the whole recording
    /// fixes the sink's clock against ours (to within the smallest delivery delay, well under a
    /// millisecond here), and frame `n` plays `n / rate` seconds after frame 0.
    public func playedAt(frame: Int) -> ContinuousClock.Instant? {
        arrivals.withLock { arrivals in
            guard let last = arrivals.last, last.1 > frame else { return nil }
            var previousFrames = 0
            var origin: ContinuousClock.Instant?
            for (time, frames) in arrivals {
                let bound = time - .microseconds(Int64(Double(previousFrames) / Double(sampleRate) * 1e6))
                origin = origin.map { min($0, bound) } ?? bound
                previousFrames = frames
            }
            return origin.map { $0 + .microseconds(Int64(Double(frame) / Double(sampleRate) * 1e6)) }
        }
    }

    /// When recorded frame `frame` reached the capture file, by the test's clock; nil when it has
    /// not arrived yet. Unlike `playedAt(frame:)` this needs no steady sink clock (a server that
    /// was frozen and resumed has none), and it is never earlier than the frame was played.
    public func arrivedAt(frame: Int) -> ContinuousClock.Instant? {
        arrivals.withLock { arrivals in arrivals.first { $0.1 > frame }?.0 }
    }

    /// When the first sound played after `instant` reached the capture file (never before it was
    /// played), or nil when nothing has sounded since: sound is a 10 ms frame with an RMS above
    /// `silenceLevel` (full scale 1), lasting 50 ms.
    public func firstSoundArrival(after instant: ContinuousClock.Instant, silenceLevel: Double = 0.005)
        -> ContinuousClock.Instant?
    {
        let before = arrivals.withLock { arrivals in arrivals.last { $0.0 <= instant }?.1 ?? 0 }
        let samples = samplesSoFar()
        guard before * channels < samples.count else { return nil }
        let analysis = AudioAnalysis(samples: Array(samples[(before * channels)...]), sampleRate: sampleRate)
        guard
            let first = analysis.soundingSegments(
                minimumSilence: 0.05, silenceLevel: silenceLevel, minimumSound: 0.05
            ).first
        else { return nil }
        return arrivedAt(frame: before + Int(first.start * Double(sampleRate)))
    }

    /// Every noted arrival: (time, frames in the file then).
    public var arrivalLog: [(ContinuousClock.Instant, Int)] { arrivals.withLock { $0 } }

    /// Ends `parec` by its PID and returns everything recorded (interleaved s16).
    public func stop() async -> [Int16] {
        // Let the last blocks arrive before ending the capture.
        try? await Task.sleep(for: .milliseconds(60))
        await process.terminate()
        watching.store(false, ordering: .releasing)
        let samples = samplesSoFar()
        try? FileManager.default.removeItem(at: file)
        return samples
    }

    /// Notes the time when the file has grown past `last` frames; returns the frames now.
    private func noteArrival(after last: Int) -> Int {
        let frames = recordedFrames
        if frames > last {
            let now = ContinuousClock.now
            arrivals.withLock { $0.append((now, frames)) }
        }
        return max(frames, last)
    }

    static func samples(from data: Data) -> [Int16] {
        let count = data.count / 2
        var samples = [Int16](repeating: 0, count: count)
        samples.withUnsafeMutableBytes { buffer in
            _ = data.copyBytes(to: buffer.bindMemory(to: UInt8.self), count: count * 2)
        }
        return samples.map { Int16(littleEndian: $0) }
    }
}
