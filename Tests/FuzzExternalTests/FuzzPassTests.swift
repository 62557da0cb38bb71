import Foundation
import Testing

/// A short pass of `scripts/fuzz`: the four libFuzzer targets of Fuzz/ built with
/// AddressSanitizer and run for ten seconds each, two at a time, from their committed seed
/// corpus alone (`--fresh`), which holds every input fuzzing has found: a parser that breaks
/// one of them again fails here in the first second.
@Suite("Fuzz pass", .serialized)
struct FuzzPassTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Exits 0 (no crash, failed property, leak or slow input in any target), and every target
    /// really ran: each prints a number of runs above zero.
    @Test(.timeLimit(.minutes(10)))
    func everyTargetRunsWithoutFindings() throws {
        let process = Process()
        process.executableURL = Self.root.appendingPathComponent("scripts/fuzz")
        // Two at a time: the tests run one by one, so both cores are free.
        process.arguments = ["--seconds", "10", "--jobs", "2", "--fresh"]
        process.currentDirectoryURL = Self.root
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let started = ContinuousClock.now
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        print(text, "fuzz pass took \(ContinuousClock.now - started) in all", separator: "")

        #expect(process.terminationStatus == 0, "scripts/fuzz failed:\n\(text)")
        for target in ["json", "ssml", "language-tag", "ipa"] {
            let line = text.split(separator: "\n").first { $0.hasPrefix("fuzz: \(target): ") }
            let runs = line.flatMap { $0.split(separator: " ").dropFirst(2).first }.flatMap { Int($0) }
            #expect((runs ?? 0) > 0, "\(target) did not run: \(line ?? "no line")")
        }
    }
}
