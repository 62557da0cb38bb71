import CPosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// A UDP socket that sends to one address, set up as an RTP output asks: multicast hops, DSCP,
/// and the interface to leave from.
final class UDPSender {
    private let descriptor: Int32
    private var destination: sockaddr_storage
    private let destinationLength: socklen_t
    /// Where the packets go, for error messages.
    let target: String

    /// Opens the socket.
    /// - Parameters:
    ///   - address: the destination's 4 or 16 bytes.
    ///   - port: the destination port.
    ///   - hops: the multicast TTL (or unicast hop limit).
    ///   - dscp: the DiffServ code point of every packet.
    ///   - interface: the interface to send from, by name.
    /// - Throws: the system's error, as text.
    init(address: [UInt8], port: Int, hops: Int, dscp: Int, interface: String?) throws(UDPSenderError) {
        let v6 = address.count == 16
        let multicast = v6 ? address[0] == 0xff : (224...239).contains(Int(address[0]))
        target = Self.text(address) + ":\(port)"
        let descriptor = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw UDPSenderError("socket: \(String(cString: strerror(errno)))") }
        self.descriptor = descriptor
        let index = interface.map { if_nametoindex($0) } ?? 0
        var storage = sockaddr_storage()
        if v6 {
            withUnsafeMutableBytes(of: &storage) { raw in
                let socketAddress = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                socketAddress.pointee.sin6_family = sa_family_t(AF_INET6)
                socketAddress.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                withUnsafeMutableBytes(of: &socketAddress.pointee.sin6_addr) { $0.copyBytes(from: address) }
                socketAddress.pointee.sin6_scope_id = index
            }
            destinationLength = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            withUnsafeMutableBytes(of: &storage) { raw in
                let socketAddress = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                socketAddress.pointee.sin_family = sa_family_t(AF_INET)
                socketAddress.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                withUnsafeMutableBytes(of: &socketAddress.pointee.sin_addr) { $0.copyBytes(from: address) }
            }
            destinationLength = socklen_t(MemoryLayout<sockaddr_in>.size)
        }
        destination = storage
        do throws(UDPSenderError) {
            let trafficClass = Int32(dscp << 2)
            if v6 {
                try set(Int32(IPPROTO_IPV6), IPV6_TCLASS, trafficClass, "IPV6_TCLASS")
                if multicast {
                    try set(Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, Int32(hops), "IPV6_MULTICAST_HOPS")
                    if index != 0 { try set(Int32(IPPROTO_IPV6), IPV6_MULTICAST_IF, Int32(index), "IPV6_MULTICAST_IF") }
                } else {
                    try set(Int32(IPPROTO_IPV6), IPV6_UNICAST_HOPS, Int32(hops), "IPV6_UNICAST_HOPS")
                }
            } else {
                try set(Int32(IPPROTO_IP), IP_TOS, trafficClass, "IP_TOS")
                if multicast {
                    try set(Int32(IPPROTO_IP), IP_MULTICAST_TTL, Int32(hops), "IP_MULTICAST_TTL")
                    if index != 0 {
                        var request = ip_mreqn()
                        request.imr_ifindex = Int32(index)
                        try setRaw(Int32(IPPROTO_IP), IP_MULTICAST_IF, &request, "IP_MULTICAST_IF")
                    }
                } else {
                    try set(Int32(IPPROTO_IP), IP_TTL, Int32(hops), "IP_TTL")
                }
            }
            if let interface, !multicast {
                // Unicast leaves by the routing table; binding to the device is the only way to
                // choose, and needs CAP_NET_RAW.
                var name = Array(interface.utf8CString)
                guard setsockopt(descriptor, SOL_SOCKET, SO_BINDTODEVICE, &name, socklen_t(name.count)) == 0 else {
                    throw UDPSenderError("SO_BINDTODEVICE \(interface): \(String(cString: strerror(errno)))")
                }
            }
        } catch {
            close(descriptor)
            throw error
        }
    }

    deinit { close(descriptor) }

    private func set(_ level: Int32, _ option: Int32, _ value: Int32, _ name: String) throws(UDPSenderError) {
        var value = value
        try setRaw(level, option, &value, name)
    }

    private func setRaw<T>(_ level: Int32, _ option: Int32, _ value: inout T, _ name: String) throws(UDPSenderError) {
        guard setsockopt(descriptor, level, option, &value, socklen_t(MemoryLayout<T>.size)) == 0 else {
            throw UDPSenderError("\(name): \(String(cString: strerror(errno)))")
        }
    }

    /// Sends one datagram.
    func send(_ packet: [UInt8]) throws(UDPSenderError) {
        let sent = packet.withUnsafeBytes { bytes in
            withUnsafePointer(to: &destination) { storage in
                storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), address, destinationLength)
                }
            }
        }
        guard sent == packet.count else {
            throw UDPSenderError("sending to \(target): \(String(cString: strerror(errno)))")
        }
    }

    /// The local address packets to `address` leave from (a connected probe socket's own
    /// address); nil when there is no route.
    static func sourceAddress(towards address: [UInt8], port: Int) -> [UInt8]? {
        guard let probe = try? UDPSender(address: address, port: port, hops: 1, dscp: 0, interface: nil) else {
            return nil
        }
        let connected = withUnsafePointer(to: &probe.destination) { storage in
            storage.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe.descriptor, $0, probe.destinationLength)
            }
        }
        guard connected == 0 else { return nil }
        var local = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &local) { storage in
            storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(probe.descriptor, $0, &length) }
        }
        guard named == 0 else { return nil }
        return withUnsafeBytes(of: &local) { raw in
            if address.count == 16 {
                let socketAddress = raw.load(as: sockaddr_in6.self)
                return withUnsafeBytes(of: socketAddress.sin6_addr) { Array($0) }
            }
            let socketAddress = raw.load(as: sockaddr_in.self)
            return withUnsafeBytes(of: socketAddress.sin_addr) { Array($0) }
        }
    }

    /// An address's numeric text.
    static func text(_ address: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = address.count == 16 ? AF_INET6 : AF_INET
        let ok = address.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard ok != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Why a UDP socket could not be set up or send, in the system's words.
struct UDPSenderError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
