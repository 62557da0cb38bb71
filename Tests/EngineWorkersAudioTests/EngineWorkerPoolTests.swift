import EspeakEngine
import Foundation
import Logging
import PosixSupport
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Testing
import WorkerRuntime

@testable import EngineWorkers

/// The pool with the real `speakd-engine-worker` and real libespeak-ng in each worker.
@Suite("Engine worker pool", .serialized, .timeLimit(.minutes(2)))
struct EngineWorkerPoolTests {
    static func makePool(
        workers: Int = 2, stallLimit: Duration = .seconds(10), maxSamplesAhead: Int = 1 << 18
    ) async throws -> EngineWorkerPool {
        let engine = try await EspeakEngine(voices: nil)
        let launch = EngineWorkerPool.Launch(
            executable: BuiltProduct.path("speakd-engine-worker"), arguments: [], count: workers,
            stallLimit: stallLimit, maxSamplesAhead: maxSamplesAhead)
        return try await EngineWorkerPool(launch: launch, engine: engine, logger: Logger(label: "test"))
    }

    static func crasher(_ name: String) throws -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/espeak-crashers/\(name)")
        return try String(contentsOf: url, encoding: .utf8)
    }

    /// Renders a long text and SIGKILLs `pid` (a worker, or the template) at its first chunk: the
    /// render fails naming the signal.
    static func expectKilledMidRender(
        _ pool: EngineWorkerPool, killing pid: pid_t, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        // Long enough that the worker is still synthesising when it is killed.
        let stream = pool.render(Utterance(String(repeating: "Attention please, the museum closes soon. ", count: 110)))
        var received = 0
        await #expect(sourceLocation: sourceLocation) {
            for try await chunk in stream {
                received += chunk.samples.count
                if received > 0 && kill(pid, 0) == 0 { kill(pid, SIGKILL) }
            }
        } throws: { error in
            "\(error)" == "engine worker crashed: SIGKILL"
        }
    }

    static func samples(_ stream: AsyncThrowingStream<PCMChunk, any Error>) async throws -> [Int16] {
        var samples: [Int16] = []
        for try await chunk in stream { samples += chunk.samples }
        return samples
    }

    @Test("A worker renders exactly what the engine renders in-process, in several languages")
    func rendersLikeTheEngine() async throws {
        let pool = try await Self.makePool(workers: 1)
        defer { pool.shutdown() }
        for utterance in [
            Utterance("Platform 4: the 10:15 to Porto."),
            try Utterance.decode(
                json: Data(
                    #"{"spans":[{"text":"Next train to "},{"text":"Lisboa","language":"pt-PT","pitch":1.3}]}"#.utf8)),
        ] {
            // One preparation, rendered by a worker from the compiled input it is sent and by
            // the engine in-process.
            let prepared = try pool.prepare(utterance)
            let viaWorker = try await Self.samples(pool.render(prepared))
            let inProcess = try await Self.samples(pool.engine.render(prepared))
            #expect(viaWorker.count > 22_050 / 2)
            let same = viaWorker == inProcess
            #expect(same, "\(viaWorker.count) samples, expected \(inProcess.count)")
        }
    }

    @Test("Word, sentence and mark events come from the worker as the engine reports them in-process")
    func eventsLikeTheEngine() async throws {
        let pool = try await Self.makePool(workers: 1)
        defer { pool.shutdown() }
        let text = "Platform four. The train to Porto is late."
        for chunking in [RenderChunking.streaming, .whole] {
            var viaWorker: [EngineEvent] = []
            var samples = 0
            for try await chunk in pool.render(Utterance(text), chunking: chunking) {
                // Each event belongs to audio already sent or in this chunk.
                for event in chunk.events { #expect(event.sample <= samples + chunk.samples.count) }
                samples += chunk.samples.count
                viaWorker += chunk.events
            }
            var inProcess: [EngineEvent] = []
            for try await chunk in pool.engine.render(Utterance(text)) { inProcess += chunk.events }
            // The same events at the same places in the text; the audio positions agree within
            // 50 ms (espeak-ng's pauses vary by a block with what a process rendered before).
            #expect(viaWorker.map(\.kind) == inProcess.map(\.kind), "\(chunking)")
            #expect(viaWorker.map(\.textPosition) == inProcess.map(\.textPosition), "\(chunking)")
            #expect(viaWorker.map(\.length) == inProcess.map(\.length), "\(chunking)")
            for (worker, local) in zip(viaWorker, inProcess) {
                #expect(abs(worker.sample - local.sample) <= 22_050 / 20, "\(worker) against \(local)")
            }
            // The words espeak-ng reports are the words of the text, in order, as the audio goes.
            let words = viaWorker.filter { $0.kind == .word }.map { event in
                let start = text.index(text.startIndex, offsetBy: event.textPosition - 1)
                return String(text[start...].prefix(event.length))
            }
            #expect(words == ["Platform", "four", "The", "train", "to", "Porto", "is", "late"])
            #expect(viaWorker.filter { $0.kind == .sentence }.count == 2)
            let starts = viaWorker.map(\.sample)
            #expect(starts == starts.sorted() && starts.last! < samples)
        }
    }

    @Test("A render runs no further ahead of its listener than the bound; a worker waiting there is not stalled")
    func aRenderWaitsForItsListener() async throws {
        let ahead = 22_050
        let pool = try await Self.makePool(workers: 1, stallLimit: .seconds(1), maxSamplesAhead: ahead)
        defer { pool.shutdown() }
        let worker = try #require(pool.workerPIDs.first)
        // About six minutes of speech, which the worker renders in well under a second.
        let text = String(repeating: "The next train to Porto leaves from platform four. ", count: 120)
        var chunks = pool.render(Utterance(text)).makeAsyncIterator()
        let first = try #require(try await chunks.next())
        // Held back at the bound: asleep on its full pipe, well past the stall limit, not killed.
        try await Task.sleep(for: .seconds(2))
        #expect(!ProcessTable.isRunning(worker), "the worker renders on with nobody listening")
        // Where it sleeps: in a write to its full pipe (not idle, waiting for its next job).
        let waitsIn = (try? String(contentsOfFile: "/proc/\(worker)/wchan", encoding: .utf8)) ?? ""
        #expect(waitsIn.contains("pipe_write"), "the worker waits in \(waitsIn), not on its full pipe")
        #expect(pool.workerPIDs == [worker], "the waiting worker was taken for stalled")
        var total = first.samples.count
        while let chunk = try await chunks.next() { total += chunk.samples.count }
        #expect(total > 22_050 * 60 * 4, "\(total) samples")
        #expect(pool.workerPIDs == [worker])
    }

    @Test("Two renders at once run on two workers: the short one is not held behind the long one")
    func rendersRunSideBySide() async throws {
        let pool = try await Self.makePool(workers: 2)
        defer { pool.shutdown() }
        let long = Utterance(String(repeating: "The next train to Porto leaves from platform four. ", count: 60))
        let short = Utterance("Doors closing.")
        let started = ContinuousClock.now
        async let longDone: ContinuousClock.Instant = {
            _ = try await Self.samples(pool.render(long))
            return ContinuousClock.now
        }()
        try await Task.sleep(for: .milliseconds(5))
        let shortSamples = try await Self.samples(pool.render(short))
        let shortDone = ContinuousClock.now
        let longFinished = try await longDone
        #expect(!shortSamples.isEmpty)
        #expect(shortDone < longFinished, "short \(shortDone - started), long \(longFinished - started)")
        #expect(Set(pool.workerPIDs).count == 2)
    }

    @Test("A worker killed mid-render fails only its job, naming the signal; a replacement renders the next")
    func killedWorkerIsReplaced() async throws {
        let pool = try await Self.makePool(workers: 1)
        defer { pool.shutdown() }
        let before = try #require(pool.workerPIDs.first)
        await Self.expectKilledMidRender(pool, killing: before)
        let next = try await Self.samples(pool.render(Utterance("Welcome back.")))
        #expect(next.count > 22_050 / 4)
        #expect(pool.status.restarts == 1)
        #expect(pool.workerPIDs.first != before)
    }

    @Test("A killed template takes its workers with it; the pool starts a new one and renders the next")
    func killedTemplateIsReplaced() async throws {
        let pool = try await Self.makePool(workers: 2)
        defer { pool.shutdown() }
        let template = try #require(await pool.templatePID)
        let workers = Set(pool.workerPIDs)
        await Self.expectKilledMidRender(pool, killing: template)
        // Both workers died with the template and are forked again from the new one.
        let deadline = ContinuousClock.now + .seconds(5)
        while (pool.status.running < 2 || pool.status.restarts < 2) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let next = try await Self.samples(pool.render(Utterance("Welcome back.")))
        #expect(next.count > 22_050 / 4)
        let replaced = try #require(await pool.templatePID)
        #expect(replaced != template)
        #expect(pool.status.running == 2)
        #expect(pool.status.restarts == 2)
        #expect(Set(pool.workerPIDs).isDisjoint(with: workers))

        // Killed while its workers are idle: a render sent at once goes to a worker that is
        // dying with it, produces nothing there, and is rendered by a new worker instead of
        // failing. (Whole, as `/v1/speech` renders: a streaming render may yield its first chunk
        // before the signal lands, and then fails like any render whose worker died.)
        let second = try #require(await pool.templatePID)
        kill(second, SIGKILL)
        let after = try await Self.samples(pool.render(Utterance("Welcome back again."), chunking: .whole))
        #expect(after.count > 22_050 / 4)
        // The render may also have ended on a worker before its parent's death reached it; the
        // template is replaced all the same.
        let replacedBy = ContinuousClock.now + .seconds(5)
        while await pool.templatePID == second && ContinuousClock.now < replacedBy {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await pool.templatePID != second)
    }

    @Test(
        "A text that crashes libespeak-ng ends one worker, not the caller; the next render works",
        arguments: ["dotted-abbreviations.txt", "dotted-initials.txt"])
    func crashingInput(_ name: String) async throws {
        let pool = try await Self.makePool(workers: 1)
        defer { pool.shutdown() }
        let text = try Self.crasher(name)
        await #expect {
            _ = try await Self.samples(pool.render(Utterance(text)))
        } throws: { error in
            "\(error)".hasPrefix("engine worker crashed: SIG")
        }
        let next = try await Self.samples(pool.render(Utterance("Still here.")))
        #expect(next.count > 22_050 / 4)
        #expect(pool.status.restarts == 1)
    }

    @Test("A cancelled render stops its worker, which then renders the next one whole")
    func cancelFreesTheWorker() async throws {
        let pool = try await Self.makePool(workers: 1)
        defer { pool.shutdown() }
        let pid = pool.workerPIDs.first
        let consumer = Task {
            for try await _ in pool.render(
                Utterance(String(repeating: "Please wait for the next free desk. ", count: 120)))
            {
                try await Task.sleep(for: .seconds(10))
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        consumer.cancel()
        _ = await consumer.result
        let utterance = Utterance("Desk three is free.")
        let next = try await Self.samples(pool.render(utterance))
        // espeak-ng's leading silence varies by a block with what it rendered before, so "whole"
        // is the same length and loudness within 10%, not the same samples.
        let expected = try await Self.samples(pool.engine.render(utterance))
        #expect(
            abs(next.count - expected.count) < expected.count / 10, "\(next.count) samples, expected \(expected.count)")
        let peak = next.map { abs(Int($0)) }.max() ?? 0
        let expectedPeak = expected.map { abs(Int($0)) }.max() ?? 0
        #expect(abs(peak - expectedPeak) < expectedPeak / 10, "peak \(peak), expected \(expectedPeak)")
        #expect(pool.workerPIDs.first == pid)
        #expect(pool.status.restarts == 0)
    }

    @Test("A render waiting for a worker when the pool stops fails at once, naming why; none is taken after")
    func shutdownEndsWaitingRenders() async throws {
        let pool = try await Self.makePool(workers: 1)
        // Holds the only worker for seconds.
        let long = pool.render(Utterance(String(repeating: "Attention please, the museum closes soon. ", count: 110)))
        var chunks = long.makeAsyncIterator()
        _ = try await chunks.next()
        let waiting = pool.render(Utterance("Doors closing."))
        try await Task.sleep(for: .milliseconds(50))
        let stopped = ContinuousClock.now
        pool.shutdown()
        await #expect {
            _ = try await Self.samples(waiting)
        } throws: { error in
            "\(error)" == "no engine worker: the engine workers stopped"
        }
        #expect(ContinuousClock.now - stopped < .seconds(2))
        await #expect(throws: EngineWorkerError.self) {
            _ = try await Self.samples(pool.render(Utterance("After the end.")))
        }
    }

    @Test("A worker renders the compiled input its job frame carries, and refuses a job of utterance JSON")
    func workerTakesCompiledInputNotJSON() async throws {
        let engine = try await EspeakEngine(voices: nil)
        let input = try engine.espeakInput(for: Utterance("Platform four."))
        // A worker forked by the template, driven over its pipes as the pool drives it.
        let template = try WorkerTemplate(
            executable: BuiltProduct.path("speakd-engine-worker"), arguments: ["--data", engine.dataPath],
            logger: Logger(label: "test"))
        defer { template.stop() }
        _ = try await template.ready(limit: .seconds(20))
        let pipes = try StandardStreams()
        let pid = try await template.fork(pipes, limit: .seconds(5))
        pipes.closeTheirs()
        defer { pipes.closeOurs() }
        let send = pipes.input
        let receive = pipes.output
        guard case .ready? = try WorkerFrame.read(from: receive) else {
            Issue.record("the worker did not start")
            return
        }

        // The daemon's compiled input: the worker renders it as the engine does in-process.
        try WorkerFrame.job(WorkerJob(input, chunking: .whole)).write(to: send)
        var samples: [Int16] = []
        reading: while let frame = try WorkerFrame.read(from: receive) {
            switch frame {
            case .pcm(let chunk): samples += chunk
            case .events: continue
            case .done: break reading
            default:
                Issue.record("unexpected \(frame)")
                break reading
            }
        }
        let inProcess = try await Self.samples(engine.render(Utterance("Platform four.")))
        #expect(samples.count > 22_050 / 2)
        #expect(abs(samples.count - inProcess.count) < inProcess.count / 10)

        // A job carrying utterance JSON, as workers once took, is not parsed: the worker reports
        // the malformed frame and ends, so its one job fails.
        let json = Array(#"{"text":"Platform four."}"#.utf8)
        let legacy =
            [UInt8(ascii: "J")] + withUnsafeBytes(of: UInt32(json.count + 1).littleEndian, Array.init)
            + [UInt8(ascii: "S")] + json
        legacy.withUnsafeBytes { _ = write(send, $0.baseAddress, $0.count) }
        #expect(try WorkerFrame.read(from: receive) == nil)
        #expect(template.waitForExit(pid, limit: .seconds(5)) == .ended(.exited(1)))
        var diagnostics: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while case let count = read(pipes.errors, &buffer, buffer.count), count > 0 { diagnostics += buffer[..<count] }
        let text = String(decoding: diagnostics, as: UTF8.self)
        #expect(text.contains("job frame of version 123; this build reads version 1"), "\(text)")
    }

    @Test("A worker that cannot start is an error naming the executable")
    func missingExecutable() async throws {
        let engine = try await EspeakEngine(voices: nil)
        let launch = EngineWorkerPool.Launch(executable: "/nonexistent/speakd-engine-worker", arguments: [], count: 1)
        await #expect {
            _ = try await EngineWorkerPool(launch: launch, engine: engine, logger: Logger(label: "test"))
        } throws: { error in
            "\(error)".contains("/nonexistent/speakd-engine-worker")
        }
    }
}
