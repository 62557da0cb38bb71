import Foundation
import SpeechModel
import Testing

@Suite("Strict JSON")
struct StrictJSONTests {
    static func error(_ bytes: [UInt8]) -> StrictJSONError? {
        do {
            try StrictJSON.check(bytes)
            return nil
        } catch {
            return error
        }
    }

    static func error(_ text: String) -> StrictJSONError? { error(Array(text.utf8)) }

    /// What RFC 8259 allows passes, whitespace, escapes and all, and the top-level keys come back in order.
    @Test func validJSONPasses() throws {
        let text = #"""
             { "text" : "a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00 é 😀", "spans": [ {"pitch": -0.5e+2}, {"rate": 0},
            {"volume": 1E-3, "x": [true, false, null, [], {}]} ], "n": -0, "big": 1.7976931348623157e308,
            "tiny": 1e-400 }
            """#
        #expect(try StrictJSON.check(Array(text.utf8)) == ["text", "spans", "n", "big", "tiny"])
        #expect(try StrictJSON.check(Array("[1, 2]".utf8)) == [])
        #expect(try StrictJSON.check(Array(#""just a string""#.utf8)) == [])
        // The same key in two different objects is not a duplicate.
        #expect(try StrictJSON.check(Array(#"{"spans": [{"text": "a"}, {"text": "b"}]}"#.utf8)) == ["spans"])
    }

    @Test(arguments: [
        (#"{"a": 1, "a": 2}"#, "a", "duplicate key"),
        (#"{"s": [{"t": 1, "u": {"v": 1, "v": 1}}]}"#, "s[0].u.v", "duplicate key"),
        (#"{"a\u0062": 1, "ab": 2}"#, "ab", "duplicate key"),
        (#"{"a": 1,}"#, "a", "trailing comma"),
        (#"{"a": [1, 2,]}"#, "a[1]", "trailing comma"),
        (#"{"a": "\ud800"}"#, "a", "lone surrogate"),
        (#"{"a": "\ud800\u0041"}"#, "a", "lone surrogate"),
        (#"{"a": "x\udfff"}"#, "a", "lone surrogate"),
        (#"{"a": NaN}"#, "a", "NaN is not a JSON number"),
        (#"{"a": [Infinity]}"#, "a[0]", "Infinity is not a JSON number"),
        (#"{"a": -Infinity}"#, "a", "-Infinity is not a JSON number"),
        (#"{"a": 1e309}"#, "a", "1e309 is out of range"),
        (#"{"a": -123456789012345678901234567890e300}"#, "a", "out of range"),
        (#"{"a": 01}"#, "a", "leading zeros"),
        (#"{"a": 1.}"#, "a", "after the decimal point"),
        (#"{"a": .5}"#, "a", "expected a value"),
        (#"{"a": 1e}"#, "a", "exponent"),
        (#"{"a": +1}"#, "a", "expected a value"),
        (#"{"a": 'x'}"#, "a", "expected a value"),
        (#"{a: 1}"#, "", "expected a key in double quotes"),
        (#"{"a" 1}"#, "a", "expected ':'"),
        (#"{"a": 1 "b": 2}"#, "a", "expected ',' or '}'"),
        (#"{"a": tru}"#, "a", "expected a value"),
        (#"{"a": "\x"}"#, "a", "unknown escape"),
        (#"{"a": "\u12"}"#, "a", "\\u escape"),
        (#"{"a": "open}"#, "a", "not closed"),
        (#"{"a": 1} x"#, "", "after the JSON value"),
        (#"{"a": 1 // note"#, "a", "expected ',' or '}'"),
        (#"{"a": [1, 2"#, "a", "the body ends before the array that starts at byte 6 is closed"),
        (#"{"a": 1"#, "", "the body ends before the object that starts at byte 0 is closed"),
        ("", "", "ends where a value was expected"),
    ])
    func faultsNameTheField(_ text: String, _ field: String, _ message: String) throws {
        let error = try #require(Self.error(text), "accepted \(text)")
        #expect(error.field == (field.isEmpty ? nil : field), "\(error)")
        #expect(error.message.contains(message), "\(error)")
        #expect(error.isOutOfRange == message.contains("out of range"))
    }

    @Test func bytesThatAreNotUTF8NameTheField() throws {
        let cases: [[UInt8]] = [
            [0xFF], [0xC0, 0x80], [0xC3], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xF8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xE2, 0x82],
        ]
        for bad in cases {
            let error = try #require(Self.error(Array(#"{"t": "a"#.utf8) + bad + Array(#"b"}"#.utf8)), "\(bad)")
            #expect(error.field == "t")
            #expect(error.message.contains("not valid UTF-8"), "\(error)")
        }
        // Well-formed sequences of every length pass, up to U+10FFFF.
        let good: [UInt8] = [0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xF4, 0x8F, 0xBF, 0xBF]
        #expect(Self.error(Array(#"{"t": ""#.utf8) + good + Array(#""}"#.utf8)) == nil)
        let raw = try #require(Self.error(Array("{\"t\": \"a\u{1}\"}".utf8)))
        #expect(raw.field == "t" && raw.message.contains("control character"))
        let bom = try #require(Self.error([0xEF, 0xBB, 0xBF] + Array(#"{"t": 1}"#.utf8)))
        #expect(bom.message.contains("byte order mark"))
    }

    @Test func depthIsBounded() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let error = try #require(Self.error(deep))
        #expect(error.message.contains("nested more than \(StrictJSON.maximumDepth)"))
        let fits =
            String(repeating: "[", count: StrictJSON.maximumDepth)
            + String(repeating: "]", count: StrictJSON.maximumDepth)
        #expect(Self.error(fits) == nil)
    }

    /// `Utterance.decode(json:)` (`speak --json`) is strict too.
    @Test func utteranceDecodingIsStrict() {
        #expect(
            throws: SpeechInputError.malformed(field: "pitch", "duplicate key; a key may appear only once in an object")
        ) {
            try Utterance.decode(json: Data(#"{"text": "a", "pitch": 1, "pitch": 2}"#.utf8))
        }
        #expect {
            try Utterance.decode(json: Data(#"{"text": "a", "rate": 1e999}"#.utf8))
        } throws: { error in
            (error as? SpeechInputError)?.kind == "outOfRange" && (error as? SpeechInputError)?.field == "rate"
        }
    }
}
