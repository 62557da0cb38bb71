import Testing

@testable import SpeakCLI

/// Expects `arguments` to be refused by the parser as a validation failure whose message
/// contains `expected` (the flag or value it names).
func expectRefused(_ arguments: [String], naming expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try Speak.parseAsRoot(arguments)
        Issue.record("\(arguments) parsed", sourceLocation: sourceLocation)
    } catch {
        let message = Speak.fullMessage(for: error)
        #expect(message.contains(expected), "\(arguments): \(message)", sourceLocation: sourceLocation)
        #expect(Speak.exitCode(for: error) == .validationFailure, sourceLocation: sourceLocation)
    }
}
