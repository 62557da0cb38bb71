import NIOCore
import SpeakAPI
import Testing

@testable import SpeakWyoming

@Suite struct WyomingEventReaderTests {
    private func buffer(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func anEventWrittenIsReadBackWholeFromAnySplit() throws {
        let event = WyomingEvent(
            "audio-chunk", data: ["rate": 22_050, "width": 2, "channels": 1, "text": "é ☃"], payload: [1, 2, 3, 4])
        let bytes = Array(event.encoded().readableBytesView)
        for split in [1, 2, 7, bytes.count - 1] {
            var reader = WyomingEventReader()
            var events = try reader.read(ByteBuffer(bytes: bytes[..<split]))
            events += try reader.read(ByteBuffer(bytes: bytes[split...]))
            #expect(events == [event], "split at \(split)")
        }
    }

    @Test func dataInTheHeaderAndInTheDataSectionAreMerged() throws {
        var reader = WyomingEventReader()
        let section = #"{"text":"section"}"#
        let events = try reader.read(
            buffer(
                #"{"type":"synthesize","data":{"text":"header","voice":{"name":"x"}},"data_length":\#(section.utf8.count)}"#
                    + "\n" + section + #"{"type":"describe"}"# + "\n"))
        #expect(events.count == 2)
        #expect(events[0].data["text"] == "section")
        #expect(events[0].data["voice"]?.object?["name"] == "x")
        #expect(events[1] == WyomingEvent("describe"))
    }

    static let badHeaders: [(String, String)] = [
        (#"{"type":"audio-chunk","payload_length":1000000000}"# + "\n", "tooLarge"),
        (#"{"type":"x","data_length":1000000000}"# + "\n", "tooLarge"),
        (#"{"type":"x","payload_length":-1}"# + "\n", "malformedRequest"),
        ("not json\n", "malformedRequest"),
        (#"{"data":{}}"# + "\n", "malformedRequest"),
        (#"{"type":"x","data_length":2}"# + "\n[]", "malformedRequest"),
    ]

    @Test(arguments: badHeaders)
    func aBadOrOversizedHeaderIsRefusedBeforeItsBytes(header: String, code: String) {
        var reader = WyomingEventReader()
        #expect(throws: WyomingEventReader.Failure.self) { try reader.read(buffer(header)) }
        do {
            _ = try reader.read(buffer(header))
            Issue.record("a failed reader read on")
        } catch {
            #expect(error.code == code)
        }
    }

    @Test func aHeaderLineWithNoEndIsRefusedAtItsLimitNotHeld() throws {
        var reader = WyomingEventReader(limits: .init(maxHeaderBytes: 1_000))
        let piece = ByteBuffer(repeating: UInt8(ascii: "a"), count: 600)
        #expect(try reader.read(piece).isEmpty)
        let error = #expect(throws: WyomingEventReader.Failure.self) { try reader.read(piece) }
        #expect(error?.code == "tooLarge")
    }
}

@Suite struct SentenceSplitterTests {
    @Test(
        arguments: [
            (["Hello wor", "ld. How are", " you?"], ["Hello world."], "How are you?"),
            (["It costs 3.5 euros. ", "Thanks"], ["It costs 3.5 euros."], "Thanks"),
            (["He said \"stop!\" then", " left."], ["He said \"stop!\""], "then left."),
            (["一つ。二つ"], ["一つ。"], "二つ"),
            (["line one\nline two"], ["line one"], "line two"),
            (["Wait... ", "what?! ", "  "], ["Wait...", "what?!"], nil),
        ] as [([String], [String], String?)])
    func sentencesAreCutWhenTheirEndHasArrived(chunks: [String], sentences: [String], rest: String?) {
        var splitter = SentenceSplitter()
        var got: [String] = []
        for chunk in chunks { got += splitter.add(chunk) }
        #expect(got == sentences)
        #expect(splitter.finish() == rest)
    }
}

@Suite struct WyomingAddressTests {
    @Test(
        arguments: [
            ("tcp://127.0.0.1:10200", WyomingAddress.tcp(host: "127.0.0.1", port: 10_200)),
            ("tcp://0.0.0.0:10300", .tcp(host: "0.0.0.0", port: 10_300)),
            ("tcp://[::1]:10200", .tcp(host: "::1", port: 10_200)),
            ("tcp://:10200", .tcp(host: "127.0.0.1", port: 10_200)),
            ("10200", .tcp(host: "127.0.0.1", port: 10_200)),
            ("unix:///run/speakd/wyoming.sock", .unix(path: "/run/speakd/wyoming.sock")),
        ] as [(String, WyomingAddress)])
    func addressesParse(text: String, address: WyomingAddress) {
        #expect(WyomingAddress(text) == address)
    }

    @Test(arguments: ["tcp://host", "tcp://h:0", "tcp://h:99999", "unix://relative", "http://h:1"])
    func badAddressesDoNot(text: String) {
        #expect(WyomingAddress(text) == nil)
    }
}
