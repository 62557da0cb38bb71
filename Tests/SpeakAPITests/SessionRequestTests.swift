import Foundation
import SpeakAPI
import SpeechModel
import Testing

/// The one decode of a session body: absent keeps, null sets back, every bad value names its field.
struct SessionRequestTests {
    private func decode(_ json: String) throws(RequestBodyError) -> SessionRequest {
        try SessionRequest.decode(json: Data(json.utf8))
    }

    @Test func absentKeepsNullSetsBackAValueSets() throws {
        let request = try decode(#"{"rate": 0.7, "volume": null, "language": "pt-PT", "moveTo": "headset"}"#)
        #expect(request.rate == .some(0.7))
        #expect(request.volume == .some(nil), "null: back to the default")
        #expect(request.voice == nil && request.idleTimeout == nil, "absent: unchanged")
        #expect(request.language??.description == "pt-PT" && request.moveTo == .some("headset"))
        #expect(request.output == nil && request.id == nil && !request.replace)
        #expect(try decode("{}") == SessionRequest(), "{} is the default output's session as it is")
        // An empty body is refused, as an empty announcement is.
        #expect(throws: RequestBodyError.self) { try decode("") }

        let again = try decode(String(decoding: try WireFormat.encoder().encode(request), as: UTF8.self))
        #expect(again == request, "encoding keeps absent and null apart")
    }

    @Test(arguments: [
        (#"{"rate": 0.4}"#, "rate"), (#"{"rate": 2.5}"#, "rate"), (#"{"rate": "slow"}"#, "rate"),
        (#"{"volume": 2.1}"#, "volume"), (#"{"idleTimeout": 0.5}"#, "idleTimeout"),
        (#"{"idleTimeout": 3601}"#, "idleTimeout"), (#"{"language": "en_GB"}"#, "language"),
        (#"{"voice": ""}"#, "voice"), (#"{"moveTo": ""}"#, "moveTo"), (#"{"output": null}"#, "output"),
        (#"{"id": null}"#, "id"), (#"{"replace": "yes"}"#, "replace"), (#"{"speed": 1}"#, "speed"),
        ("[1]", "body"), ("null", "body"),
    ])
    func badValuesNameTheField(json: String, field: String) {
        do {
            _ = try decode(json)
            Issue.record("\(json) decoded")
        } catch {
            #expect(error.field == field, "\(json): \(error)")
        }
    }
}
