/// One render on disk: the render cache's own file format, written and read by hand.
///
/// Version 2, every integer little-endian:
///
///     magic     8 bytes  "speakdRC"
///     version   u16      2
///     key       u32 length, then the key's bytes (`RenderKeyWriter`)
///     chunks    u32 count, then for each chunk:
///       flags   u8: 1 when its samples are at the output's loudness already (`isLevelled`, a clip)
///       samples u32 count, then each sample as an i16
///       events  u32 count, then for each event: kind u8 (`EngineEvent.Kind`), sample i64,
///               textPosition i64, length i64, and its name: u8 0 for none, or 1, a u32
///               length and the name's UTF-8
///     checksum  u64      FNV-1a 64 of every byte before it
///
/// The whole key is in the file, so a file whose name matches but whose key does not (a
/// collision of names) is never served. Reading checks the checksum first, then every count
/// against the bytes left before it makes room for it: a file cut short, damaged or of another
/// version is refused as `Damage`, never trusted and never a crash.
enum RenderCacheFile {
    static let magic = Array("speakdRC".utf8)
    static let version: UInt16 = 2

    /// Why a file cannot be read.
    struct Damage: Error, CustomStringConvertible {
        let description: String
    }

    /// The bytes of a file holding `chunks` under `key`.
    static func encode(_ chunks: [PCMChunk], key: [UInt8]) -> [UInt8] {
        let samples = chunks.reduce(0) { $0 + $1.samples.count }
        var out = Output()
        out.bytes.reserveCapacity(magic.count + 2 + 4 + key.count + 4 + chunks.count * 9 + samples * 2 + 8)
        out.bytes += magic
        out.append(version)
        out.append(UInt32(key.count))
        out.bytes += key
        out.append(UInt32(chunks.count))
        for chunk in chunks {
            out.bytes.append(chunk.isLevelled ? 1 : 0)
            out.append(UInt32(chunk.samples.count))
            #if _endian(little)
            chunk.samples.withUnsafeBytes { out.bytes.append(contentsOf: $0) }
            #else
            for sample in chunk.samples { out.append(UInt16(bitPattern: sample)) }
            #endif
            out.append(UInt32(chunk.events.count))
            for event in chunk.events {
                out.bytes.append(event.kind.rawValue)
                out.append(UInt64(bitPattern: Int64(event.sample)))
                out.append(UInt64(bitPattern: Int64(event.textPosition)))
                out.append(UInt64(bitPattern: Int64(event.length)))
                if let name = event.name {
                    out.bytes.append(1)
                    out.append(UInt32(name.utf8.count))
                    out.bytes += name.utf8
                } else {
                    out.bytes.append(0)
                }
            }
        }
        out.append(out.bytes.withUnsafeBytes { RenderKeyHash.checksum($0) })
        return out.bytes
    }

    /// The chunks `bytes` holds under `key`; nil when it holds another key.
    static func decode(_ bytes: [UInt8], key: [UInt8]) throws(Damage) -> [PCMChunk]? {
        // `withUnsafeBytes` rethrows untyped errors: the damage is carried out in a `Result`.
        try bytes.withUnsafeBytes { raw in Result { () throws(Damage) in try decode(raw, key: key) } }.get()
    }

    private static func decode(_ raw: UnsafeRawBufferPointer, key: [UInt8]) throws(Damage) -> [PCMChunk]? {
        guard raw.count >= magic.count + 2 + 8 else { throw Damage(description: "shorter than a header") }
        let body = UnsafeRawBufferPointer(rebasing: raw[..<(raw.count - 8)])
        var input = Input(bytes: raw, offset: body.count)
        guard try input.u64() == RenderKeyHash.checksum(body) else {
            throw Damage(description: "its checksum does not match")
        }
        input = Input(bytes: body, offset: 0)
        guard try input.take(magic.count).elementsEqual(magic) else {
            throw Damage(description: "not a cache file")
        }
        let found = try input.u16()
        guard found == version else { throw Damage(description: "version \(found), not \(version)") }
        let keyLength = try input.count(width: 1)
        guard try input.take(keyLength).elementsEqual(key) else { return nil }
        var chunks: [PCMChunk] = []
        for _ in 0..<(try input.count(width: 9)) {
            let flags = try input.take(1)[0]
            guard flags <= 1 else { throw Damage(description: "chunk flags \(flags)") }
            let samples = try input.samples(try input.count(width: 2))
            var events: [EngineEvent] = []
            for _ in 0..<(try input.count(width: 26)) { events.append(try input.event()) }
            chunks.append(PCMChunk(samples: samples, events: events, isLevelled: flags == 1))
        }
        guard input.offset == body.count else { throw Damage(description: "bytes after its last chunk") }
        return chunks
    }

    /// A file being written.
    private struct Output {
        var bytes: [UInt8] = []

        mutating func append<Integer: FixedWidthInteger>(_ value: Integer) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }
    }

    /// A file being read; every read past its end throws.
    private struct Input {
        let bytes: UnsafeRawBufferPointer
        var offset: Int

        mutating func take(_ count: Int) throws(Damage) -> UnsafeRawBufferPointer {
            guard count >= 0, count <= bytes.count - offset else { throw Damage(description: "cut short") }
            defer { offset += count }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
        }

        mutating func integer<Integer: FixedWidthInteger>(_: Integer.Type) throws(Damage) -> Integer {
            Integer(littleEndian: try take(MemoryLayout<Integer>.size).loadUnaligned(as: Integer.self))
        }

        mutating func u16() throws(Damage) -> UInt16 { try integer(UInt16.self) }
        mutating func u64() throws(Damage) -> UInt64 { try integer(UInt64.self) }
        mutating func i64() throws(Damage) -> Int { Int(try integer(Int64.self)) }

        /// A u32 count of items at least `width` bytes each, which the bytes left must hold.
        mutating func count(width: Int) throws(Damage) -> Int {
            let count = Int(try integer(UInt32.self))
            guard count <= (bytes.count - offset) / width else { throw Damage(description: "a count past its end") }
            return count
        }

        mutating func samples(_ count: Int) throws(Damage) -> [Int16] {
            let source = try take(count * 2)
            return [Int16](unsafeUninitializedCapacity: count) { buffer, initialized in
                #if _endian(little)
                UnsafeMutableRawBufferPointer(buffer).copyMemory(from: source)
                #else
                for index in 0..<count {
                    buffer[index] = Int16(littleEndian: source.loadUnaligned(fromByteOffset: index * 2, as: Int16.self))
                }
                #endif
                initialized = count
            }
        }

        mutating func event() throws(Damage) -> EngineEvent {
            let raw = try take(1)[0]
            guard let kind = EngineEvent.Kind(rawValue: raw) else { throw Damage(description: "event kind \(raw)") }
            let sample = try i64()
            let textPosition = try i64()
            let length = try i64()
            var name: String?
            switch try take(1)[0] {
            case 0: break
            case 1:
                let utf8 = try take(try count(width: 1))
                guard let text = String(validating: utf8, as: UTF8.self) else {
                    throw Damage(description: "a mark name that is not UTF-8")
                }
                name = text
            default: throw Damage(description: "a name marker that is neither 0 nor 1")
            }
            return EngineEvent(kind: kind, sample: sample, textPosition: textPosition, length: length, name: name)
        }
    }
}
