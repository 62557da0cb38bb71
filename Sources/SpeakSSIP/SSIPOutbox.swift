import Synchronization

/// What one connection sends, in order: replies, and notifications that are held while a command
/// is being answered (SSIP allows none between a command and its reply) and sent right after it.
///
/// A client that stops reading lets at most `limit` bytes pile up; then the outbox closes, the
/// connection is dropped, and its messages go on speaking without it.
final class SSIPOutbox: Sendable {
    private struct State {
        var inCommand = false
        var held: [SSIPReply] = []
        var unsent = 0
        var closed = false
    }

    /// The text to write, in order; ends when the outbox closes.
    let stream: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    private let state = Mutex(State())
    private let limit: Int

    /// - Parameter limit: the most bytes written but not yet taken by the client.
    init(limit: Int) {
        self.limit = limit
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        self.stream = stream
        self.continuation = continuation
    }

    /// A command has been read: notifications wait until its reply.
    func beginCommand() {
        state.withLock { $0.inCommand = true }
    }

    /// Sends the reply to the command being answered (nil: a line that has none, such as a line
    /// of SPEAK's text), then the notifications held meanwhile.
    func reply(_ reply: SSIPReply?) {
        state.withLock { state in
            state.inCommand = false
            if let reply { enqueue(reply, &state) }
            for notification in state.held { enqueue(notification, &state) }
            state.held = []
        }
    }

    /// Sends a notification now, or after the reply to the command being answered.
    func notify(_ notification: SSIPReply) {
        state.withLock { state in
            if state.inCommand {
                state.held.append(notification)
            } else {
                enqueue(notification, &state)
            }
        }
    }

    /// The writer has handed `count` bytes to the socket.
    func wrote(_ count: Int) {
        state.withLock { $0.unsent -= count }
    }

    /// Closes the outbox: what it holds is still written, then nothing more.
    func close() {
        state.withLock { $0.closed = true }
        continuation.finish()
    }

    private func enqueue(_ reply: SSIPReply, _ state: inout State) {
        guard !state.closed else { return }
        let wire = reply.wire
        state.unsent += wire.utf8.count
        if state.unsent > limit {
            state.closed = true
            continuation.finish()
            return
        }
        continuation.yield(wire)
    }
}
