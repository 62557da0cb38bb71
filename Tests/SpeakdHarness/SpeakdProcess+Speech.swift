import Foundation
import SpeakTestSupport

extension SpeakdProcess {
    /// `speech(json:raw:)` with the body written as a dictionary literal, as the tests do.
    public func speech(_ body: [String: Any], raw: Bool = false) async throws -> WAVReader {
        try await speech(json: try JSONSerialization.data(withJSONObject: body), raw: raw)
    }
}
