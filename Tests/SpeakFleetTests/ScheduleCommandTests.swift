import Foundation
import SpeakService
import Testing

@testable import SpeakFleet

/// The fleet's schedule commands, decoded strictly.
struct ScheduleCommandTests {
    @Test func addUpdateAndDelete() throws {
        let add = try ScheduleCommand(json: Data(#"{"action": "add", "schedule": {"id": "s", "at": "x"}}"#.utf8))
        guard case .add(let body) = add else { Issue.record("\(add)"); return }
        let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: String])
        #expect(object == ["id": "s", "at": "x"])
        let update = try ScheduleCommand(json: Data(#"{"action": "update", "id": "s", "patch": {"name": null}}"#.utf8))
        guard case .update(let id, _) = update else { Issue.record("\(update)"); return }
        #expect(id == "s")
        #expect(try ScheduleCommand(json: Data(#"{"action": "delete", "id": "s"}"#.utf8)) == .delete(id: "s"))
    }

    @Test func aKeyGivenTwiceAnywhereIsMalformedNamingIt() {
        let json = #"{"action": "add", "schedule": {"announcement": {"text": "a", "private": true, "private": false}}}"#
        #expect {
            try ScheduleCommand(json: Data(json.utf8))
        } throws: { error in
            guard let error = error as? SpeakError, error.code == .malformed else { return false }
            return error.response.error.field == "schedule.announcement.private"
        }
    }

    @Test(
        arguments: [
            (#"[1]"#, "body"),
            (#"{"id": "s"}"#, "action"),
            (#"{"action": "move", "id": "s"}"#, "action"),
            (#"{"action": "delete", "id": "s", "colour": "red"}"#, "colour"),
            (#"{"action": "delete"}"#, "id"),
            (#"{"action": "delete", "id": ""}"#, "id"),
            (#"{"action": "add", "schedule": "at noon"}"#, "schedule"),
            (#"{"action": "update", "id": "s"}"#, "patch"),
            (#"{"action": "add", "schedule": {}, "id": "s"}"#, "id"),
        ])
    func refusedNamingTheField(_ json: String, _ field: String) {
        #expect {
            try ScheduleCommand(json: Data(json.utf8))
        } throws: { error in
            (error as? SpeakError)?.response.error.field == field
        }
    }
}
