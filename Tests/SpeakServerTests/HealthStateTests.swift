import SpeakAPI
import Testing

/// How the engine's and the default output's states make `/healthz`'s `status`.
@Suite("Health status")
struct HealthStateTests {
    static func report(engine: HealthReport.State, audio: HealthReport.State) -> HealthReport {
        HealthReport(engine: .init(state: engine), audio: .init(state: audio, sink: "null"))
    }

    @Test("ok only when both are; unavailable when either is; degraded otherwise")
    func statusCombinesEngineAndAudio() {
        let states: [HealthReport.State] = [.ok, .degraded, .unavailable]
        for engine in states {
            for audio in states {
                let expected: HealthReport.State =
                    engine == .unavailable || audio == .unavailable
                    ? .unavailable : engine == .ok && audio == .ok ? .ok : .degraded
                #expect(Self.report(engine: engine, audio: audio).status == expected, "\(engine), \(audio)")
            }
        }
    }
}
