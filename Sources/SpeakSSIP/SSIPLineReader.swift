/// Splits a byte stream into SSIP lines (ended by LF, with the CR before it dropped), each at
/// most `maxLine` bytes: a longer line is dropped up to its end and reported once as `tooLong`,
/// so a client that never sends a line end costs `maxLine` bytes and no more.
///
/// The limit may change between lines (`next(from:)`): inside `SPEAK` a line of text may be as
/// long as a whole message, where a command line is short.
struct SSIPLineReader: Sendable {
    enum Line: Sendable, Hashable {
        case line([UInt8])
        /// A line longer than the limit, dropped.
        case tooLong

        /// The line as a log may show it: no log level ever shows what is to be spoken (a
        /// session may have made its output private), so a line of `SPEAK`'s text (`isText`) and
        /// the argument of `CHAR` and `KEY` are left out; a command's other words are shown.
        func logged(isText: Bool) -> String {
            guard case .line(let bytes) = self else { return "(a line over the limit)" }
            if isText { return "(\(bytes.count) bytes of message text)" }
            let line = String(decoding: bytes, as: UTF8.self)
            let command = line.prefix { $0 != " " }
            switch command.lowercased() {
            case "char", "key": return "\(command) (argument not shown)"
            default: return line
            }
        }
    }

    /// The longest line the next line may be, in bytes.
    var maxLine: Int
    private var buffer: [UInt8] = []
    private var discarding = false

    init(maxLine: Int) {
        self.maxLine = maxLine
    }

    /// Takes `bytes`; returns the lines they complete, all under the same limit.
    mutating func read(_ bytes: [UInt8]) -> [Line] {
        var rest = bytes[...]
        var lines: [Line] = []
        while let line = next(from: &rest) { lines.append(line) }
        return lines
    }

    /// Takes bytes from the front of `bytes` until a line ends or they run out; returns that
    /// line, or nil when they ran out first (the part read is kept for the next call).
    mutating func next<Bytes: Collection<UInt8>>(from bytes: inout Bytes) -> Line? where Bytes.SubSequence == Bytes {
        while let byte = bytes.popFirst() {
            if byte == UInt8(ascii: "\n") {
                defer { buffer.removeAll(keepingCapacity: buffer.count <= 4096) }
                if discarding {
                    discarding = false
                    continue
                }
                if buffer.last == UInt8(ascii: "\r") { buffer.removeLast() }
                return .line(buffer)
            }
            guard !discarding else { continue }
            // One byte more than the limit for the CR before the LF.
            if buffer.count > maxLine {
                discarding = true
                buffer.removeAll()
                return .tooLong
            }
            buffer.append(byte)
        }
        return nil
    }
}
