import Foundation
import FuzzSupport
import SpeakAPI
import SpeechModel

/// A request body, byte for byte, as `POST /v1/announcements` decodes it.
///
/// Checks: a body that is strict JSON with an object at the top is refused naming a field (only
/// a body that is not JSON, or not an object, may name none); an accepted request passes its own
/// validation and survives encoding and decoding unchanged.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestJSON(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let body = Data(bytes: start, count: count)
    let shown = String(decoding: body, as: UTF8.self)
    do {
        let request = try AnnouncementRequest.decode(json: body)
        do {
            try request.validate()
            try request.utterance.validate()
        } catch {
            fatalError("fuzz property violated: \(shown.debugDescription) was accepted but is not valid: \(error)")
        }
        FuzzChecks.requireWireRoundTrip(request, from: shown)
    } catch {
        let isObject = body.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{")
        let isStrictJSON = (try? StrictJSON.check(body)) != nil
        FuzzChecks.requireClear(error, input: shown)
        FuzzChecks.require(
            !(isObject && isStrictJSON) || error.field != nil,
            "the strict JSON object \(shown.debugDescription) is refused without naming a field: \(error)")
    }
    return 0
}
