import FoundationEssentials
import SpeechModel

#if canImport(Glibc)
import Glibc
import SpeechRendering
#endif

/// One message between the daemon and an engine worker, on the worker's standard input and output:
/// the one protocol every engine's worker speaks (espeak-ng's in Swift, Piper's in Python, whose
/// tests read and write these frames byte for byte).
///
/// A frame is a one-byte kind, a four-byte little-endian payload length and the payload. The
/// daemon sends `job` (the engine's input as the daemon compiled it, see `WorkerJob`) and `cancel`;
/// the worker answers `ready` once at start (its sample rate), then for each job `pcm` chunks as
/// the engine makes them and exactly one `done` or `failure`. A `cancel` that reaches an idle
/// worker is ignored, so the daemon never needs job ids: it waits for the `done` or `failure` of
/// the job it sent.
public enum WorkerFrame: Sendable, Hashable {
    /// Worker → daemon, once: the engine started; samples are s16 mono at this rate, and the
    /// worker is confined as `sandbox` says.
    case ready(sampleRate: Int, sandbox: String)
    /// Daemon → worker: render this input, which the daemon validated and compiled, cut into
    /// chunks as the job's chunking says.
    ///
    /// Payload: the chunking mode (`S` or `W`), the job format version (`jobVersion`), then the
    /// engine's input as its worker reads it, to the end.
    case job(WorkerJob)
    /// Daemon → worker: abort the job being rendered.
    case cancel
    /// Worker → daemon: the next chunk of the current job.
    case pcm([Int16])
    /// Worker → daemon: what the engine reported about the speech in the `pcm` frame that
    /// follows (words, sentences, marks), sent just before it.
    case events([EngineEvent])
    /// Worker → daemon: the current job ended (rendered to the end, or aborted by `cancel`).
    case done
    /// Worker → daemon: the current job failed; the message says why. Template → daemon: a fork
    /// it was asked for failed.
    case failure(String)
    /// Template → daemon: the worker it was asked for runs as `pid` (the daemon's request is a
    /// byte with the worker's three pipe ends attached, `WorkerTemplate.fork`).
    case forked(pid: Int32)
    /// Template → daemon: its worker `pid` ended with `status` (as `waitpid` gives it).
    case exited(pid: Int32, status: Int32)

    /// The largest payload either side accepts: a chunk of 10 s of 48 kHz audio, or a job far
    /// over the daemon's body limit. Anything larger is a broken peer, not a big message.
    public static let maximumPayload = 1 << 20
    static let headerSize = 5
    /// The layout of a job's payload. A job of another version (a daemon and a worker from
    /// different builds) is a malformed frame: the worker says so on standard error and exits,
    /// failing that one job, rather than render it misread.
    public static let jobVersion: UInt8 = 1

    private var kind: UInt8 {
        switch self {
        case .ready: UInt8(ascii: "R")
        case .job: UInt8(ascii: "J")
        case .cancel: UInt8(ascii: "C")
        case .pcm: UInt8(ascii: "P")
        case .events: UInt8(ascii: "E")
        case .done: UInt8(ascii: "D")
        case .failure: UInt8(ascii: "F")
        case .forked: UInt8(ascii: "K")
        case .exited: UInt8(ascii: "X")
        }
    }

    /// The frame's bytes, header included.
    public func encoded() -> [UInt8] {
        var payload: [UInt8] = []
        switch self {
        case .ready(let sampleRate, let sandbox):
            payload = Self.littleEndian(UInt32(clamping: sampleRate)) + Array(sandbox.utf8)
        case .job(let job):
            payload = [job.chunking == .whole ? UInt8(ascii: "W") : UInt8(ascii: "S"), Self.jobVersion] + job.input
        case .cancel, .done:
            break
        case .pcm(let samples):
            payload = Self.littleEndianBytes(samples)
        case .failure(let message):
            payload = Array(message.utf8)
        case .forked(let pid):
            payload = Self.littleEndian(UInt32(bitPattern: pid))
        case .exited(let pid, let status):
            payload = Self.littleEndian(UInt32(bitPattern: pid)) + Self.littleEndian(UInt32(bitPattern: status))
        case .events(let events):
            // Per event: kind (1 byte), sample, text position, length (4 bytes each), the name's
            // length (2 bytes) and its UTF-8 bytes.
            for event in events {
                let name = Array((event.name ?? "").utf8.prefix(Int(UInt16.max)))
                payload.append(event.kind.rawValue)
                payload += Self.littleEndian(UInt32(clamping: event.sample))
                payload += Self.littleEndian(UInt32(clamping: event.textPosition))
                payload += Self.littleEndian(UInt32(clamping: event.length))
                payload += [UInt8(truncatingIfNeeded: name.count), UInt8(truncatingIfNeeded: name.count >> 8)]
                payload += name
            }
        }
        return [kind] + Self.littleEndian(UInt32(payload.count)) + payload
    }

    /// Decodes the frame whose kind and payload have been read.
    public static func decode(kind: UInt8, payload: [UInt8]) throws(WorkerProtocolError) -> WorkerFrame {
        switch kind {
        case UInt8(ascii: "R"):
            guard payload.count >= 4 else {
                throw .malformed("a ready frame has \(payload.count) bytes, not 4 or more")
            }
            return .ready(
                sampleRate: Int(readLittleEndian(payload[0..<4])),
                sandbox: String(decoding: payload[4...], as: UTF8.self))
        case UInt8(ascii: "J"):
            guard let mode = payload.first, mode == UInt8(ascii: "S") || mode == UInt8(ascii: "W") else {
                throw .malformed("a job frame starts with S or W, not \(payload.first.map(String.init) ?? "nothing")")
            }
            guard payload.count >= 2, payload[1] == jobVersion else {
                let found = payload.count >= 2 ? "\(payload[1])" : "none"
                throw .malformed("a job frame of version \(found); this build reads version \(jobVersion)")
            }
            return .job(
                WorkerJob(chunking: mode == UInt8(ascii: "W") ? .whole : .streaming, input: Array(payload[2...])))
        case UInt8(ascii: "C"):
            return .cancel
        case UInt8(ascii: "P"):
            guard payload.count.isMultiple(of: 2) else {
                throw .malformed("a PCM frame has an odd number of bytes (\(payload.count))")
            }
            var samples = [Int16](repeating: 0, count: payload.count / 2)
            samples.withUnsafeMutableBytes { $0.copyBytes(from: payload) }
            return .pcm(samples.map { Int16(littleEndian: $0) })
        case UInt8(ascii: "D"):
            return .done
        case UInt8(ascii: "E"):
            return .events(try decodeEvents(payload))
        case UInt8(ascii: "F"):
            return .failure(String(decoding: payload, as: UTF8.self))
        case UInt8(ascii: "K"):
            guard payload.count == 4 else { throw .malformed("a forked frame has \(payload.count) bytes, not 4") }
            return .forked(pid: Int32(bitPattern: readLittleEndian(payload[0..<4])))
        case UInt8(ascii: "X"):
            guard payload.count == 8 else { throw .malformed("an exited frame has \(payload.count) bytes, not 8") }
            return .exited(
                pid: Int32(bitPattern: readLittleEndian(payload[0..<4])),
                status: Int32(bitPattern: readLittleEndian(payload[4..<8])))
        default:
            throw .malformed("unknown frame kind \(kind)")
        }
    }

    /// Reads one whole frame from `descriptor`, blocking; nil at the end of the stream.
    public static func read(from descriptor: Int32) throws(WorkerProtocolError) -> WorkerFrame? {
        var header = [UInt8](repeating: 0, count: headerSize)
        let started = header.withUnsafeMutableBytes { raw in
            Result { () throws(WorkerProtocolError) in try readFully(descriptor, into: raw, allowEnd: true) }
        }
        guard try started.get() else { return nil }
        let length = Int(readLittleEndian(header[1..<5]))
        guard length <= maximumPayload else { throw .malformed("a frame of \(length) bytes is over the limit") }
        if header[0] == UInt8(ascii: "P") && length.isMultiple(of: 2) {
            // Samples go straight from the pipe into their array: a chunk is read once, not copied
            // (and not zeroed first: the read fills every byte, or the frame is an error).
            var failure: WorkerProtocolError?
            var samples = [Int16](unsafeUninitializedCapacity: length / 2) { buffer, initialized in
                do throws(WorkerProtocolError) {
                    _ = try readFully(descriptor, into: UnsafeMutableRawBufferPointer(buffer), allowEnd: false)
                    initialized = buffer.count
                } catch {
                    failure = error
                    initialized = 0
                }
            }
            if let failure { throw failure }
            #if _endian(big)
            samples = samples.map { Int16(littleEndian: $0) }
            #endif
            return .pcm(samples)
        }
        var payload = [UInt8](repeating: 0, count: length)
        if length > 0 {
            let filled = payload.withUnsafeMutableBytes { raw in
                Result { () throws(WorkerProtocolError) in try readFully(descriptor, into: raw, allowEnd: false) }
            }
            _ = try filled.get()
        }
        return try decode(kind: header[0], payload: payload)
    }

    /// Writes the whole frame to `descriptor`, blocking.
    public func write(to descriptor: Int32) throws(WorkerProtocolError) {
        #if _endian(little)
        if case .pcm(let samples) = self {
            // The header and the samples from their own storage in one call: no copy of the
            // chunk, and the reader wakes once per frame.
            let header = [kind] + Self.littleEndian(UInt32(samples.count * 2))
            try header.withUnsafeBytes { head in
                samples.withUnsafeBytes { body in Self.writing(descriptor, head, body) }
            }.get()
            return
        }
        #endif
        try encoded().withUnsafeBytes { raw in Self.writing(descriptor, raw) }.get()
    }

    /// Writes `head` then `body` with `writev`, finishing a partial write piece by piece.
    private static func writing(
        _ descriptor: Int32, _ head: UnsafeRawBufferPointer, _ body: UnsafeRawBufferPointer
    ) -> Result<Void, WorkerProtocolError> {
        var vectors = [
            iovec(iov_base: UnsafeMutableRawPointer(mutating: head.baseAddress), iov_len: head.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count),
        ]
        var written: Int
        repeat {
            written = vectors.withUnsafeMutableBufferPointer { Glibc.writev(descriptor, $0.baseAddress, 2) }
        } while written < 0 && errno == EINTR
        if written < 0 { return .failure(.closed("write: \(String(cString: strerror(errno)))")) }
        if written >= head.count + body.count { return .success(()) }
        if written < head.count {
            let rest = UnsafeRawBufferPointer(rebasing: head[written...])
            if case .failure(let error) = writing(descriptor, rest) { return .failure(error) }
            return writing(descriptor, body)
        }
        return writing(descriptor, UnsafeRawBufferPointer(rebasing: body[(written - head.count)...]))
    }

    /// `writeFully` as a result, for the buffer closures, which cannot throw a typed error.
    private static func writing(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<
        Void, WorkerProtocolError
    > {
        Result { () throws(WorkerProtocolError) in try writeFully(descriptor, bytes) }
    }

    private static func writeFully(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(WorkerProtocolError) {
        let written = try transfer(bytes.count, "write") {
            Glibc.write(descriptor, bytes.baseAddress! + $0, bytes.count - $0)
        }
        guard written == bytes.count else { throw .closed("write: the stream took no more bytes") }
    }

    /// Fills `buffer`; false when the stream ended before its first byte and `allowEnd`.
    private static func readFully(
        _ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, allowEnd: Bool
    ) throws(WorkerProtocolError) -> Bool {
        let filled = try transfer(buffer.count, "read") {
            Glibc.read(descriptor, buffer.baseAddress! + $0, buffer.count - $0)
        }
        if filled == buffer.count { return true }
        if filled == 0 && allowEnd { return false }
        throw .malformed("the stream ended inside a frame")
    }

    /// Moves `count` bytes with one `read` or `write` (`call`) after another, each given the
    /// offset reached, again after EINTR; returns the bytes moved, fewer than `count` only when
    /// a call moved none (the end of the stream).
    private static func transfer(
        _ count: Int, _ call: String, _ step: (Int) -> Int
    ) throws(WorkerProtocolError) -> Int {
        var moved = 0
        while moved < count {
            let result = step(moved)
            if result < 0 {
                if errno == EINTR { continue }
                throw .closed("\(call): \(String(cString: strerror(errno)))")
            }
            if result == 0 { break }
            moved += result
        }
        return moved
    }

    private static func decodeEvents(_ payload: [UInt8]) throws(WorkerProtocolError) -> [EngineEvent] {
        var events: [EngineEvent] = []
        var offset = 0
        while offset < payload.count {
            guard payload.count - offset >= 15,
                let kind = EngineEvent.Kind(rawValue: payload[offset])
            else {
                throw .malformed("an event at byte \(offset) is cut short or of an unknown kind")
            }
            let field = { (index: Int) in
                Int(readLittleEndian(payload[(offset + 1 + 4 * index)..<(offset + 5 + 4 * index)]))
            }
            let nameLength = Int(payload[offset + 13]) | Int(payload[offset + 14]) << 8
            let nameStart = offset + 15
            guard payload.count - nameStart >= nameLength else {
                throw .malformed("an event's name at byte \(nameStart) runs past the frame")
            }
            let name = String(decoding: payload[nameStart..<(nameStart + nameLength)], as: UTF8.self)
            events.append(
                EngineEvent(
                    kind: kind, sample: field(0), textPosition: field(1), length: field(2),
                    name: kind == .mark ? name : nil))
            offset = nameStart + nameLength
        }
        return events
    }

    private static func littleEndianBytes(_ samples: [Int16]) -> [UInt8] {
        let ordered = samples.map(\.littleEndian)
        return ordered.withUnsafeBytes { Array($0) }
    }

    private static func littleEndian(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    /// `value` in two bytes, little-endian.
    public static func littleEndian16(_ value: UInt16) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
    }

    /// The unsigned number `bytes` hold, little-endian.
    public static func readLittleEndian(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }
}

/// A broken conversation with an engine worker.
public struct WorkerProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case malformed, closed
    }
    private let code: Code
    /// What went wrong.
    public let message: String

    /// A frame, or an engine's input inside a job, that does not read as its layout says.
    public static func malformed(_ message: String) -> WorkerProtocolError {
        .init(code: .malformed, message: message)
    }
    static func closed(_ message: String) -> WorkerProtocolError { .init(code: .closed, message: message) }

    public var description: String {
        code == .malformed ? "malformed engine worker frame: \(message)" : "engine worker pipe: \(message)"
    }
}

/// A job for an engine worker: how its audio is cut into chunks, and the engine's input as that
/// engine's worker reads it (espeak-ng's binary layout, `EspeakInput.workerInput`; Piper's JSON,
/// `PiperInput.workerInput`). The runtime carries the input and never reads it.
public struct WorkerJob: Sendable, Hashable {
    /// How the worker cuts the audio into `pcm` frames.
    public var chunking: RenderChunking
    /// The engine's input, encoded for its worker.
    public var input: [UInt8]

    /// - Parameters: see the properties of the same names.
    public init(chunking: RenderChunking, input: [UInt8]) {
        self.chunking = chunking
        self.input = input
    }
}
