import EngineSandbox
import EngineWorkers
import EspeakEngine
import FoundationEssentials
import PosixSupport
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// One engine worker: owns one libespeak-ng and renders the jobs its parent sends on standard
/// input, answering on standard output (`WorkerFrame`). Logs go to standard error.
///
/// libespeak-ng has memory-safety bugs on crafted text; running it here means such a bug ends
/// this process and its one job, never the daemon.
///
/// The worker is one thread: it reads a job, renders it on the same thread (chunks go from
/// espeak-ng's callback straight to the pipe) and reads the next. A cancel that arrives while it
/// renders is found by looking at standard input between espeak-ng's blocks. No reader thread,
/// no Dispatch or Swift concurrency threads: nothing to hand a job or a chunk across, and no
/// stacks or malloc arenas of theirs.
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
        // First: Landlock confines the calling thread and the threads it starts, so whatever the
        // worker does afterwards is inside.
        let sandbox: EngineSandbox.Report
        do {
            sandbox = try EngineSandbox.enter(readablePaths: options.readablePaths())
        } catch {
            complain("cannot enter the sandbox: \(error)")
            exit(1)
        }
        let session: EspeakDirectSession
        do {
            session = try EspeakDirectSession(configuration: .init(dataPath: options.data))
        } catch {
            complain("the engine did not start: \(error)")
            exit(1)
        }
        send(.ready(sampleRate: session.format.sampleRate, sandbox: "\(sandbox)"))
        serve(session)
        exit(0)
    }

    /// Reads and renders jobs until the daemon closes the pipe.
    static func serve(_ session: EspeakDirectSession) {
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
                render(input, chunking: chunking, session: session)
            case .cancel?:
                // For a job that ended before the cancel arrived: its `done` is on its way.
                continue
            default:
                complain("unexpected frame \(String(describing: frame))")
                return
            }
        }
    }

    /// Renders one job: its chunks as they come, then `done` (also when cancelled) or `failure`.
    /// The daemon sends the next job only after that answer, so a frame that arrives meanwhile
    /// can only be a cancel. The input is the daemon's compiled one: nothing is parsed here.
    static func render(_ input: EspeakInput, chunking: RenderChunking, session: EspeakDirectSession) {
        do {
            _ = try session.render(
                input, chunking: chunking,
                deliver: { chunk in
                    if !chunk.events.isEmpty { send(.events(chunk.events)) }
                    send(.pcm(chunk.samples))
                },
                cancelRequested: cancelArrived)
            send(.done)
        } catch {
            send(.failure("\(error)"))
        }
    }

    /// Whether a cancel is waiting on standard input; reads it if so. Looks without blocking.
    @Sendable static func cancelArrived() -> Bool {
        var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return false }
        do {
            switch try WorkerFrame.read(from: STDIN_FILENO) {
            case .cancel?:
                return true
            case nil:
                // The daemon went away: nothing will read the rest.
                exit(0)
            case let frame?:
                complain("unexpected frame \(frame) while rendering")
                exit(1)
            }
        } catch {
            complain("\(error)")
            exit(1)
        }
    }

    /// Writes `frame`; a daemon that went away ends the worker.
    @Sendable static func send(_ frame: WorkerFrame) {
        do {
            try frame.write(to: STDOUT_FILENO)
        } catch {
            exit(0)
        }
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
}

struct WorkerUsageError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// One line on standard error, which the daemon's log receives.
func complain(_ message: String) {
    let line = Array("speakd-engine-worker: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
