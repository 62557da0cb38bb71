import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// HTTP/1 connections with speakd's timeouts: Hummingbird's `HTTP1Channel` with a
/// `ConnectionGuard` behind the HTTP decoder and a `RequestBytesSignal` in front of it.
///
/// Hummingbird's own `idleTimeout` cannot tell a quiet connection from a slow header (the decoder
/// shows nothing until the header is complete) and is reset by every body part, so a body sent
/// one byte a second never ends; hence one handler that knows which phase a connection is in.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let http1: HTTP1Channel

    init(
        responder: @escaping HTTPChannelHandler.Responder, limits: ConnectionLimits, registry: ConnectionRegistry,
        logger: Logger
    ) {
        self.http1 = HTTP1Channel(
            responder: responder,
            configuration: .init(additionalChannelHandlers: [
                ConnectionGuard(limits: limits, registry: registry, logger: logger)
            ]))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(RequestBytesSignal(), position: .first)
        }.flatMap {
            http1.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}

/// Tells the `ConnectionGuard` behind the decoder that bytes arrived, so it can start the header
/// timeout at a request's first byte rather than when the decoder has the whole header.
final class RequestBytesSignal: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The user event sent ahead of every read.
    struct BytesArrived {}

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireUserInboundEventTriggered(BytesArrived())
        context.fireChannelRead(data)
    }
}

/// Closes a connection that stays too long in one phase: idle between requests, reading a
/// header, reading a body, or with a response its client does not read.
///
/// A request being answered has no time limit (an event stream lasts as long as its client
/// reads it; `?wait=true` lasts as long as the announcement), except that a response the client
/// stops reading is cut after `sendTimeout`: NIO's write buffer stops taking more at its
/// high-water mark, so what a connection holds stays bounded until then.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum Phase: Equatable {
        case idle
        case header
        case body
        case answering
    }

    private let limits: ConnectionLimits
    private let registry: ConnectionRegistry
    private let logger: Logger
    /// Requests whose head was read and whose response has not ended.
    private var unanswered = 0
    private var bodyOpen = false
    private var headerStarted = false
    private var phase: Phase?
    private var phaseTimer: Scheduled<Void>?
    private var stallTimer: Scheduled<Void>?

    init(limits: ConnectionLimits, registry: ConnectionRegistry, logger: Logger) {
        self.limits = limits
        self.registry = registry
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { update(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        registry.remove(context.channel)
    }

    func channelActive(context: ChannelHandlerContext) {
        update(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimers()
        registry.remove(context.channel)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is RequestBytesSignal.BytesArrived else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        if unanswered == 0, !headerStarted {
            headerStarted = true
            update(context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            bodyOpen = true
            headerStarted = false
        case .body: break
        case .end:
            bodyOpen = false
        }
        update(context)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let response):
            if response.headerFields[.contentType]?.hasPrefix("text/event-stream") == true {
                limitSendBuffer(context)
            }
        case .body: break
        case .end:
            unanswered = max(0, unanswered - 1)
            update(context)
        }
        context.write(data, promise: promise)
    }

    /// Gives an event stream's socket a small kernel send buffer. Left alone, Linux grows a TCP
    /// send buffer to megabytes for a client that stopped reading (its window closed), and all
    /// of it stays queued while the connection lasts; small, the kernel holds a few events, the
    /// channel's own buffer reaches its high-water mark soon after, and the stall timer runs.
    /// A stream is a trickle of small frames, so a small buffer costs it nothing.
    private func limitSendBuffer(_ context: ChannelHandlerContext) {
        do {
            try context.channel.syncOptions?.setOption(
                ChannelOptions.socketOption(.so_sndbuf), value: ConnectionLimits.eventStreamSendBuffer)
        } catch {
            logger.debug("could not limit an event stream's send buffer", metadata: ["speakd.error": "\(error)"])
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
        } else if stallTimer == nil {
            stallTimer = schedule(
                context, after: limits.sendTimeout, reason: "the client does not read its response", discardUnsent: true
            )
        }
        context.fireChannelWritabilityChanged()
    }

    /// Starts the timer of the phase the connection is now in, when the phase changed.
    private func update(_ context: ChannelHandlerContext) {
        let now: Phase =
            if bodyOpen { .body } else if unanswered > 0 { .answering } else if headerStarted { .header } else { .idle }
        guard now != phase else { return }
        phase = now
        if context.channel.isActive {
            registry.update(context.channel, evictable: now == .idle || now == .header)
        }
        phaseTimer?.cancel()
        switch now {
        case .idle: phaseTimer = schedule(context, after: limits.idleTimeout, reason: "idle timeout")
        case .header: phaseTimer = schedule(context, after: limits.headerTimeout, reason: "header timeout")
        case .body: phaseTimer = schedule(context, after: limits.bodyTimeout, reason: "body timeout")
        case .answering: phaseTimer = nil
        }
    }

    /// Closes the connection after `duration`. With `discardUnsent` (a client that does not read)
    /// the close resets it (`SO_LINGER` 0): what is still queued for that client is dropped at
    /// once, instead of the kernel holding it and the connection for minutes trying to deliver it.
    private func schedule(
        _ context: ChannelHandlerContext, after duration: Duration, reason: String, discardUnsent: Bool = false
    ) -> Scheduled<Void> {
        let logger = logger
        let channel = context.channel
        return context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: TimeAmount(duration)) {
            logger.debug("closing connection", metadata: ["speakd.reason": "\(reason)"])
            if discardUnsent, let socket = channel as? any SocketOptionProvider {
                // On the event loop the option is set before the close below.
                _ = socket.setSoLinger(linger(l_onoff: 1, l_linger: 0))
            }
            channel.close(promise: nil)
        }
    }

    private func cancelTimers() {
        phaseTimer?.cancel()
        phaseTimer = nil
        stallTimer?.cancel()
        stallTimer = nil
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}

/// The connections of one listener, so that at the connection limit the one that has waited
/// longest without a request (idle, or still sending its header) makes room for a new one.
///
/// Without this, strangers holding `maxConnections` idle connections, renewed before each idle
/// timeout, would keep every real client waiting in the backlog.
final class ConnectionRegistry: Sendable {
    private struct Entry {
        let channel: any Channel
        /// When it last became evictable; nil while a request is being read or answered.
        var evictableSince: ContinuousClock.Instant?
    }

    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    /// Records whether `channel` may be closed to make room, from now on.
    func update(_ channel: any Channel, evictable: Bool) {
        let since: ContinuousClock.Instant? = evictable ? .now : nil
        entries.withLock { $0[ObjectIdentifier(channel)] = Entry(channel: channel, evictableSince: since) }
    }

    func remove(_ channel: any Channel) {
        _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Closes the connection that has been evictable longest; false when none is.
    @discardableResult
    func evictOldest() -> Bool {
        let victim = entries.withLock { entries -> (any Channel)? in
            var oldest: (key: ObjectIdentifier, since: ContinuousClock.Instant)?
            for (key, entry) in entries {
                guard let since = entry.evictableSince else { continue }
                if oldest.map({ since < $0.since }) ?? true { oldest = (key, since) }
            }
            guard let oldest else { return nil }
            return entries.removeValue(forKey: oldest.key)?.channel
        }
        victim?.close(promise: nil)
        return victim != nil
    }
}

/// Hummingbird's accept gate: below the limit it accepts; at the limit it closes the longest
/// evictable connection (see `ConnectionRegistry`), and accepts again once one has closed.
struct EvictingConnectionLimit: AvailableConnectionsDelegate {
    let maxConnections: Int
    let registry: ConnectionRegistry
    private var open = 0

    init(maxConnections: Int, registry: ConnectionRegistry) {
        self.maxConnections = maxConnections
        self.registry = registry
    }

    mutating func connectionOpened() {
        open += 1
        if open >= maxConnections { registry.evictOldest() }
    }

    mutating func connectionClosed() {
        open -= 1
    }

    func isAcceptingNewConnections() -> Bool {
        open < maxConnections
    }
}

@available(*, unavailable)
extension RequestBytesSignal: Sendable {}
