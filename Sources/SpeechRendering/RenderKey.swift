/// The bytes that say what a render is, the same in every process: the render cache's key on
/// disk, which must find an entry again after a restart, where Swift's `Hasher` (seeded anew at
/// each start) and a dictionary's order (which follows it) cannot serve.
///
/// Every value is written with its length or at a fixed width, so two different keys never write
/// the same bytes (`"ab", "c"` and `"a", "bc"` differ). Integers are 64-bit little-endian and a
/// `Double` is its bit pattern, so a key never depends on how a number would be printed.
public struct RenderKeyWriter: Sendable {
    /// What has been written.
    public private(set) var bytes: [UInt8] = []
    /// False once a value that cannot be written was met (`write(any:)`): the key is incomplete,
    /// and a render under it is kept in memory only.
    public private(set) var isComplete = true

    public init() {}

    public mutating func write(_ value: Int) {
        withUnsafeBytes(of: Int64(value).littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func write(_ value: Double) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func write(_ value: Bool) {
        bytes.append(value ? 1 : 0)
    }

    /// Its UTF-8 length, then its UTF-8.
    public mutating func write(_ value: String) {
        write(value.utf8.count)
        bytes.append(contentsOf: value.utf8)
    }

    public mutating func write(_ value: some RenderKeyEncodable) {
        value.write(to: &self)
    }

    /// `value` when it can be written (an engine's input, which lower layers carry without
    /// knowing its type), after its type's name, so two kinds of input never write the same key;
    /// otherwise the key is marked incomplete.
    public mutating func write(any value: Any) {
        guard let value = value as? any RenderKeyEncodable else {
            isComplete = false
            return
        }
        write(String(reflecting: type(of: value)))
        value.write(to: &self)
    }
}

/// A value that can be part of a render's key on disk: every part of it that changes the sound,
/// in a fixed order, as the same bytes in every process.
///
/// An engine's input conforms so that its renders can be kept on disk; a render whose input does
/// not is kept in memory only.
public protocol RenderKeyEncodable {
    /// Writes the value to `key`.
    func write(to key: inout RenderKeyWriter)
}

extension Int: RenderKeyEncodable {
    public func write(to key: inout RenderKeyWriter) { key.write(self) }
}

extension Double: RenderKeyEncodable {
    public func write(to key: inout RenderKeyWriter) { key.write(self) }
}

extension Bool: RenderKeyEncodable {
    public func write(to key: inout RenderKeyWriter) { key.write(self) }
}

extension String: RenderKeyEncodable {
    public func write(to key: inout RenderKeyWriter) { key.write(self) }
}

extension Optional: RenderKeyEncodable where Wrapped: RenderKeyEncodable {
    /// A marker byte, then the value when there is one.
    public func write(to key: inout RenderKeyWriter) {
        key.write(self != nil)
        if let self { key.write(self) }
    }
}

extension Array: RenderKeyEncodable where Element: RenderKeyEncodable {
    /// The count, then each element in order.
    public func write(to key: inout RenderKeyWriter) {
        key.write(count)
        for element in self { key.write(element) }
    }
}
