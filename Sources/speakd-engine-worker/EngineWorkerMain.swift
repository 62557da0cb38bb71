import Dispatch
import EngineSandbox
import EngineWorkers
import EspeakEngine
import FoundationEssentials
import Logging
import PosixSupport
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One engine worker: owns one libespeak-ng and renders the jobs its parent sends on standard
/// input, answering on standard output (`WorkerFrame`). Logs go to standard error.
///
/// libespeak-ng has memory-safety bugs on crafted text; running it here means such a bug ends
/// this process and its one job, never the daemon.
@main
struct EngineWorkerMain {
    static func main() {
        MallocArenas.limit(to: 2)
        // A parent that went away must end the worker through EOF or EPIPE, not a signal.
        signal(SIGPIPE, SIG_IGN)
        let options: WorkerOptions
        do {
            options = try WorkerOptions(parsing: Array(CommandLine.arguments.dropFirst()))
        } catch {
            complain("\(error)")
            exit(2)
        }
        // First, while this is the only thread: Landlock confines the calling thread and the
        // threads it starts, so every thread of the worker is inside.
        let sandbox: EngineSandbox.Report
        do {
            sandbox = try EngineSandbox.enter(readablePaths: options.readablePaths())
        } catch {
            complain("cannot enter the sandbox: \(error)")
            exit(1)
        }
        Task {
            await serve(options, sandbox: sandbox)
            exit(0)
        }
        dispatchMain()
    }

    static func serve(_ options: WorkerOptions, sandbox: EngineSandbox.Report) async {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "speakd.engine-worker")
        logger.logLevel = .warning
        let engine: EspeakEngine
        do {
            engine = try await options.startEngine(logger: logger)
        } catch {
            complain("the engine did not start: \(error)")
            exit(1)
        }
        do {
            try WorkerFrame.ready(sampleRate: engine.format.sampleRate, sandbox: "\(sandbox)").write(to: STDOUT_FILENO)
        } catch {
            exit(1)
        }
        await WorkerLoop(engine: engine).run()
    }
}

/// The worker's command line: the data directory the daemon's engine built. The daemon resolves
/// voices and sends compiled input naming them, so the worker needs no voices directory or
/// languages of its own.
struct WorkerOptions {
    /// espeak-ng's data directory, as the daemon's engine built it (with the voice variants).
    var data: String?

    init(parsing arguments: [String]) throws {
        var remaining = arguments[...]
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { throw WorkerUsageError(message: "\(flag) needs a value") }
            switch flag {
            case "--data": data = value
            default: throw WorkerUsageError(message: "unknown option \(flag)")
            }
        }
        guard data != nil else { throw WorkerUsageError(message: "--data is required") }
    }

    /// What the worker reads: the data directory, what its entries link to (the daemon's
    /// overlay links into espeak-ng's own data and the voice variants).
    func readablePaths() -> [String] {
        guard let data else { return [] }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: data)) ?? []
        let targets = entries.compactMap { entry -> String? in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(data)/\(entry)") else {
                return nil
            }
            return target.hasPrefix("/") ? target : "\(data)/\(target)"
        }
        return [data] + targets
    }

    func startEngine(logger: Logger) async throws -> EspeakEngine {
        try await EspeakEngine(voices: nil, configuration: .init(dataPath: data), logger: logger)
    }
}

struct WorkerUsageError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Reads frames on a thread of its own (a blocking read must not hold a cooperative thread) and
/// renders one job at a time. Chunks go from espeak-ng's callback straight to standard output,
/// on the espeak thread: no stream or task between the engine and the pipe.
final class WorkerLoop: Sendable {
    let engine: EspeakEngine
    /// Cancels the job being rendered.
    private let current = Mutex<RenderCancellation?>(nil)

    init(engine: EspeakEngine) {
        self.engine = engine
    }

    func run() async {
        await withCheckedContinuation { (ended: CheckedContinuation<Void, Never>) in
            DetachedThread.start(name: "speakd-worker-input") { [self] in
                readFrames()
                ended.resume()
            }
        }
    }

    private func readFrames() {
        while true {
            let frame: WorkerFrame?
            do {
                frame = try WorkerFrame.read(from: STDIN_FILENO)
            } catch {
                complain("\(error)")
                return
            }
            switch frame {
            case nil:
                return
            case .job(let input, let chunking)?:
                start(input, chunking: chunking)
            case .cancel?:
                current.withLock { $0?.cancel() }
            default:
                complain("unexpected frame \(String(describing: frame))")
                return
            }
        }
    }

    /// Starts one job; its chunks, then `done` or `failure`, are written as they come. The daemon
    /// sends the next job only after that answer, so writes never interleave. The input is the
    /// daemon's compiled one: nothing is parsed or compiled here.
    private func start(_ input: EspeakInput, chunking: RenderChunking) {
        let cancellation = engine.render(
            input, chunking: chunking,
            deliver: { chunk in
                if !chunk.events.isEmpty { Self.send(.events(chunk.events)) }
                Self.send(.pcm(chunk.samples))
            },
            finished: { error in Self.send(error.map { .failure("\($0)") } ?? .done) })
        current.withLock { $0 = cancellation }
    }

    /// Writes `frame`; a daemon that went away ends the worker.
    private static func send(_ frame: WorkerFrame) {
        do {
            try frame.write(to: STDOUT_FILENO)
        } catch {
            exit(0)
        }
    }
}

/// One line on standard error, which the daemon's log receives.
func complain(_ message: String) {
    let line = Array("speakd-engine-worker: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
