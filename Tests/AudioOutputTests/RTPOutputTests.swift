import AudioOutput
import Foundation
import SpeechRendering
import Testing

@testable import AudioOutput

@Suite struct RTPStreamTests {
    @Test func parsesEveryParameter() throws {
        let spec = try AudioSinkSpec(
            parsing: "rtp://239.255.10.1:5004?codec=pcma&ptime=30&ttl=4&dscp=34&ssrc=0x1234abcd&delay=120&sap=off")
        guard case .rtp(let stream) = spec else {
            Issue.record("not an RTP spec: \(spec)")
            return
        }
        #expect(stream.host == "239.255.10.1")
        #expect(stream.port == 5004)
        #expect(stream.codec == .pcma)
        #expect(stream.payloadType == 8)
        #expect(stream.ptimeMilliseconds == 30)
        #expect(stream.samplesPerPacket == 240)
        #expect(stream.ttl == 4)
        #expect(stream.dscp == 34)
        #expect(stream.ssrc(forOutput: "platform1") == 0x1234_abcd)
        #expect(stream.receiverDelayMilliseconds == 120)
        #expect(stream.sapGroup == nil)
        #expect(stream.isMulticast)
        #expect(
            spec.description
                == "rtp://239.255.10.1:5004?codec=pcma&ptime=30&ttl=4&dscp=34&ssrc=0x1234abcd&delay=120&sap=off")
    }

    @Test func defaults() throws {
        let stream = try RTPStream(parsing: "//239.255.10.1:5004")
        #expect(stream.codec == .pcmu)
        #expect(stream.payloadType == 0)
        #expect(stream.ptimeMilliseconds == 20)
        #expect(stream.ttl == 1)
        #expect(stream.dscp == 46)
        #expect(stream.receiverDelayMilliseconds == 0)
        #expect(stream.sapGroup == "239.255.255.255")
        // The SSRC comes from the output's name: fixed across restarts, different per output.
        #expect(stream.ssrc(forOutput: "platform1") == stream.ssrc(forOutput: "platform1"))
        #expect(stream.ssrc(forOutput: "platform1") != stream.ssrc(forOutput: "platform2"))
        #expect(try RTPStream(parsing: "//10.0.0.5:5004").sapGroup == nil)
    }

    @Test func l16AndIPv6() throws {
        let stream = try RTPStream(parsing: "//[ff15::10]:6000?codec=l16&rate=48000&pt=97")
        #expect(stream.isIPv6 && stream.isMulticast)
        #expect(stream.codec == .l16(rate: 48000))
        #expect(stream.payloadType == 97)
        #expect(stream.samplesPerPacket == 960)
        #expect(stream.sapGroup == "ff05::2:7ffe")
        let sdp = stream.sdp(outputName: "hall", origin: "fe80::1")
        #expect(sdp.contains("c=IN IP6 ff15::10\r\n"))
        #expect(sdp.contains("m=audio 6000 RTP/AVP 97\r\n"))
        #expect(sdp.contains("a=rtpmap:97 L16/48000/1\r\n"))
        #expect(try RTPStream(parsing: "//239.1.2.3:5004?codec=l16").codec == .l16(rate: 16000))
    }

    @Test func sdpOfG711() throws {
        let stream = try RTPStream(parsing: "//239.255.10.1:5004?ttl=3")
        let sdp = stream.sdp(outputName: "platform1", origin: "192.0.2.7")
        #expect(
            sdp == [
                "v=0", "o=- \(stream.ssrc(forOutput: "platform1")) 1 IN IP4 192.0.2.7", "s=speakd platform1",
                "c=IN IP4 239.255.10.1/3", "t=0 0", "a=tool:speakd", "a=recvonly", "m=audio 5004 RTP/AVP 0",
                "a=rtpmap:0 PCMU/8000", "a=ptime:20",
            ].joined(separator: "\r\n") + "\r\n")
    }

    @Test(arguments: [
        ("rtp:239.1.1.1:5004", "expected rtp://"),
        ("rtp://239.1.1.1", "no port"),
        ("rtp://speakers.local:5004", "address 'speakers.local' is not a numeric"),
        ("rtp://239.1.1.1:65535", "port '65535'"),
        ("rtp://239.1.1.1:5004?codec=opus", "codec=opus"),
        ("rtp://239.1.1.1:5004?ptime=50", "ptime=50"),
        ("rtp://239.1.1.1:5004?ptime=5", "ptime=5"),
        ("rtp://239.1.1.1:5004?ttl=0", "ttl=0"),
        ("rtp://239.1.1.1:5004?dscp=64", "dscp=64"),
        ("rtp://239.1.1.1:5004?delay=-1", "delay=-1"),
        ("rtp://239.1.1.1:5004?ssrc=x", "ssrc=x"),
        ("rtp://239.1.1.1:5004?iface=nosuch0", "iface=nosuch0"),
        ("rtp://239.1.1.1:5004?volume=3", "unknown parameter 'volume'"),
        ("rtp://239.1.1.1:5004?ptime=20&ptime=10", "'ptime' is given twice"),
        ("rtp://239.1.1.1:5004?ptime", "'ptime' has no value"),
        ("rtp://239.1.1.1:5004?codec=l16&rate=44100", "rate=44100"),
        ("rtp://239.1.1.1:5004?rate=16000", "rate=16000 applies to codec=l16 only"),
        ("rtp://239.1.1.1:5004?pt=96", "pt=96 applies to codec=l16 only"),
        ("rtp://239.1.1.1:5004?sap=ff05::2:7ffe", "sap=ff05::2:7ffe"),
    ])
    func refusesNamingTheParameter(value: String, named: String) {
        #expect {
            try AudioSinkSpec(parsing: value)
        } throws: { error in
            let error = error as? AudioOutputError
            return error?.kind == "invalidSpec" && error?.description.contains(named) == true
        }
    }
}

@Suite struct G711Tests {
    @Test func knownCodes() {
        #expect(G711.ulaw(0) == 0xff)
        #expect(G711.ulaw(Int16.max) == 0x80)
        #expect(G711.ulaw(Int16.min) == 0x00)
        #expect(G711.alaw(0) == 0xd5)
        #expect(G711.alaw(Int16.max) == 0xaa)
        #expect(G711.alaw(Int16.min) == 0x2a)
    }

    @Test func roundTripsWithinTheQuantisationStep() {
        for value in stride(from: Int(Int16.min), through: Int(Int16.max), by: 7) {
            let sample = Int16(value)
            // G.711 keeps about 4 bits of mantissa: the error is within 1/16 of the magnitude (and
            // a few steps near zero).
            let bound = max(Int(abs(Int(sample))) / 16, 16)
            #expect(abs(Int(G711.linear(ulaw: G711.ulaw(sample))) - value) <= bound)
            #expect(abs(Int(G711.linear(alaw: G711.alaw(sample))) - value) <= bound)
        }
    }
}
