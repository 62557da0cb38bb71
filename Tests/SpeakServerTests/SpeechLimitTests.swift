import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IntakeTestSupport
import SpeakAPI
import SpeakServer
import SpeakService
import SpeakTestSupport
import Synchronization
import Testing

@testable import ServiceCore

/// The bounds on what `POST /v1/speech` holds: the audio of one render and the renders at once.
@Suite("Speech limits")
struct SpeechLimitTests {
    /// `FakeRenderer.tone()` makes 0.1 s per span: eleven spans pass a one-second limit, ten do not.
    @Test(.timeLimit(.minutes(1))) func audioOverTheLimitIs413NamingTheField() async throws {
        let harness = Harness(renderLimits: RenderLimits(maxSeconds: 1))
        try await harness.test { client in
            let spans = { (count: Int) in
                "{\"spans\": [" + (0..<count).map { _ in #"{"text": "a"}"# }.joined(separator: ", ") + "]}"
            }
            let fits = try await client.execute(uri: "/v1/speech", method: .post, body: jsonBody(spans(10)))
            #expect(fits.status == .ok)
            #expect(fits.body.readableBytes == 44 + 2 * 10 * FakeRenderer.toneSamplesPerSpan)

            let over = try await client.execute(uri: "/v1/speech", method: .post, body: jsonBody(spans(11)))
            #expect(over.status == .contentTooLarge)
            let error = try decode(ErrorResponse.self, over).error
            #expect(error.code == ErrorResponse.Code.tooLarge)
            #expect(error.field == "spans")
            #expect(error.message.contains("1 seconds"), "\(error.message)")

            let ssml = "<speak>" + String(repeating: "a<break time='1ms'/>", count: 11) + "</speak>"
            let overSSML = try await client.execute(
                uri: "/v1/speech", method: .post, body: jsonBody(#"{"ssml": "\#(ssml)"}"#))
            #expect(overSSML.status == .contentTooLarge)
            #expect(try decode(ErrorResponse.self, overSSML).error.field == "ssml")
        }
    }

    @Test(.timeLimit(.minutes(1))) func slotsAreTakenInTurnAndRefusedBeyondTheWaitingLimit() async throws {
        let slots = RenderSlots(count: 1, maxWaiting: 2)
        let first = try await slots.acquire()
        let order = OrderLog()
        // The second holds its slot until told to go, then drops its lease without releasing it.
        let second = Task {
            let lease = try await slots.acquire()
            order.append(2)
            while !order.values.contains(0) { try await Task.sleep(for: .milliseconds(5)) }
            _ = lease
        }
        try await waitUntil { slots.waitingCount == 1 }
        let third = Task {
            let lease = try await slots.acquire()
            order.append(3)
            lease.release()
        }
        try await waitUntil { slots.waitingCount == 2 }

        // Two wait already: the next is refused at once, naming the limits.
        do {
            _ = try await slots.acquire()
            Issue.record("a third waiting request was accepted")
        } catch let error as SpeakError {
            #expect(error.code == .queueFull)
            #expect(error.response.error.code == ErrorResponse.Code.tooManyRenders)
            #expect(error.response.error.message.contains("1 renders are running and 2 are waiting"))
        }

        // Released, the slot goes to the one that waited longest; a dropped lease frees it too.
        first.release()
        first.release()
        try await waitUntil { order.values == [2] }
        #expect(slots.waitingCount == 1)
        order.append(0)
        try await second.value
        try await third.value
        #expect(order.values == [2, 0, 3])

        // A waiting request that is cancelled leaves the line without taking a slot.
        let held = try await slots.acquire()
        let cancelled = Task { _ = try await slots.acquire() }
        try await waitUntil { slots.waitingCount == 1 }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(slots.waitingCount == 0)
        held.release()
        let again = try await slots.acquire()
        again.release()
    }

    private func waitUntil(_ condition: () -> Bool) async throws {
        while !condition() { try await Task.sleep(for: .milliseconds(5)) }
    }
}

/// The order in which tasks got their slots.
private final class OrderLog: Sendable {
    private let state = Mutex<[Int]>([])
    var values: [Int] { state.withLock { $0 } }
    func append(_ value: Int) { state.withLock { $0.append(value) } }
}
