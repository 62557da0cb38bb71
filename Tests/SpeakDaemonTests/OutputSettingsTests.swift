import Foundation
import SpeakDaemon
import Testing

/// `--output NAME=SINK`, the repeatable, keyed setting: every source, names, and mistakes.
@Suite("Output settings")
struct OutputSettingsTests {
    static let environment = ["RUNTIME_DIRECTORY": "/run/speakd"]

    @Test func repeatedFlagsKeepTheirOrder() throws {
        let configuration = try ConfigurationLoader.load(
            arguments: ["--output", "headset=pulse:usb", "--output=desk-2=null", "--audio", "null"],
            environment: Self.environment)
        #expect(configuration.audio == "null")
        #expect(
            configuration.outputs == [
                NamedOutput(name: "headset", sink: "pulse:usb"), NamedOutput(name: "desk-2", sink: "null"),
            ])
    }

    @Test func fileLinesNameTheOutputAfterTheDot() throws {
        let path = try configFile(
            "audio = null\noutput.headset = pulse:alsa_output.usb\n# the desk\noutput.desk_b = \"wav:/tmp/desk.wav\"\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try ConfigurationLoader.load(arguments: ["--config", path], environment: Self.environment)
        #expect(
            configuration.outputs == [
                NamedOutput(name: "headset", sink: "pulse:alsa_output.usb"),
                NamedOutput(name: "desk_b", sink: "wav:/tmp/desk.wav"),
            ])

        // Flags replace the file's outputs, as for every list.
        let overridden = try ConfigurationLoader.load(
            arguments: ["--config", path, "--output", "lobby=null"], environment: Self.environment)
        #expect(overridden.outputs == [NamedOutput(name: "lobby", sink: "null")])
    }

    @Test func environmentSeparatesEntriesWithSemicolons() throws {
        let configuration = try ConfigurationLoader.load(
            arguments: [],
            environment: Self.environment.merging(["SPEAKD_OUTPUT": "headset=null; desk=alsa:hw:1"]) { $1 })
        #expect(
            configuration.outputs == [
                NamedOutput(name: "headset", sink: "null"), NamedOutput(name: "desk", sink: "alsa:hw:1"),
            ])
    }

    @Test func privateAfterTheSinkMakesAnOutputPrivate() throws {
        let flags = try ConfigurationLoader.load(
            arguments: ["--output", "headset=pulse:usb,private", "--output", "desk=null"],
            environment: Self.environment)
        #expect(
            flags.outputs == [
                NamedOutput(name: "headset", sink: "pulse:usb", isPrivate: true),
                NamedOutput(name: "desk", sink: "null"),
            ])
        let path = try configFile("output.headset = pulse:usb,private\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try ConfigurationLoader.load(arguments: ["--config", path], environment: Self.environment)
        #expect(file.outputs == [NamedOutput(name: "headset", sink: "pulse:usb", isPrivate: true)])
        let environment = try ConfigurationLoader.load(
            arguments: [],
            environment: Self.environment.merging(["SPEAKD_OUTPUT": "headset=alsa:hw:1,private; hall=null"]) { $1 })
        #expect(
            environment.outputs == [
                NamedOutput(name: "headset", sink: "alsa:hw:1", isPrivate: true),
                NamedOutput(name: "hall", sink: "null"),
            ])
        #expect {
            _ = try ConfigurationLoader.load(
                arguments: ["--audio", "pulse:usb,private"], environment: Self.environment)
        } throws: { error in
            "\(error)".contains("--audio: 'pulse:usb,private' is not valid: the default output cannot be private")
        }
        // The flag is checked after the sink: a bad sink is still named.
        #expect {
            _ = try ConfigurationLoader.load(
                arguments: ["--output", "headset=speakers,private"], environment: Self.environment)
        } throws: { error in
            "\(error)".contains("--output: 'headset=speakers,private' is not valid")
        }
    }

    @Test(arguments: [
        (["--output", "Headset=null"], "--output: 'Headset=null' is not valid: an output name is 1–32 characters"),
        (["--output", "default=null"], "--output: 'default=null' is not valid: 'default' is the output --audio"),
        (["--output", "2nd=null"], "--output: '2nd=null' is not valid: an output name"),
        (["--output", "a b=null"], "--output: 'a b=null' is not valid: an output name"),
        (["--output", "\(String(repeating: "a", count: 33))=null"], "is not valid: an output name is 1–32"),
        (["--output", "headset"], "--output: 'headset' is not valid: expected NAME=VALUE"),
        (["--output", "headset=speakers"], "--output: 'headset=speakers' is not valid: "),
        (
            ["--output", "x=null", "--output", "x=pulse"],
            "--output: 'x=pulse' is not valid: the name 'x' is given twice"
        ),
    ])
    func mistakesNameTheFlagAndTheEntry(arguments: [String], message: String) {
        #expect {
            _ = try ConfigurationLoader.load(arguments: arguments, environment: Self.environment)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test func aBadFileLineIsNamed() throws {
        let path = try configFile("audio = null\noutput.headset = null\noutput.Lobby = null\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            _ = try ConfigurationLoader.load(arguments: ["--config", path], environment: Self.environment)
        } throws: { error in
            "\(error)".hasPrefix("\(path):3: 'Lobby=null' is not valid: an output name")
        }
        let unknown = try configFile("audio.headset = null\n")
        defer { try? FileManager.default.removeItem(atPath: unknown) }
        #expect {
            _ = try ConfigurationLoader.load(arguments: ["--config", unknown], environment: Self.environment)
        } throws: { error in
            "\(error)".hasPrefix("\(unknown):1: unknown setting 'audio.headset'")
        }
    }
}
