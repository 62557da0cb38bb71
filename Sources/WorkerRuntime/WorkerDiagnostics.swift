import Logging
import PosixSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A worker's standard error, line by line: its own messages are logged at warning, anything else
/// (what a library inside it prints) at debug.
package final class WorkerDiagnostics: Sendable {
    private let logger: Logger
    /// How its lines start in the log ("engine worker", "Piper worker").
    private let label: String
    /// Whether a line is the worker's own message rather than a library's.
    private let isOwn: @Sendable (String) -> Bool
    private struct State {
        var partial: [UInt8] = []
        var lastLine: String?
    }
    private let state = Mutex(State())

    /// - Parameters:
    ///   - logger: where the lines go.
    ///   - label: how they start there.
    ///   - isOwn: whether a line is the worker's own message (logged at warning).
    package init(logger: Logger, label: String, isOwn: @escaping @Sendable (String) -> Bool) {
        self.logger = logger
        self.label = label
        self.isOwn = isOwn
    }

    /// Starts reading `descriptor` on a thread of its own until it ends, then closes it.
    package func start(reading descriptor: Int32, thread: String) {
        DetachedThread.start(name: thread) { [self] in
            read(descriptor)
            close(descriptor)
        }
    }

    package var lastLine: String? { state.withLock { $0.lastLine } }

    /// Reads `descriptor` with blocking reads until it ends, line by line into the log.
    package func read(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Glibc.read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return }
            received(buffer[..<count])
        }
    }

    func received(_ data: ArraySlice<UInt8>) {
        let lines = state.withLock { state -> [String] in
            state.partial.append(contentsOf: data)
            var lines: [String] = []
            while let newline = state.partial.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: state.partial[state.partial.startIndex..<newline], as: UTF8.self)
                state.partial.removeSubrange(state.partial.startIndex...newline)
                if !line.isEmpty { lines.append(line) }
            }
            // A line longer than 4 kB is logged in pieces rather than held without bound.
            if state.partial.count > 4096 {
                lines.append(String(decoding: state.partial, as: UTF8.self))
                state.partial.removeAll()
            }
            if let last = lines.last { state.lastLine = last }
            return lines
        }
        for line in lines {
            if isOwn(line) {
                logger.warning("\(label): \(line)")
            } else {
                logger.debug("\(label) library output", metadata: ["engine.worker.stderr": "\(line)"])
            }
        }
    }
}
