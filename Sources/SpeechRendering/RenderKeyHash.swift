/// The hashes the render cache's disk tier writes by hand: a 128-bit name for a key's file, and a
/// 64-bit checksum of a file's contents.
///
/// Neither has to resist an attacker (only the daemon writes its directory), so no cryptographic
/// hash is needed, and none is linked. The name only spreads keys over files: the file holds the
/// whole key, which decides whether it is the entry asked for, so a collision costs a miss, never
/// a wrong sound. The checksum finds a file that was cut short or damaged, which is then removed.
enum RenderKeyHash {
    /// FNV-1a 64's offset basis.
    static let basis: UInt64 = 0xcbf2_9ce4_8422_2325
    /// A second basis for the name's other half (the low half of FNV-1a 128's offset basis).
    static let otherBasis: UInt64 = 0x62b8_2175_6295_c58d
    static let prime: UInt64 = 0x100_0000_01b3

    /// FNV-1a 64 of `bytes`, from `basis`, forward or backward.
    static func fnv1a(_ bytes: UnsafeRawBufferPointer, basis: UInt64 = basis, backward: Bool = false) -> UInt64 {
        var hash = basis
        if backward {
            for byte in bytes.reversed() { hash = (hash ^ UInt64(byte)) &* prime }
        } else {
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* prime }
        }
        return hash
    }

    /// FNV-1a 64 of `bytes`: a file's checksum.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 { fnv1a(bytes) }

    /// The file name of `key`: 32 hexadecimal digits.
    ///
    /// Two FNV-1a 64 passes, one forward from FNV's basis and one backward from another, each
    /// finished with MurmurHash3's 64-bit mixer. The passes see the bytes in a different order,
    /// so the halves do not fail together; FNV-1a alone mixes its low bits poorly (the lowest is
    /// the parity of the bytes' lowest bits), and the mixer spreads every bit over the word.
    static func name(of key: [UInt8]) -> String {
        key.withUnsafeBytes { bytes in
            hex(mix(fnv1a(bytes))) + hex(mix(fnv1a(bytes, basis: otherBasis, backward: true)))
        }
    }

    /// MurmurHash3's `fmix64`.
    static func mix(_ value: UInt64) -> UInt64 {
        var value = value
        value ^= value >> 33
        value &*= 0xff51_afd7_ed55_8ccd
        value ^= value >> 33
        value &*= 0xc4ce_b9fe_1a85_ec53
        value ^= value >> 33
        return value
    }

    /// Sixteen lowercase hexadecimal digits.
    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
