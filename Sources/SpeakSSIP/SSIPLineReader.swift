/// Splits a byte stream into SSIP lines (ended by LF, with the CR before it dropped), each at
/// most `maxLine` bytes: a longer line is dropped up to its end and reported once as `tooLong`,
/// so a client that never sends a line end costs `maxLine` bytes and no more.
struct SSIPLineReader: Sendable {
    enum Line: Sendable, Hashable {
        case line([UInt8])
        /// A line longer than the limit, dropped.
        case tooLong

        /// The line as text, for logs.
        var text: String {
            switch self {
            case .line(let bytes): String(decoding: bytes, as: UTF8.self)
            case .tooLong: "(a line over the limit)"
            }
        }
    }

    let maxLine: Int
    private var buffer: [UInt8] = []
    private var discarding = false

    init(maxLine: Int) {
        self.maxLine = maxLine
    }

    /// Takes `bytes`; returns the lines they complete.
    mutating func read(_ bytes: some Sequence<UInt8>) -> [Line] {
        var lines: [Line] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                if discarding {
                    discarding = false
                } else {
                    if buffer.last == UInt8(ascii: "\r") { buffer.removeLast() }
                    lines.append(.line(buffer))
                }
                buffer.removeAll(keepingCapacity: buffer.count <= 4096)
                continue
            }
            guard !discarding else { continue }
            // One byte more than the limit for the CR before the LF.
            if buffer.count > maxLine {
                discarding = true
                buffer.removeAll()
                lines.append(.tooLong)
                continue
            }
            buffer.append(byte)
        }
        return lines
    }
}
