import Foundation
import FuzzSupport
import SpeakAPI
import SpeechModel

/// An SSML document as `Utterance(ssml:)` parses it for `speak --ssml` and a request's `ssml`.
///
/// Checks: a refusal names the field `ssml`; an accepted document is a valid utterance (so the
/// daemon never refuses it under a field the client did not send, such as `spans[0].pauseAfter`)
/// and, sent as `speak` sends it, reaches the daemon unchanged.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSSML(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let ssml = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let utterance: Utterance
    do {
        utterance = try Utterance(ssml: ssml)
    } catch {
        FuzzChecks.requireClear(error, field: ["ssml"], input: ssml)
        return 0
    }
    do {
        try utterance.validate()
    } catch {
        fatalError("fuzz property violated: \(ssml.debugDescription) parses to an invalid utterance: \(error)")
    }
    do {
        // Sizes are checked where the limits are known (the CLI, the daemon); their error names its field.
        try utterance.validate(limits: .default)
    } catch {
        FuzzChecks.requireClear(error, input: ssml)
        return 0
    }
    FuzzChecks.requireWireRoundTrip(AnnouncementRequest(utterance: utterance), from: ssml)
    return 0
}
