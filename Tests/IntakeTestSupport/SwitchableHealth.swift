import AnnouncementIntake
import SpeakAPI
import SpeakTestSupport
import Synchronization

/// Health whose audio state a test can switch.
public final class SwitchableHealth: HealthReporting {
    private let audioUp = Mutex(true)

    public init() {}

    public func setAudio(up: Bool) {
        audioUp.withLock { $0 = up }
    }

    public func health() async -> HealthReport {
        let up = audioUp.withLock { $0 }
        return HealthReport(
            engine: .init(state: .ok, name: "tone"),
            audio: .init(state: up ? .ok : .unavailable, sink: "null", detail: up ? nil : "the sink went away"))
    }
}

extension FakeRenderer {
    /// The samples of `tone`'s sound for each span: 0.1 s.
    public static let toneSamplesPerSpan = 2_205

    /// The engine behind the intake in its tests: a tone for each span, a voice for English and
    /// Portuguese only, and each preparation's serial number as its engine input, so a test can
    /// tell which preparation reached which stage.
    public static func tone() -> FakeRenderer {
        FakeRenderer(
            sound: .tonePerSpan(samples: toneSamplesPerSpan), input: .serial, languages: ["en", "en-GB", "pt-PT"])
    }
}
