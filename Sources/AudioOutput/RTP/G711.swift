/// ITU-T G.711 companding of 16-bit linear samples, as in the ITU's and Sun's reference code.
///
/// Written here rather than taken from libspandsp: G.711 is a fixed table-free formula of a few
/// lines, and spandsp would add a build dependency and a runtime library (with libtiff) to every
/// kiosk for it (docs/decisions.md).
enum G711 {
    /// µ-law (PCMU, payload type 0) of one sample.
    static func ulaw(_ sample: Int16) -> UInt8 {
        let bias = 0x84
        var value = Int(sample)
        let sign: Int = value < 0 ? 0x80 : 0
        if value < 0 { value = -value }
        value = min(value, 32635) + bias
        // The segment is the position of the highest set bit above bit 7.
        var exponent = 7
        while exponent > 0 && value & (0x4000 >> (7 - exponent)) == 0 { exponent -= 1 }
        let mantissa = (value >> (exponent + 3)) & 0x0f
        return ~UInt8(sign | (exponent << 4) | mantissa)
    }

    /// A-law (PCMA, payload type 8) of one sample.
    static func alaw(_ sample: Int16) -> UInt8 {
        var value = Int(sample) >> 3
        let mask: Int
        if value >= 0 {
            mask = 0xd5
        } else {
            mask = 0x55
            value = -value - 1
        }
        var segment = 0
        while segment < 8 && value >= (0x20 << segment) { segment += 1 }
        guard segment < 8 else { return UInt8(0x7f ^ mask) }
        let quantised = segment < 2 ? (value >> 1) & 0x0f : (value >> segment) & 0x0f
        return UInt8(((segment << 4) | quantised) ^ mask)
    }

    /// The linear sample a µ-law byte stands for (for tests and receivers).
    static func linear(ulaw byte: UInt8) -> Int16 {
        let value = Int(~byte)
        let magnitude = ((((value & 0x0f) << 3) + 0x84) << ((value & 0x70) >> 4)) - 0x84
        return Int16(value & 0x80 != 0 ? -magnitude : magnitude)
    }

    /// The linear sample an A-law byte stands for (for tests and receivers).
    static func linear(alaw byte: UInt8) -> Int16 {
        let value = Int(byte ^ 0x55)
        let segment = (value & 0x70) >> 4
        var magnitude = (value & 0x0f) << 4
        switch segment {
        case 0: magnitude += 8
        case 1: magnitude += 0x108
        default: magnitude = (magnitude + 0x108) << (segment - 1)
        }
        return Int16(value & 0x80 != 0 ? magnitude : -magnitude)
    }
}
