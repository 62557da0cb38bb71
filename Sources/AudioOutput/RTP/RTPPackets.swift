#if canImport(Glibc)
import Glibc
#endif

/// The wire formats an RTP output sends: RTP (RFC 3550 §5), RTCP sender reports, source
/// descriptions and BYE (RFC 3550 §6), and SAP (RFC 2974).
///
/// Written here: each is a fixed header of a few fields, and the libraries that have them
/// (GStreamer's rtpbin, ortp, jrtplib) bring their own threads and clocks, where speakd paces the
/// packets itself (docs/decisions.md).
enum RTPPackets {
    /// An RTP packet: the 12-byte header, then `payload`.
    static func rtp(
        payloadType: Int, marker: Bool, sequence: UInt16, timestamp: UInt32, ssrc: UInt32, payload: ArraySlice<UInt8>
    ) -> [UInt8] {
        var packet: [UInt8] = []
        packet.reserveCapacity(12 + payload.count)
        packet.append(0x80)  // version 2, no padding, no extension, no CSRC
        packet.append(UInt8(payloadType & 0x7f) | (marker ? 0x80 : 0))
        packet.append(big: sequence)
        packet.append(big: timestamp)
        packet.append(big: ssrc)
        packet.append(contentsOf: payload)
        return packet
    }

    /// A compound RTCP packet: a sender report, the source's CNAME, and a BYE when `bye`.
    static func rtcp(
        ssrc: UInt32, wallClock: timespec, rtpTimestamp: UInt32, packets: UInt32, octets: UInt32, cname: String,
        bye: Bool
    ) -> [UInt8] {
        var packet: [UInt8] = []
        // Sender report, no report blocks: 7 words after the first.
        packet.append(contentsOf: [0x80, 200])
        packet.append(big: UInt16(6))
        packet.append(big: ssrc)
        let (seconds, fraction) = ntpTime(wallClock)
        packet.append(big: seconds)
        packet.append(big: fraction)
        packet.append(big: rtpTimestamp)
        packet.append(big: packets)
        packet.append(big: octets)
        // Source description with one chunk: SSRC, CNAME item, end, padded to a word.
        var chunk: [UInt8] = []
        chunk.append(big: ssrc)
        let name = Array(cname.utf8.prefix(255))
        chunk.append(1)
        chunk.append(UInt8(name.count))
        chunk.append(contentsOf: name)
        chunk.append(0)
        while chunk.count % 4 != 0 { chunk.append(0) }
        packet.append(contentsOf: [0x81, 202])
        packet.append(big: UInt16(chunk.count / 4))
        packet.append(contentsOf: chunk)
        if bye {
            packet.append(contentsOf: [0x81, 203])
            packet.append(big: UInt16(1))
            packet.append(big: ssrc)
        }
        return packet
    }

    /// NTP's seconds since 1900 and binary fraction of a second, of a `CLOCK_REALTIME` reading.
    static func ntpTime(_ time: timespec) -> (UInt32, UInt32) {
        let seconds = UInt32(truncatingIfNeeded: Int(time.tv_sec) + 2_208_988_800)
        let fraction = UInt32(truncatingIfNeeded: (UInt64(time.tv_nsec) << 32) / 1_000_000_000)
        return (seconds, fraction)
    }

    /// A SAP packet announcing (or, with `deletion`, withdrawing) the session described by `sdp`.
    /// - Parameters:
    ///   - origin: the sender's own address, 4 or 16 bytes.
    ///   - messageID: the same for every announcement of one version of the description.
    static func sap(origin: [UInt8], messageID: UInt16, sdp: String, deletion: Bool) -> [UInt8] {
        var packet: [UInt8] = []
        // Version 1; A set for an IPv6 origin; T set for a deletion; no encryption or compression.
        packet.append(0x20 | (origin.count == 16 ? 0x10 : 0) | (deletion ? 0x04 : 0))
        packet.append(0)  // no authentication data
        packet.append(big: messageID)
        packet.append(contentsOf: origin)
        packet.append(contentsOf: Array("application/sdp".utf8))
        packet.append(0)
        packet.append(contentsOf: Array(sdp.utf8))
        return packet
    }
}

extension [UInt8] {
    mutating func append(big value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xff))
    }

    mutating func append(big value: UInt32) {
        append(UInt8(value >> 24))
        append(UInt8((value >> 16) & 0xff))
        append(UInt8((value >> 8) & 0xff))
        append(UInt8(value & 0xff))
    }
}
