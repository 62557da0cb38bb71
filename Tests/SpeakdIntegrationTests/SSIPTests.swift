import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// speech-dispatcher's own clients (Debian's `spd-say`, python3-speechd) and a raw SSIP
    /// connection against `speakd --ssip`, heard at a private PulseAudio null sink.
    ///
    /// Every client gets `SPEECHD_ADDRESS=unix_socket:PATH` and `SPEECHD_CMD=/bin/false`, so a
    /// client that cannot connect fails instead of starting a real speech-dispatcher.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct SSIPTests {
        @Test func spdSayWaitIsHeardAndExitsWhenTheVoiceEnds() async throws {
            let ssip = try await SSIPDaemon.start()
            let start = ContinuousClock.now
            let result = try await ssip.run(
                "/usr/bin/spd-say", ["-w", "The train to Lisbon leaves from platform four."])
            #expect(result.status == 0, "spd-say: \(result.output)")
            try await Task.sleep(for: .milliseconds(300))
            let events = ssip.speakd.events.events
            let recording = await ssip.stop()
            let finished = events.filter { $0.type == .finished }
            try #require(finished.count == 1, "events: \(events.map(\.type))")
            #expect(finished[0].reason == .completed)
            #expect(finished[0].text == "The train to Lisbon leaves from platform four.")
            // spd-say's priority, text, is speakd's low.
            #expect(finished[0].priority == .low)
            let segments = recording.segments(minimumSilence: 0.5)
            try #require(segments.count == 1, "heard \(segments)")
            #expect(segments[0].duration > 1.0)
            // spd-say -w exits on END (702), which is sent after the last sample is played: no
            // earlier than the voice's end, and soon after it.
            let end = try #require(recording.playedAt(segments[0].end))
            let exitAfterEnd = (result.exited - end).seconds
            #expect(
                exitAfterEnd > -0.05 && exitAfterEnd < 0.5, "spd-say exited \(exitAfterEnd) s after the voice ended")
            #expect((result.exited - start).seconds > segments[0].duration)
        }

        /// A message as long as the Web Speech API allows (speech-dispatcher's own test programs
        /// send 11,435 characters), with one 8,000-byte line in it, from Debian's spd-say: queued,
        /// heard at once while the rest is not rendered yet (the daemon's memory does not grow
        /// with the message: half an hour of audio would be 80 MB), and silenced by `spd-say -C`.
        @Test(.timeLimit(.minutes(2))) func aLongMessageIsSpokenAsItStreamsAndCancelledAtOnce() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("SSIPTests.aLongMessageIsSpokenAsItStreamsAndCancelledAtOnce")
            { timing in
                let ssip = try await SSIPDaemon.start()
                let sentences = (1...1_000).map { "Sentence \($0) of a long page goes on here." }
                let line = String(sentences.prefix(200).joined(separator: " "))
                var text = line + "\n"
                for sentence in sentences.dropFirst(200) where text.count < 32_300 { text += sentence + " " }
                try #require(line.utf8.count > 8_000 && text.count > 32_000 && text.count <= 32_767, "\(text.count)")
                func residentKiB() throws -> Int {
                    let status = try String(contentsOfFile: "/proc/\(ssip.speakd.daemon.pid)/status", encoding: .utf8)
                    let field = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
                    return Int(field?.split(separator: " ").dropFirst().first ?? "") ?? 0
                }
                let idle = try residentKiB()
                var speaking = 0
                let (cancelled, finished, recording) = try await ssip.sayThenCancel(text, listening: .seconds(3)) {
                    speaking = try residentKiB()
                }
                #expect(finished.count == 1 && finished.first?.reason == .cancelled, "\(finished)")
                #expect(finished.first?.text.count == text.count)
                #expect(speaking - idle < 24 * 1024, "the daemon grew by \(speaking - idle) KiB while speaking")
                let heard = recording.segments(minimumSilence: 0.3)
                #expect(!heard.isEmpty, "nothing was heard")
                let end = try #require(heard.last.flatMap { recording.playedAt($0.end) })
                let silencedAfter = (end - cancelled).seconds
                timing.check(
                    silencedAfter < 0.3, "sound went on \(silencedAfter) s after spd-say -C returned, not under 0.3 s")
            }
            #expect(misses.isEmpty, "\(misses)")
        }

        @Test func spdSayRateMapsOntoSpeakdsRate() async throws {
            let ssip = try await SSIPDaemon.start()
            let text = "One two three four five six seven eight."
            let slow = try await ssip.run("/usr/bin/spd-say", ["-w", "-r", "-100", text])
            // A silence between the two that no pause within either is as long as.
            try await Task.sleep(for: .milliseconds(1_500))
            let fast = try await ssip.run("/usr/bin/spd-say", ["-w", "-r", "100", text])
            #expect(slow.status == 0 && fast.status == 0, "spd-say: \(slow.output) \(fast.output)")
            let recording = await ssip.stop()
            let segments = recording.segments(minimumSilence: 1.0)
            try #require(segments.count == 2, "heard \(segments)")
            // −100 is half speed and 100 double: four times as long, give or take pauses.
            let ratio = segments[0].duration / segments[1].duration
            #expect(ratio > 2.5 && ratio < 5.5, "slow/fast duration ratio \(ratio)")
        }

        @Test func spdSayCancelSilencesAMessageWhoseClientHasGone() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("SSIPTests.spdSayCancelSilencesAMessageWhoseClientHasGone") {
                timing in
                let ssip = try await SSIPDaemon.start()
                let text = String(repeating: "This is a long message that goes on and on. ", count: 8)
                let (cancelled, finished, recording) = try await ssip.sayThenCancel(text, listening: .milliseconds(500))
                #expect(finished.count == 1 && finished.first?.reason == .cancelled, "\(finished)")
                let heard = recording.segments(minimumSilence: 0.3)
                let end = try #require(heard.last.flatMap { recording.playedAt($0.end) })
                let silencedAfter = (end - cancelled).seconds
                timing.check(
                    silencedAfter < 0.3, "sound went on \(silencedAfter) s after spd-say -C returned, not under 0.3 s")
                #expect(recording.totalSoundingTime < 10, "the whole message was heard")
            }
            #expect(misses.isEmpty, "\(misses)")
        }

        @Test func pythonSpeechdCallbacksArriveInOrder() async throws {
            let ssip = try await SSIPDaemon.start()
            let script = """
                import sys, threading, time, speechd
                client = speechd.SSIPClient('speakd-test', autospawn=False)
                seen = []
                done = threading.Event()
                def callback(name):
                    def record(event_type, index_mark=None):
                        seen.append((name, event_type))
                        if event_type in (speechd.CallbackType.END, speechd.CallbackType.CANCEL):
                            done.set()
                    return record
                types = [speechd.CallbackType.BEGIN, speechd.CallbackType.END, speechd.CallbackType.CANCEL]
                client.speak('First message.', callback=callback('first'), event_types=types)
                assert done.wait(10), 'no end of the first message'
                done.clear()
                client.speak('A second, much longer message that will be cancelled before its end, '
                             'since nobody wants to hear all of it.', callback=callback('second'), event_types=types)
                deadline = time.time() + 1.5  # the begin may be dropped (below): cancel mid-message anyway
                while not any(name == 'second' for name, _ in seen) and time.time() < deadline:
                    time.sleep(0.01)
                client.cancel()
                assert done.wait(10), 'no end of the second message'
                client.close()
                for name, event_type in seen:
                    print(name, event_type)
                """
            let path = ssip.directory.appendingPathComponent("callbacks.py").path
            try script.write(toFile: path, atomically: true, encoding: .utf8)
            let result = try await ssip.run("/usr/bin/python3", [path])
            _ = await ssip.stop()
            #expect(result.status == 0, "python3: \(result.output)")
            let lines = result.output.split(separator: "\n").map(String.init)
            // python3-speechd registers a message's callback only after it has read the 225 reply
            // and drops an event its reading thread gets first (its speak() says so), so a begin
            // may be lost on a loaded machine; an end or cancel, which come seconds later, never.
            // What arrives is in order, with nothing extra.
            let all = ["first begin", "first end", "second begin", "second cancel"]
            #expect(
                lines.filter { !$0.hasSuffix(" begin") } == ["first end", "second cancel"],
                "callbacks: \(result.output)")
            #expect(lines == all.filter { lines.contains($0) }, "callbacks: \(result.output)")
            if lines != all {
                print("python3-speechd dropped a begin it got before registering its callback: \(lines)")
            }
        }

        /// python3-speechd's `sound_icon()`: a chime's name plays that chime (and nothing else
        /// is heard); a name no chime has is refused with 407, which the module raises.
        @Test func pythonSpeechdsSoundIconPlaysTheChimeOfThatName() async throws {
            let ssip = try await SSIPDaemon.start()
            let script = """
                import speechd
                client = speechd.SSIPClient('speakd-test', autospawn=False)
                try:
                    client.sound_icon('no-such-icon')
                except speechd.SSIPCommandError as error:
                    print('refused', error.args[0])
                client.sound_icon('ding')
                client.close()
                """
            let path = ssip.directory.appendingPathComponent("icon.py").path
            try script.write(toFile: path, atomically: true, encoding: .utf8)
            let result = try await ssip.run("/usr/bin/python3", [path])
            #expect(result.status == 0, "python3: \(result.output)")
            #expect(result.output.contains("refused 407"), "\(result.output)")
            let finished = await ssip.speakd.events.wait(timeout: .seconds(10)) { events in
                events.contains { $0.type == .finished }
            }
            #expect(finished)
            try await Task.sleep(for: .milliseconds(300))
            let events = ssip.speakd.events.events.filter { $0.type == .finished }
            let recording = await ssip.stop()
            #expect(events.count == 1 && events.first?.reason == .completed, "\(events)")
            // ding.wav is 0.6 s, most of it its decay: one short sound, no speech.
            let segments = recording.segments(minimumSilence: 0.3)
            try #require(segments.count == 1, "heard \(segments)")
            #expect(segments[0].duration > 0.1 && segments[0].duration < 0.65, "\(segments[0].duration) s")
        }

        /// python3-speechd's own automatic test: begin, cancel of the speaking and of a waiting
        /// message, and end, timed by sleeps of its own.
        @Test func pythonSpeechdsOwnAutomaticTestPasses() async throws {
            let ssip = try await SSIPDaemon.start()
            let result = try await ssip.run(
                "/usr/bin/python3", ["-m", "unittest", "-v", "speechd._test.AutomaticTest"])
            _ = await ssip.stop()
            #expect(result.status == 0, "speechd._test.AutomaticTest: \(result.output)")
            #expect(result.output.contains("Ran 1 test"))
        }

        /// Socket activation, as a socket unit does it: `systemd-socket-activate` holds the
        /// socket before speakd runs, the first client's connection starts speakd with it, and
        /// the socket is left listening when speakd exits. Without `--ssip` (the system unit,
        /// whose SSIP is off until its socket unit is enabled) the socket alone turns SSIP on.
        @Test(arguments: [true, false]) func aSocketMadeBeforeSpeakdIsServedAndOutlivesIt(withSetting: Bool)
            async throws
        {
            let pulse = try await PulseAudioServer.start()
            let recorder = try await MonitorRecorder.start(pulse)
            let directory = URL(fileURLWithPath: "/tmp/speakd-ssip-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("speechd.sock").path
            let log = directory.appendingPathComponent("speakd.log").path
            let passed = pulse.environment.keys.sorted().flatMap { ["-E", $0] }
            let activator = try ChildProcess(
                "/usr/bin/systemd-socket-activate",
                ["-l", path, "--fdname=ssip"] + passed + [
                    BuiltProduct.path("speakd"), "--socket", directory.appendingPathComponent("speakd.sock").path,
                    "--http", "none", "--audio", "pulse",
                ] + (withSetting ? ["--ssip", path] : []),
                environment: pulse.clientProcessEnvironment, output: log)
            let deadline = ContinuousClock.now + .seconds(5)
            while !FileManager.default.fileExists(atPath: path), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            var environment = ProcessInfo.processInfo.environment
            environment["SPEECHD_ADDRESS"] = "unix_socket:\(path)"
            environment["SPEECHD_CMD"] = "/bin/false"
            let clientLog = directory.appendingPathComponent("spd-say.log").path
            let client = try ChildProcess(
                "/usr/bin/spd-say", ["-w", "Started by its socket."], environment: environment, output: clientLog)
            let status = await client.wait(timeout: .seconds(30))
            let daemonLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(status == 0, "spd-say: \((try? String(contentsOfFile: clientLog, encoding: .utf8)) ?? "")")
            #expect(daemonLog.contains("listening for SSIP on systemd's socket"), "\(daemonLog)")
            activator.send(SIGTERM)
            #expect(await activator.wait(timeout: .seconds(10)) == 0)
            var info = stat()
            #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK, "the socket is gone")
            try await Task.sleep(for: .milliseconds(200))
            let samples = await recorder.stop()
            await pulse.stop()
            let recording = Recording(samples: samples, sampleRate: recorder.sampleRate, recorder: recorder)
            #expect(recording.segments(minimumSilence: 0.5).count == 1, "not heard once")
        }

        @Test func badInputGetsProtocolErrorsAndTheDaemonGoesOn() async throws {
            let ssip = try await SSIPDaemon.start()
            let client = try SSIPTestClient(path: ssip.path)
            // An error may carry a reason line before its final line; clients read the code.
            #expect(
                try client.command("FROBNICATE now") == ["500-unknown command 'FROBNICATE'", "500 ERR INVALID COMMAND"])
            #expect(try client.command("").last == "500 ERR INVALID COMMAND")
            #expect(try client.command(String(repeating: "A", count: 10_000)).last == "500 ERR INVALID COMMAND")
            #expect(try client.command("SET SELF RATE 1000") == ["409 ERR RATE TOO HIGH"])
            #expect(try client.command("SET SELF PITCH -101") == ["412 ERR PITCH TOO LOW"])
            #expect(try client.command("SET SELF RATE fast") == ["511 ERR PARAMETER NOT A NUMBER"])
            #expect(try client.command("SET SELF SSML_MODE maybe") == ["513 ERR PARAMETER NOT ON OR OFF"])
            #expect(try client.command("SET SELF PRIORITY urgent") == ["408 ERR UNKNOWN PRIORITY"])
            #expect(try client.command("SET SELF LANGUAGE not_a_tag!").last == "302 ERR COULDNT SET LANGUAGE")
            #expect(try client.command("STOP") == ["510 ERR MISSING PARAMETER"])
            #expect(try client.command("CANCEL 0") == ["406 ERR ID DOESNT EXIST"])
            // CHAR is one character, as speech-dispatcher's is: a longer argument is not spelt out.
            let longChar = try client.command("CHAR " + String(repeating: "7", count: 3_000))
            #expect(longChar.last == "514 ERR PARAMETER INVALID")
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            client.send(Array("caf".utf8) + [0xC3, 0x28] + Array("\r\n.\r\n".utf8))
            #expect(try client.reply() == ["501 ERR INVALID ENCODING"])
            client.send(Array("SET SELF CLIENT_NAME ".utf8) + [0xFF, 0xFE] + Array("\r\n".utf8))
            #expect(try client.reply() == ["501 ERR INVALID ENCODING"])
            // A message whose terminator never comes is not spoken, and its connection's end
            // costs nothing.
            do {
                let leaving = try SSIPTestClient(path: ssip.path)
                #expect(try leaving.command("SPEAK") == ["230 OK RECEIVING DATA"])
                leaving.send(Array("Never finished\r\n".utf8))
            }
            // Still answering, and still speaking.
            #expect(try client.command("HISTORY GET CLIENT_ID").last == "245 OK CLIENT ID SENT")
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let queued = try client.command("Still here.\r\n.")
            #expect(queued.last == "225 OK MESSAGE QUEUED")
            #expect(await ssip.speakd.events.wait(timeout: .seconds(10)) { $0.contains { $0.type == .finished } })
            #expect(ssip.speakd.events.events.filter { $0.type == .queued }.map(\.text) == ["Still here."])
            #expect(try client.command("QUIT") == ["231 HAPPY HACKING"])
            #expect(ssip.speakd.daemon.isRunning)
            _ = await ssip.stop()
        }

        @Test func speakUnstuffsDotsAndNotifiesInOrderAfterItsReply() async throws {
            let ssip = try await SSIPDaemon.start()
            let client = try SSIPTestClient(path: ssip.path)
            let id = try #require(client.command("HISTORY GET CLIENT_ID").first.map { String($0.dropFirst(4)) })
            #expect(try client.command("SET SELF CLIENT_NAME test:ssip:main") == ["208 OK CLIENT NAME SET"])
            #expect(try client.command("SET SELF NOTIFICATION ALL on") == ["220 OK NOTIFICATION SET"])
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let queued = try client.command("..A line that starts with a dot.\r\nAnd a second line.\r\n.")
            #expect(queued.count == 2 && queued.last == "225 OK MESSAGE QUEUED", "\(queued)")
            let message = try #require(queued.first.map { String($0.dropFirst(4)) })
            // Notifications follow the reply: BEGIN, then END, each naming message and client.
            #expect(try client.reply() == ["701-\(message)", "701-\(id)", "701 BEGIN"])
            #expect(try client.reply(timeout: 10) == ["702-\(message)", "702-\(id)", "702 END"])
            // A voice named as LIST SYNTHESIS_VOICES names it speaks its language.
            let voices = try client.command("LIST SYNTHESIS_VOICES de")
            #expect(voices.last == "249 OK VOICE LIST SENT")
            #expect(voices.contains("249-German\tde\tnone"), "\(voices)")
            #expect(try client.command("SET SELF SYNTHESIS_VOICE German") == ["209 OK VOICE SET"])
            #expect(try client.command("GET LANGUAGE") == ["251-de", "251 OK GET RETURNED"])
            #expect(try client.command("SET SELF LANGUAGE en") == ["201 OK LANGUAGE SET"])
            // The event stream may come a moment after the notification.
            await ssip.speakd.events.wait(timeout: .seconds(5)) { events in events.contains { $0.type == .finished } }
            let finished = ssip.speakd.events.events.filter { $0.type == .finished }
            #expect(finished.map(\.text) == [".A line that starts with a dot.\nAnd a second line."])
            // A message cut off by shutdown still gets its one CANCELED before the socket closes.
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let long = try client.command(String(repeating: "Shutting down now is fine. ", count: 10) + "\r\n.")
            let second = try #require(long.first.map { String($0.dropFirst(4)) })
            #expect(try client.reply(timeout: 10) == ["701-\(second)", "701-\(id)", "701 BEGIN"])
            let (status, _) = await ssip.speakd.daemon.stop()
            #expect(status == 0)
            #expect(try client.reply(timeout: 5) == ["703-\(second)", "703-\(id)", "703 CANCELED"])
            _ = await ssip.stop()
        }

        @Test func ssmlMarksPauseAndResumeAreNotified() async throws {
            let ssip = try await SSIPDaemon.start()
            let client = try SSIPTestClient(path: ssip.path)
            let id = try #require(client.command("HISTORY GET CLIENT_ID").first.map { String($0.dropFirst(4)) })
            #expect(try client.command("SET SELF NOTIFICATION ALL on") == ["220 OK NOTIFICATION SET"])
            #expect(try client.command("SET SELF SSML_MODE on") == ["219 OK SSML MODE SET"])
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let queued = try client.command(
                "<speak>Platform <mark name=\"four\"/>four is <mark name=\"closed\"/>closed.</speak>\r\n.")
            let message = try #require(queued.first.map { String($0.dropFirst(4)) })
            #expect(try client.reply() == ["701-\(message)", "701-\(id)", "701 BEGIN"])
            #expect(try client.reply() == ["700-\(message)", "700-\(id)", "700-four", "700 INDEX MARK"])
            #expect(try client.reply() == ["700-\(message)", "700-\(id)", "700-closed", "700 INDEX MARK"])
            #expect(try client.reply() == ["702-\(message)", "702-\(id)", "702 END"])

            #expect(try client.command("SET SELF SSML_MODE off") == ["219 OK SSML MODE SET"])
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let long = try client.command(String(repeating: "Pausing this is fine. ", count: 10) + "\r\n.")
            let second = try #require(long.first.map { String($0.dropFirst(4)) })
            #expect(try client.reply() == ["701-\(second)", "701-\(id)", "701 BEGIN"])
            try await Task.sleep(for: .milliseconds(300))
            #expect(try client.command("PAUSE self") == ["211 OK PAUSED"])
            #expect(try client.reply() == ["704-\(second)", "704-\(id)", "704 PAUSED"])
            #expect(try client.command("RESUME self") == ["212 OK RESUMED"])
            #expect(try client.reply() == ["705-\(second)", "705-\(id)", "705 RESUMED"])
            #expect(try client.command("CANCEL self") == ["213 OK CANCELED"])
            #expect(try client.reply() == ["703-\(second)", "703-\(id)", "703 CANCELED"])
            _ = await ssip.stop()
        }

        /// A high announcement interrupts an SSIP message; the message resumes after it, from
        /// the word it was cut off in, and ends with 702, never 703, so a client that waits for
        /// each message's end (Chromium) goes on speaking without a `cancel()`.
        @Test func aMessageInterruptedBySpeakdResumesFromItsWordWithoutCanceled() async throws {
            let ssip = try await SSIPDaemon.start()
            let client = try SSIPTestClient(path: ssip.path)
            let id = try #require(client.command("HISTORY GET CLIENT_ID").first.map { String($0.dropFirst(4)) })
            #expect(try client.command("SET SELF NOTIFICATION ALL on") == ["220 OK NOTIFICATION SET"])
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let text = "This message is interrupted by a platform announcement, then spoken again."
            let message = try #require(client.command(text + "\r\n.").first.map { String($0.dropFirst(4)) })
            #expect(try client.reply() == ["701-\(message)", "701-\(id)", "701 BEGIN"])
            try await Task.sleep(for: .milliseconds(1_500))
            let platform = try await ssip.speakd.accept(announcement("Attention please.", priority: .high))
            // The next notification is the message's end: no CANCELED, no second BEGIN.
            #expect(try client.reply(timeout: 20) == ["702-\(message)", "702-\(id)", "702 END"])
            await ssip.speakd.events.wait(timeout: .seconds(5)) { events in
                events.filter { $0.type == .finished }.count == 3
            }
            let finished = ssip.speakd.events.events.filter { $0.type == .finished }
            #expect(finished.map(\.reason) == [.interrupted, .completed, .completed], "\(finished)")
            #expect(finished.prefix(2).map(\.text) == [text, "Attention please."])
            #expect(finished.dropFirst().first?.id == platform)
            // Resumed, not restarted: the rest of the text, from the start of a word.
            let rest = try #require(finished.last?.text)
            #expect(text.hasSuffix(rest) && rest.count < text.count - 10, "resumed with '\(rest)'")
            #expect(rest.first?.isLetter == true && text.dropLast(rest.count).last == " ", "resumed with '\(rest)'")
            let recording = await ssip.stop()
            let segments = recording.segments(minimumSilence: 0.2)
            #expect(segments.count >= 3, "interrupted, platform, the rest")
        }

        /// `progress` keeps only the newest of a series (the last is always heard); a
        /// `notification` is dropped while anything speaks; each gets its one 702 or 703.
        @Test func progressKeepsTheNewestAndNotificationIsDroppedWhenBusy() async throws {
            let ssip = try await SSIPDaemon.start()
            let client = try SSIPTestClient(path: ssip.path)
            #expect(try client.command("SET SELF NOTIFICATION END on") == ["220 OK NOTIFICATION SET"])
            #expect(try client.command("SET SELF NOTIFICATION CANCEL on") == ["220 OK NOTIFICATION SET"])
            #expect(try client.command("SET SELF PRIORITY progress") == ["202 OK PRIORITY SET"])
            var ids: [String] = []
            for percent in [10, 20, 30] {
                #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
                let queued = try client.command("Completed \(percent) percent of the long task.\r\n.")
                ids.append(try #require(queued.first.map { String($0.dropFirst(4)) }))
            }
            #expect(try client.command("SET SELF PRIORITY notification") == ["202 OK PRIORITY SET"])
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let notice = try #require(client.command("You have mail.\r\n.").first.map { String($0.dropFirst(4)) })
            var ends: [String: String] = [:]
            while ends.count < 4 {
                let reply = try client.reply(timeout: 15)
                ends[String(reply[0].dropFirst(4))] = reply.last
            }
            #expect(ends[ids[0]] == "703 CANCELED")
            #expect(ends[ids[1]] == "703 CANCELED")
            #expect(ends[ids[2]] == "702 END")
            #expect(ends[notice] == "703 CANCELED")
            await ssip.speakd.events.wait(timeout: .seconds(5)) { events in
                events.filter { $0.type == .finished }.count == 4
            }
            let heard = ssip.speakd.events.events.filter { $0.type == .finished && $0.reason == .completed }
            #expect(heard.map(\.text) == ["Completed 30 percent of the long task."])
            _ = await ssip.stop()
        }

        /// speech-dispatcher's rules between two clients: `text` replaces older text of any
        /// client (speaking or waiting, 703); `message` cancels text and queues behind message;
        /// `important` stops a speaking message (703) and goes before the waiting one;
        /// `notification` is dropped while anything else speaks; speakd's own announcements are
        /// never cut off by any of them.
        @Test(.timeLimit(.minutes(2))) func ssipPrioritiesFollowSpeechDispatchersRulesAcrossTwoClients()
            async throws
        {
            let ssip = try await SSIPDaemon.start()
            let alice = try SSIPTestClient(path: ssip.path)
            let bob = try SSIPTestClient(path: ssip.path)
            for client in [alice, bob] {
                #expect(try client.command("SET SELF NOTIFICATION ALL on") == ["220 OK NOTIFICATION SET"])
            }
            let long = "is long enough to be still speaking when the next message comes in."
            // text replaces older text, from any client, speaking or waiting.
            let text1 = try alice.speak("Alice's first text \(long)", priority: "text")
            _ = try alice.waitFor(701, of: text1)
            let text2 = try bob.speak("Bob's text \(long)", priority: "text")
            #expect(try alice.waitFor(703, of: text1).last == "703 CANCELED")
            let text3 = try alice.speak("Alice's second text \(long)", priority: "text")
            #expect(try bob.waitFor(703, of: text2).last == "703 CANCELED")
            // message cancels text, speaking or waiting, and queues behind message.
            _ = try alice.waitFor(701, of: text3)
            let message1 = try bob.speak("Bob's message \(long)", priority: "message")
            #expect(try alice.waitFor(703, of: text3).last == "703 CANCELED")
            _ = try bob.waitFor(701, of: message1)
            let message2 = try alice.speak("Alice's message, which waits its turn.", priority: "message")
            // important stops the speaking message and goes before the waiting one.
            let important = try bob.speak("Bob's important message.", priority: "important")
            #expect(try bob.waitFor(703, of: message1).last == "703 CANCELED")
            _ = try bob.waitFor(701, of: important)
            // A notification is dropped while anything else speaks.
            let notice = try bob.speak("Bob's notification.", priority: "notification")
            #expect(try bob.waitFor(703, of: notice).last == "703 CANCELED")
            #expect(try bob.waitFor(702, of: important).last == "702 END")
            #expect(try alice.waitFor(702, of: message2, timeout: 15).last == "702 END")

            // speakd's own announcements: neither important nor message cuts one off.
            let platform = try await ssip.speakd.accept(announcement("Platform announcement \(long)", priority: .low))
            #expect(await ssip.speakd.events.waitFor(.started, of: platform) != nil)
            let important2 = try alice.speak("Alice's important message.", priority: "important")
            let message3 = try bob.speak("Bob's last message.", priority: "message")
            #expect(try alice.waitFor(702, of: important2, timeout: 15).last == "702 END")
            #expect(try bob.waitFor(702, of: message3, timeout: 15).last == "702 END")

            await ssip.speakd.events.wait(timeout: .seconds(5)) { events in
                events.filter { $0.type == .finished }.count >= 10
            }
            let heard = ssip.speakd.events.events.filter { $0.type == .finished && $0.reason == .completed }
            #expect(
                heard.map(\.text) == [
                    "Bob's important message.", "Alice's message, which waits its turn.",
                    "Platform announcement \(long)", "Alice's important message.", "Bob's last message.",
                ], "\(heard.map(\.text))")
            let events = ssip.speakd.events.events
            _ = await ssip.stop()
            // Exactly one finished event for each of the ten.
            let finished = events.filter { $0.type == .finished }
            #expect(finished.count == 10 && Set(finished.map(\.id)).count == 10, "\(finished.map(\.text))")
        }

        /// At `--max-connections` a further SSIP connection is closed at once; the open ones,
        /// idle or not, keep working, and a place freed is taken again.
        @Test func connectionsAboveTheLimitAreClosedAndTheOpenOnesKept() async throws {
            let directory = URL(fileURLWithPath: "/tmp/speakd-ssip-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("speechd.sock").path
            let speakd = try await SpeakdProcess.start(
                audio: "null", arguments: ["--ssip", path, "--max-connections", "3"])
            var open = try (0..<3).map { _ in try SSIPTestClient(path: path) }
            for client in open { #expect(try client.command("HISTORY GET CLIENT_ID").last == "245 OK CLIENT ID SENT") }
            let refused = try SSIPTestClient(path: path)
            #expect(throws: SSIPTestClient.Failure.self) { try refused.command("HISTORY GET CLIENT_ID") }
            #expect(try open[0].command("QUIT") == ["231 HAPPY HACKING"])
            open.removeFirst()
            try await Task.sleep(for: .milliseconds(200))
            let again = try SSIPTestClient(path: path)
            #expect(try again.command("HISTORY GET CLIENT_ID").last == "245 OK CLIENT ID SENT")
            for client in open { #expect(try client.command("HISTORY GET CLIENT_ID").last == "245 OK CLIENT ID SENT") }
            let (status, _) = await speakd.stop()
            #expect(status == 0)
        }

        /// 50 SSIP clients at once (`scripts/check-ssip-soak.py`), each cancelling its own or
        /// everything or disconnecting at random: every message answered 225 finishes exactly
        /// once, and every client that stayed gets exactly one 702 or 703 per message of its own.
        @Test func fiftyClientsWithRandomCancelsAndDisconnectsLoseAndDoubleNothing() async throws {
            let directory = URL(fileURLWithPath: "/tmp/speakd-ssip-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("speechd.sock").path
            let speakd = try await SpeakdProcess.start(audio: "null", arguments: ["--ssip", path])
            let events = EventStreamRecorder(client: speakd.unixClient)
            try await speakd.waitForEventStreams(1)
            let result = try await PythonTools.script("check-ssip-soak.py", [path, "50", "7"], timeout: .seconds(120))
            struct Summary: Decodable {
                var queued: [String]
                var problems: [String]
            }
            let summary = try JSONDecoder().decode(
                Summary.self, from: Data(try #require(result.output.split(separator: "\n").last).utf8))
            #expect(result.status == 0 && summary.problems.isEmpty, "\(summary.problems)")
            #expect(summary.queued.count > 50)
            let settled = await events.wait(timeout: .seconds(60)) { events in
                events.filter { $0.type == .finished }.count >= summary.queued.count
            }
            #expect(settled)
            try await Task.sleep(for: .milliseconds(300))
            var finished: [String: Int] = [:]
            for event in events.events where event.type == .finished { finished[event.text, default: 0] += 1 }
            for text in summary.queued { #expect(finished[text] == 1, "\(text) finished \(finished[text] ?? 0) times") }
            #expect(Set(finished.keys) == Set(summary.queued))
            events.stop()
            let (status, _) = await speakd.stop()
            #expect(status == 0)
        }

        /// 2,000 idle SSIP connections (`scripts/check-ssip-idle.py`): one more client still
        /// speaks to its END, and speakd grows by less than 40 KiB per connection.
        @Test func twoThousandIdleConnectionsCostLittleAndSpeakingGoesOn() async throws {
            let directory = URL(fileURLWithPath: "/tmp/speakd-ssip-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("speechd.sock").path
            let speakd = try await SpeakdProcess.start(audio: "null", arguments: ["--ssip", path])
            let result = try await PythonTools.script(
                "check-ssip-idle.py", [path, "2000", "\(speakd.pid)"], timeout: .seconds(60))
            struct Summary: Decodable {
                var opened: Int
                var rssBeforeKiB: Int
                var rssAfterKiB: Int
                var ended: String
            }
            let line = try #require(result.output.split(separator: "\n").last, "\(result.output)")
            let summary = try JSONDecoder().decode(Summary.self, from: Data(line.utf8))
            #expect(result.status == 0, "\(result.output)")
            #expect(summary.opened == 2_000)
            #expect(summary.ended == "702 END")
            let perConnection = Double(summary.rssAfterKiB - summary.rssBeforeKiB) / 2_000
            #expect(perConnection < 40, "\(perConnection) KiB per idle SSIP connection")
            let (status, _) = await speakd.stop()
            #expect(status == 0)
        }

        @Test func aTextThatCrashesTheEngineEndsItsMessageWithCanceled() async throws {
            let ssip = try await SSIPDaemon.start()
            let client = try SSIPTestClient(path: ssip.path)
            let id = try #require(client.command("HISTORY GET CLIENT_ID").first.map { String($0.dropFirst(4)) })
            #expect(try client.command("SET SELF NOTIFICATION END on") == ["220 OK NOTIFICATION SET"])
            #expect(try client.command("SET SELF NOTIFICATION CANCEL on") == ["220 OK NOTIFICATION SET"])
            let crasher = try EngineWorkerCrashTests.crasher("dotted-abbreviations.txt")
            // Dot-stuffed, as a client sends it.
            let stuffed = crasher.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.hasPrefix(".") ? "." + $0 : String($0) }.joined(separator: "\r\n")
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let crashing = try #require(client.command(stuffed + "\r\n.").first.map { String($0.dropFirst(4)) })
            #expect(try client.reply(timeout: 15).last == "703 CANCELED")
            await ssip.speakd.events.wait(timeout: .seconds(5)) { events in events.contains { $0.type == .finished } }
            let failed = ssip.speakd.events.events.first { $0.type == .finished }
            #expect(failed?.reason == .failed, "\(String(describing: failed))")
            #expect(try client.command("SPEAK") == ["230 OK RECEIVING DATA"])
            let next = try #require(client.command("Still speaking.\r\n.").first.map { String($0.dropFirst(4)) })
            #expect(next != crashing)
            #expect(try client.reply(timeout: 15) == ["702-\(next)", "702-\(id)", "702 END"])
            _ = await ssip.stop()
        }
    }
}

/// A blocking SSIP client on a Unix socket: sends lines, reads whole replies.
final class SSIPTestClient {
    private let descriptor: Int32
    private var buffer: [UInt8] = []

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0, let address = UnixSocketAddress(path: path) else {
            throw Failure(description: "no socket")
        }
        let connected = address.withSocketAddress { connect(descriptor, $0, $1) == 0 }
        guard connected else { throw Failure(description: "cannot connect to \(path): errno \(errno)") }
    }

    deinit { close(descriptor) }

    func send(_ bytes: [UInt8]) {
        // MSG_NOSIGNAL: a socket the daemon closed answers EPIPE rather than killing the runner.
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Notifications that arrived while waiting for a command's reply, oldest first.
    private var notifications: [[String]] = []

    /// Sends `line` with CR LF and reads its reply; notifications before it are kept for `reply()`.
    func command(_ line: String) throws -> [String] {
        send(Array((line + "\r\n").utf8))
        while true {
            let reply = try readReply()
            guard reply.last?.hasPrefix("7") == true else { return reply }
            notifications.append(reply)
        }
    }

    /// `SET SELF PRIORITY priority`, then `SPEAK` of `text`; returns the message id.
    func speak(_ text: String, priority: String) throws -> String {
        guard try command("SET SELF PRIORITY \(priority)") == ["202 OK PRIORITY SET"],
            try command("SPEAK") == ["230 OK RECEIVING DATA"]
        else { throw Failure(description: "SPEAK refused") }
        let reply = try command(text + "\r\n.")
        guard reply.count == 2, reply[0].hasPrefix("225-") else { throw Failure(description: "SPEAK: \(reply)") }
        return String(reply[0].dropFirst(4))
    }

    /// Waits for notification `code` of message `id`, skipping every other notification.
    @discardableResult
    func waitFor(_ code: Int, of id: String, timeout: Double = 10) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw Failure(description: "no \(code) of message \(id) within \(timeout) s") }
            let reply = try reply(timeout: left)
            if reply.first == "\(code)-\(id)" { return reply }
        }
    }

    /// The next notification (or, before any command, reply).
    func reply(timeout: Double = 5) throws -> [String] {
        notifications.isEmpty ? try readReply(timeout: timeout) : notifications.removeFirst()
    }

    /// Reads one reply or notification: lines up to the first whose fourth character is a space.
    private func readReply(timeout: Double = 5) throws -> [String] {
        var lines: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(buffer[..<end])
                buffer.removeFirst(end + 1)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                let text = String(decoding: line, as: UTF8.self)
                lines.append(text)
                if text.utf8.count < 4 || Array(text.utf8)[3] == UInt8(ascii: " ") { return lines }
                continue
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw Failure(description: "no reply within \(timeout) s; so far \(lines)") }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000)) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { throw Failure(description: "connection closed; so far \(lines)") }
            buffer += chunk[..<count]
        }
    }
}
