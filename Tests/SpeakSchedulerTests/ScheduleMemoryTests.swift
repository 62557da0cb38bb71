import Foundation
import SpeakSchedules
import Testing

@testable import SpeakScheduler

/// What the schedule service keeps of each schedule between slots: its plan, not its text.
struct ScheduleMemoryTests {
    @Test func anEntryHoldsThePlanAndNoAnnouncement() {
        let fields = Mirror(
            reflecting: ScheduleService.Entry(
                id: "a", plan: .init(timing: .once(at: Date()), missed: .skip), lastSlot: nil, since: Date())
        )
        .children.compactMap(\.label)
        #expect(fields == ["id", "plan", "lastSlot", "since", "revision"])
    }
}
