import ArgumentParser
import Foundation
import SpeakAPI
import SpeakClient
import SpeechModel

extension Speak {
    /// `speak [options] [TEXT…]`: the default command.
    struct Say: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Speak TEXT (or standard input): through the daemon when one answers, else in-process.",
            discussion: examples
        )

        /// Shown in this command's help and in `speak --help`.
        static let examples = """
            Examples:
              speak --pitch 1.4 --lang pt-PT "Olá, bom dia"
              speak --output hello.wav "Hello"
              speak --ssml '<speak>Platform <say-as interpret-as="characters">7</say-as></speak>'
              echo '{"spans":[{"text":"Next train to "},{"text":"Lisboa","language":"pt-PT"}]}' | speak --json -
            """

        /// What to say and how: the request body, built as `speak schedule add` builds its announcement.
        @OptionGroup var announcement: AnnouncementOptions

        @Flag(help: "Wait until it finished; print its finished event; exit 1 unless it was spoken to the end.")
        var wait = false

        @Flag(help: "With --wait, through the daemon: print each word on its own line as it is heard.")
        var progress = false

        @Option(help: ArgumentHelp("Write the speech to a WAV file instead of playing it.", valueName: "file.wav"))
        var output: String?

        // Unconditional: the value is negative, and would otherwise read as a flag.
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "Loudness of speech in this process (--local, --output, or no daemon): EBU R128 LUFS from -40 to -5, "
                    + "or off; default -16, as speakd's.",
                valueName: "LUFS"))
        var loudness: String?

        @Flag(help: "Speak in-process even when a daemon is running.")
        var local = false

        @Option(
            help: ArgumentHelp(
                "In-process audio: auto, pulse[:SINK], alsa[:DEVICE], wav:PATH or null (default: $SPEAKD_AUDIO or auto).",
                valueName: "sink"))
        var audio: String?

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @OptionGroup(title: "Fleet options") var fleet: FleetOptions

        func validate() throws {
            if progress, !wait {
                throw ValidationError("--progress prints words while waiting; give --wait with it")
            }
            if let output, !output.lowercased().hasSuffix(".wav") {
                throw ValidationError("--output \(output): the file name must end in .wav")
            }
            if let audio { _ = try LocalSpeech.sinkSpec(audio, flag: "--audio") }
            if announcement.to != nil, local || output != nil {
                throw ValidationError("--to names one of the daemon's outputs; it cannot go with --local or --output")
            }
        }

        func run() async throws {
            let request = try readRequest()
            if fleet.mqtt != nil {
                if loudness != nil {
                    throw SpeakFailure.invalidInput(
                        "--loudness is for speech in this process; the fleet's kiosks play at their own --loudness")
                }
                try await fleet.send(request, wait: wait)
                return
            }
            // Chimes and repeats are the daemon's: in-process speech and WAV output have neither.
            let daemonOnly = [
                announcement.chime.map { _ in "--chime" }, announcement.chimeAfter.map { _ in "--chime-after" },
                announcement.repeatCount.map { _ in "--repeat" }, announcement.isPrivate ? "--private" : nil,
            ].compactMap { $0 }
            if let flag = daemonOnly.first, output != nil || local {
                throw SpeakFailure.invalidInput(
                    "\(flag) is played by speakd; it cannot be used with --output or --local")
            }
            let target = try localLoudness()
            if let output {
                try await LocalSpeech.render(request.utterance, toWAV: output, loudness: target)
                return
            }
            if !local, let daemon = try await connection.reachableDaemon() {
                if loudness != nil {
                    throw SpeakFailure.invalidInput(
                        "--loudness is for speech in this process; speakd plays at its own --loudness")
                }
                try await speakThroughDaemon(daemon, request)
                return
            }
            if let to = announcement.to, to != "default" {
                throw SpeakFailure.daemonUnreachable("--to \(to) needs the daemon, and no speakd answers")
            }
            if !local, connection.isExplicit() {
                let tried = try connection.candidates().map(\.description).joined(separator: ", ")
                throw SpeakFailure.daemonUnreachable("no speakd answers at \(tried)")
            }
            if let flag = daemonOnly.first {
                throw SpeakFailure.daemonUnreachable("\(flag) needs speakd, and no speakd answers")
            }
            let sink = try LocalSpeech.sinkSpec(
                audio ?? ProcessInfo.processInfo.environment["SPEAKD_AUDIO"] ?? "auto",
                flag: audio == nil ? "SPEAKD_AUDIO" : "--audio")
            let finished = try await LocalSpeech.speak(
                request.utterance, priority: request.delivery.priority, on: sink, loudness: target)
            if wait { print(try LocalSpeech.json(finished)) }
            guard finished.success == true else {
                throw SpeakFailure.notCompleted(finished.detail ?? "speech did not complete")
            }
        }

        /// The loudness of speech in this process, in LUFS; nil for the engine's own (`off`).
        func localLoudness() throws -> Double? {
            guard let loudness else { return LocalSpeech.defaultLoudness }
            if ["off", "none"].contains(loudness.lowercased()) { return nil }
            guard let lufs = Double(loudness), lufs.isFinite, (-40.0...(-5.0)).contains(lufs) else {
                throw SpeakFailure.invalidInput("--loudness: expected LUFS from -40 to -5, or off, not '\(loudness)'")
            }
            return lufs
        }

        /// Posts the announcement; with `--wait`, prints its finished event and fails unless it succeeded.
        private func speakThroughDaemon(_ daemon: SpeakHTTPClient, _ request: AnnouncementRequest) async throws {
            if progress {
                try await speakWithProgress(daemon, request)
                return
            }
            let response = try await daemon.send(
                "POST", wait ? "/v1/announcements?wait=true" : "/v1/announcements", json: request)
            try response.checkStatus("speakd at \(daemon.endpoint)")
            guard wait else {
                let accepted = try response.decode(AnnouncementAccepted.self)
                print("\(accepted.id) \(accepted.state.rawValue) position \(accepted.position)")
                return
            }
            print(String(decoding: response.body, as: UTF8.self))
            let finished = try response.decode(AnnouncementEvent.self)
            guard finished.success == true else {
                throw SpeakFailure.notCompleted(
                    "\(finished.id) finished \(finished.reason?.rawValue ?? "unsuccessfully")"
                        + (finished.detail.map { ": \($0)" } ?? ""))
            }
        }

        /// Follows the event stream, posts the announcement, prints each of its words as the
        /// `word` events say it is heard, then its finished event as `--wait` does.
        private func speakWithProgress(_ daemon: SpeakHTTPClient, _ request: AnnouncementRequest) async throws {
            // Subscribed before posting, and answered, so no word is missed (a stream still
            // connecting missed the first word on a loaded machine); events of others are skipped.
            let messages = try await daemon.openEvents()
            var iterator = messages.makeAsyncIterator()
            let response = try await daemon.send("POST", "/v1/announcements", json: request)
            try response.checkStatus("speakd at \(daemon.endpoint)")
            let id = try response.decode(AnnouncementAccepted.self).id
            while let message = try await iterator.next() {
                guard let event = try? message.announcementEvent(), event.id == id else { continue }
                switch event.type {
                case .word:
                    if let word = event.word {
                        // Written unbuffered: each word is wanted as it is heard, piped or not.
                        FileHandle.standardOutput.write(Data((word + "\n").utf8))
                    }
                case .finished:
                    print(String(decoding: try WireFormat.encoder().encode(event), as: UTF8.self))
                    guard event.success == true else {
                        throw SpeakFailure.notCompleted(
                            "\(event.id) finished \(event.reason?.rawValue ?? "unsuccessfully")"
                                + (event.detail.map { ": \($0)" } ?? ""))
                    }
                    return
                default:
                    continue
                }
            }
            throw SpeakFailure.notCompleted("the event stream ended before \(id) finished")
        }

        /// The utterance from `--json`, `--ssml` or plain text, with the flags as its defaults.
        func readUtterance() throws -> Utterance {
            try readRequest().utterance
        }

        /// The announcement to make (`AnnouncementOptions.readRequest()`).
        func readRequest() throws -> AnnouncementRequest {
            try announcement.readRequest()
        }
    }
}
