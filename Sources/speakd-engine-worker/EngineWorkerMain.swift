import CPosixSupport
import EngineSandbox
import EngineWorkers
import EspeakEngine
import FoundationEssentials
import PosixSupport
import SpeechModel
import SpeechRendering
import Synchronization
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// The engine worker template and the workers it forks. Each worker owns one libespeak-ng and
/// renders the jobs the daemon sends on its standard input, answering on its standard output
/// (`WorkerFrame`); logs go to standard error.
///
/// libespeak-ng has memory-safety bugs on crafted text; running it in a worker means such a bug
/// ends that process and its one job, never the daemon.
///
/// The daemon starts this executable once, as the template: it enters the sandbox, loads
/// espeak-ng's data, says `ready` and then, for each byte the daemon sends on its control socket
/// (standard input and output) with a worker's three pipe ends attached, forks a worker and
/// answers `forked` with its process id, later `exited` with its status. A worker is a copy of
/// the initialised template, so the workers share espeak-ng's data and the relocated libraries
/// with it page for page until they write to them, and a replacement for a crashed worker is a
/// fork, not a new program. The template never sees a job: text that crashes espeak-ng can
/// only ever reach a worker.
///
/// Every process here is one thread (with espeak-ng's own, which it starts at initialisation
/// and which synchronous mode leaves waiting): a worker reads a job, renders it on the same
/// thread (chunks go from espeak-ng's callback straight to the pipe) and reads the next. A
/// cancel that arrives while it renders is found by looking at standard input between
/// espeak-ng's blocks.
@main
struct EngineWorkerMain {
    static func main() {
        Malloc.limitArenas(to: 1)
        Malloc.keepLargeBlocksOnHeap(upTo: 4 << 20)
        // A parent that went away must end the worker through EOF or EPIPE, not a signal.
        signal(SIGPIPE, SIG_IGN)
        let options: WorkerOptions
        do {
            options = try WorkerOptions(parsing: Array(CommandLine.arguments.dropFirst()))
        } catch {
            complain("\(error)")
            exit(2)
        }
        // The data directory stays open: when the template leaves root for the worker user,
        // espeak-ng reads it through this descriptor (/proc/self/fd/N), and the user needs
        // no way to it through the daemon's runtime directory, only read access beneath it.
        let data = open(options.data, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard data >= 0 else {
            complain("cannot open the data directory \(options.data): \(String(cString: strerror(errno)))")
            exit(1)
        }
        // Then the sandbox: Landlock confines the calling thread and the threads it starts, so
        // whatever the template and its workers do afterwards is inside; the capability sets
        // are per thread too.
        let sandbox: EngineSandbox.Report
        do {
            let layers = try EngineSandbox.Layers(
                environment: getenv(EngineSandbox.Layers.variable).map { String(cString: $0) })
            if layers == .withoutSeccomp {
                complain(
                    "\(EngineSandbox.Layers.variable)=\(layers.rawValue): the workers run without their "
                        + "seccomp filter (for an emulator that cannot filter system calls)")
            }
            sandbox = try EngineSandbox.enter(
                readablePaths: options.readablePaths(), forksWorkers: true,
                user: options.user ?? EngineSandbox.defaultUser, layers: layers)
        } catch {
            complain("cannot enter the sandbox: \(error)")
            exit(1)
        }
        // SIGCHLD is blocked before espeak-ng starts its thread, which inherits the mask: the
        // signal must wait for the template's signalfd, not go to that thread.
        let children = speakd_child_signal_descriptor()
        guard children >= 0 else {
            complain("signalfd: \(String(cString: strerror(errno)))")
            exit(1)
        }
        let session: EspeakDirectSession
        do {
            let path = sandbox.user == nil ? options.data : "/proc/self/fd/\(data)"
            session = try EspeakDirectSession(configuration: .init(dataPath: path))
        } catch {
            complain("the engine did not start: \(error)")
            exit(1)
        }
        if let voice = options.voice {
            do {
                try session.loadVoice(voice)
            } catch {
                // Each worker loads it with its first job instead.
                complain("cannot preload \(voice): \(error)")
            }
        }
        // What loading freed goes back to the kernel before any worker copies the heap.
        Malloc.releaseFreePages()
        send(.ready(sampleRate: session.format.sampleRate, sandbox: "\(sandbox)"))
        forkWorkers(
            session, sandbox: sandbox, children: children, data: data,
            idleReleaseMilliseconds: options.idleReleaseMilliseconds)
        exit(0)
    }

    /// The template's loop: a worker for each request on the control socket, an `exited` for
    /// each worker that ends; returns when the daemon closes the socket.
    ///
    /// - Parameter children: readable when a worker has ended (a signalfd for SIGCHLD).
    /// - Parameter data: the data directory's descriptor, which the workers keep.
    static func forkWorkers(
        _ session: EspeakDirectSession, sandbox: EngineSandbox.Report, children: Int32, data: Int32,
        idleReleaseMilliseconds: Int32
    ) {
        let template = getpid()
        while true {
            // Waiting, perhaps for hours: the code start-up and the last fork ran is not needed.
            CodePages.release()
            var descriptors = [
                pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
                pollfd(fd: children, events: Int16(POLLIN), revents: 0),
            ]
            guard poll(&descriptors, 2, -1) >= 0 || errno == EINTR else { return }
            if descriptors[1].revents != 0 {
                var information = signalfd_siginfo()
                while read(children, &information, MemoryLayout<signalfd_siginfo>.size) > 0 {}
                var status: Int32 = 0
                while case let pid = waitpid(-1, &status, WNOHANG), pid > 0 {
                    send(.exited(pid: pid, status: status))
                }
            }
            guard descriptors[0].revents != 0 else { continue }
            var pipes: [Int32] = [-1, -1, -1]
            let count = speakd_receive_descriptors(STDIN_FILENO, &pipes, 3)
            if count == 0 { return }
            guard count == 3 else {
                complain("a fork request came with \(count) descriptors, not 3")
                for descriptor in pipes where descriptor >= 0 { close(descriptor) }
                if count < 0 { return }
                continue
            }
            let pid = fork()
            if pid == 0 {
                becomeWorker(
                    pipes, template: template, session: session, sandbox: sandbox, data: data,
                    idleReleaseMilliseconds: idleReleaseMilliseconds)
            }
            for descriptor in pipes { close(descriptor) }
            send(pid > 0 ? .forked(pid: pid) : .failure("fork: \(String(cString: strerror(errno)))"))
        }
    }

    /// In a newly forked worker: takes its pipes as standard input, output and error, adds the
    /// rest of the sandbox and serves jobs until the daemon closes its input. Never returns.
    static func becomeWorker(
        _ pipes: [Int32], template: pid_t, session: EspeakDirectSession, sandbox: EngineSandbox.Report, data: Int32,
        idleReleaseMilliseconds: Int32
    ) -> Never {
        _ = speakd_unblock_child_signal()
        for (descriptor, standard) in zip(pipes, [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO]) {
            dup2(descriptor, standard)
        }
        // Nothing of the template's but the data directory: its control socket, the signalfd
        // and whatever else it holds stay out of the worker.
        speakd_close_descriptors_from(STDERR_FILENO + 1, data)
        // A template that dies takes its workers with it: the daemon then starts a new one and
        // forks new workers, and none is left behind out of its sight.
        _ = speakd_set_parent_death_signal(SIGKILL)
        if getppid() != template { _exit(1) }
        do {
            try EngineSandbox.confineForkedWorker(layers: sandbox.seccomp ? .all : .withoutSeccomp)
        } catch {
            complain("cannot confine the worker: \(error)")
            _exit(1)
        }
        send(.ready(sampleRate: session.format.sampleRate, sandbox: "\(sandbox)"))
        exit(serve(session, idleReleaseMilliseconds: idleReleaseMilliseconds) ? 0 : 1)
    }

    /// Reads and renders jobs until the daemon closes the pipe (true) or sends what is not a
    /// frame it may send (false, after saying so on standard error).
    static func serve(_ session: EspeakDirectSession, idleReleaseMilliseconds: Int32) -> Bool {
        var startingUp = true
        while true {
            // Idle for a second: hand the heap a job freed back to the kernel, so a worker that
            // has rendered is as small idle as one that has not. Never between two busy jobs.
            // Then the mappings of the code it ran, which the next job maps again
            // (docs/performance.md, "The plain release build was over"): after `--idle-release` without a job, or at once
            // when the worker has not released them since it started (the jobs of the daemon's
            // start-up, its loudness warm-up, are part of starting).
            if !inputArrives(within: idleTrimMilliseconds) {
                Malloc.releaseFreePages()
                if startingUp || !inputArrives(within: idleReleaseMilliseconds - idleTrimMilliseconds) {
                    CodePages.release()
                    startingUp = false
                }
            }
            let frame: WorkerFrame?
            do {
                frame = try WorkerFrame.read(from: STDIN_FILENO)
            } catch {
                complain("\(error)")
                return false
            }
            switch frame {
            case nil:
                return true
            case .job(let job)?:
                let input: EspeakInput
                do {
                    input = try EspeakInput(workerInput: job.input)
                } catch {
                    complain("\(error)")
                    return false
                }
                render(input, chunking: job.chunking, session: session)
            case .cancel?:
                // For a job that ended before the cancel arrived: its `done` is on its way.
                continue
            case let frame?:
                complain("unexpected frame \(frame)")
                return false
            }
        }
    }

    /// How long a worker waits for the next job before it trims its heap.
    static let idleTrimMilliseconds: Int32 = 1000

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

    /// Whether standard input has something to read (a frame, or its end) within `milliseconds`.
    static func inputArrives(within milliseconds: Int32) -> Bool {
        var input = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        return poll(&input, 1, milliseconds) > 0
    }

    /// When `cancelArrived` last looked at standard input, in nanoseconds of the monotonic clock.
    static let lastLook = Atomic<UInt64>(0)

    /// How often `cancelArrived` looks at standard input at most: espeak-ng's blocks come every
    /// 20–40 µs while it renders, and a `poll` for each was 61 system calls for a short render
    /// (about 1% of a worker's CPU); a cancel found 2 ms later only frees the worker later (the
    /// daemon silences the sink itself).
    static let lookInterval: UInt64 = 2_000_000

    /// Whether a cancel is waiting on standard input; reads it if so. Looks without blocking, and
    /// at most every `lookInterval`.
    @Sendable static func cancelArrived() -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanoseconds = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        guard nanoseconds &- lastLook.load(ordering: .relaxed) >= lookInterval else { return false }
        lastLook.store(nanoseconds, ordering: .relaxed)
        guard inputArrives(within: 0) else { return false }
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

/// The template's command line: the data directory the daemon's engine built, the voice to
/// load before forking, and the user to run as when started as root (`nobody` by default). The
/// daemon resolves voices and sends compiled input naming them, so the workers need no voices
/// directory or languages of their own.
struct WorkerOptions {
    /// espeak-ng's data directory, as the daemon's engine built it (with the voice variants).
    let data: String
    /// The voice the daemon speaks by default (its compiled name), loaded before any worker is
    /// forked so that the workers share it.
    var voice: String?
    /// The user the template and its workers become when the daemon runs as root.
    var user: String?
    /// How long a worker that has rendered waits for the next job before it releases its code
    /// mappings (`--idle-release`, milliseconds): the daemon's `--idle-release`.
    var idleReleaseMilliseconds: Int32 = 60_000

    init(parsing arguments: [String]) throws {
        var remaining = arguments[...]
        var data: String?
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { throw WorkerUsageError(message: "\(flag) needs a value") }
            switch flag {
            case "--data": data = value
            case "--voice": voice = value
            case "--user": user = value
            case "--idle-release":
                guard let milliseconds = Int32(value), milliseconds >= 1_000 else {
                    throw WorkerUsageError(
                        message: "--idle-release: \(value) is not a whole number of milliseconds from 1000")
                }
                idleReleaseMilliseconds = milliseconds
            default: throw WorkerUsageError(message: "unknown option \(flag)")
            }
        }
        guard let data else { throw WorkerUsageError(message: "--data is required") }
        self.data = data
    }

    /// What the worker reads: the data directory, what its entries link to (the daemon's
    /// overlay links into espeak-ng's own data and the voice variants).
    func readablePaths() -> [String] {
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
