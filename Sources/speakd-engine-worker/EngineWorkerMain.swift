import EngineWorkers
import EspeakEngine
import Foundation
import Logging
import SpeechModel
import Synchronization

/// One engine worker: owns one libespeak-ng and renders the jobs its parent sends on standard
/// input, answering on standard output (`WorkerFrame`). Logs go to standard error.
///
/// libespeak-ng has memory-safety bugs on crafted text; running it here means such a bug ends
/// this process and its one job, never the daemon.
@main
struct EngineWorkerMain {
    static func main() async {
        // A parent that went away must end the worker through EOF or EPIPE, not a signal.
        signal(SIGPIPE, SIG_IGN)
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "speakd.engine-worker")
        logger.logLevel = .warning
        let options: WorkerOptions
        do {
            options = try WorkerOptions(parsing: Array(CommandLine.arguments.dropFirst()))
        } catch {
            complain("\(error)")
            exit(2)
        }
        let engine: EspeakEngine
        do {
            engine = try await options.startEngine(logger: logger)
        } catch {
            complain("the engine did not start: \(error)")
            exit(1)
        }
        // The sandbox is entered here, once espeak-ng has its data open.
        do {
            try WorkerFrame.ready(sampleRate: engine.format.sampleRate).write(to: STDOUT_FILENO)
        } catch {
            exit(1)
        }
        await WorkerLoop(engine: engine).run()
    }
}

/// The worker's command line: how the daemon set up its own engine, so voices resolve alike.
struct WorkerOptions {
    var voices: String?
    var defaultLanguage: String?
    var fallbackLanguage: String?
    var runtimeDirectory: String?

    init(parsing arguments: [String]) throws {
        var remaining = arguments[...]
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { throw WorkerUsageError(message: "\(flag) needs a value") }
            switch flag {
            case "--voices": voices = value
            case "--default-language": defaultLanguage = value
            case "--fallback-language": fallbackLanguage = value
            case "--runtime-directory": runtimeDirectory = value
            default: throw WorkerUsageError(message: "unknown option \(flag)")
            }
        }
    }

    func startEngine(logger: Logger) async throws -> EspeakEngine {
        try await EspeakEngine(
            voices: voices.map { VoicesDirectory(URL(fileURLWithPath: $0)) },
            defaultLanguage: try defaultLanguage.map { try LanguageTag($0) },
            fallback: try fallbackLanguage.map { try LanguageTag($0) },
            configuration: .init(runtimeDirectory: runtimeDirectory), logger: logger)
    }
}

struct WorkerUsageError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Reads frames on a thread of its own (a blocking read must not hold a cooperative thread) and
/// renders one job at a time.
final class WorkerLoop: Sendable {
    let engine: EspeakEngine
    /// The job being rendered, so `cancel` can abort it.
    private let current = Mutex<Task<Void, Never>?>(nil)

    init(engine: EspeakEngine) {
        self.engine = engine
    }

    func run() async {
        await withCheckedContinuation { (ended: CheckedContinuation<Void, Never>) in
            let thread = Thread { [self] in
                readFrames()
                ended.resume()
            }
            thread.name = "speakd-worker-input"
            thread.start()
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
            case .job(let json)?:
                current.withLock { current in
                    let previous = current
                    current = Task { [engine] in
                        await previous?.value
                        await Self.render(json, on: engine)
                    }
                }
            case .cancel?:
                current.withLock { $0?.cancel() }
            default:
                complain("unexpected frame \(String(describing: frame))")
                return
            }
        }
    }

    /// Renders one job, sending its chunks and then `done`, or `failure` with the reason.
    private static func render(_ json: Data, on engine: EspeakEngine) async {
        do {
            let utterance = try JSONDecoder().decode(Utterance.self, from: json)
            // Cancelling this task ends the stream early and aborts espeak-ng's synthesis.
            for try await chunk in engine.render(utterance) {
                try WorkerFrame.pcm(chunk.samples).write(to: STDOUT_FILENO)
            }
            try WorkerFrame.done.write(to: STDOUT_FILENO)
        } catch is CancellationError {
            try? WorkerFrame.done.write(to: STDOUT_FILENO)
        } catch {
            try? WorkerFrame.failure("\(error)").write(to: STDOUT_FILENO)
        }
    }
}

/// One line on standard error, which the daemon's log receives.
func complain(_ message: String) {
    FileHandle.standardError.write(Data("speakd-engine-worker: \(message)\n".utf8))
}
