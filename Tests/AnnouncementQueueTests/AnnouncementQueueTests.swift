import AnnouncementQueue
import SpeakAPI
import SpeechModel
import Testing

/// A row of the priority table: what is speaking, what arrives, and whether it interrupts.
struct PriorityCase: CustomTestStringConvertible, Sendable {
    var speaking: AnnouncementPriority
    var new: AnnouncementPriority
    var queue: Bool
    var interrupts: Bool

    var testDescription: String {
        "\(new)\(new == .default ? (queue ? " queue:true" : " queue:false") : "") over \(speaking): "
            + (interrupts ? "interrupts" : "waits")
    }

    static let table: [PriorityCase] = [
        PriorityCase(speaking: .low, new: .low, queue: true, interrupts: false),
        PriorityCase(speaking: .default, new: .low, queue: true, interrupts: false),
        PriorityCase(speaking: .high, new: .low, queue: true, interrupts: false),
        PriorityCase(speaking: .low, new: .low, queue: false, interrupts: false),
        PriorityCase(speaking: .low, new: .default, queue: true, interrupts: false),
        PriorityCase(speaking: .default, new: .default, queue: true, interrupts: false),
        PriorityCase(speaking: .high, new: .default, queue: true, interrupts: false),
        PriorityCase(speaking: .low, new: .default, queue: false, interrupts: true),
        PriorityCase(speaking: .default, new: .default, queue: false, interrupts: true),
        PriorityCase(speaking: .high, new: .default, queue: false, interrupts: false),
        PriorityCase(speaking: .low, new: .high, queue: true, interrupts: true),
        PriorityCase(speaking: .default, new: .high, queue: true, interrupts: true),
        PriorityCase(speaking: .high, new: .high, queue: true, interrupts: false),
        PriorityCase(speaking: .high, new: .high, queue: false, interrupts: false),
    ]
}

@Suite("Announcement queue", .timeLimit(.minutes(1)))
struct AnnouncementQueueTests {
    @Test func speaksOneAndFinishesCompleted() async throws {
        try await withQueue { harness in
            let submission = try await harness.submit("Hello")
            #expect(submission.state == .speaking)
            #expect(submission.position == 0)
            await harness.speaker.waitForStarts(1)
            harness.speaker.complete(submission.id, voice: "gmw/en")
            let finished = await harness.queue.finished(id: submission.id)
            #expect(finished?.success == true)
            #expect(finished?.reason == .completed)
            #expect(finished?.voice == "gmw/en")
            #expect(finished?.text == "Hello")
            #expect(finished?.priority == .default)
            await harness.shutDown()
            #expect(harness.recorder.events.map(\.type) == [.queued, .started, .finished])
        }
    }

    @Test(arguments: AnnouncementPriority.allCases, [true, false])
    func anythingSpeaksAtOnceWhenIdle(priority: AnnouncementPriority, queue: Bool) async throws {
        try await withQueue { harness in
            let submission = try await harness.submit("Now", priority: priority, queue: queue)
            #expect(submission.state == .speaking)
            await harness.speaker.waitForStarts(1)
            #expect(harness.speaker.started == [submission.id])
        }
    }

    @Test(arguments: PriorityCase.table)
    func priorityTable(_ row: PriorityCase) async throws {
        try await withQueue { harness in
            let first = try await harness.submit("first", priority: row.speaking)
            await harness.speaker.waitForStarts(1)
            let second = try await harness.submit("second", priority: row.new, queue: row.queue)
            #expect(second.state == .queued)
            #expect(second.position == 1)

            if row.interrupts {
                // The decision is taken inside `submit`, so the speaker's task is already cancelled.
                try #require(harness.speaker.cancelled == [first.id])
                let finished = await harness.recorder.waitForFinished(first.id)
                #expect(finished?.success == false)
                #expect(finished?.reason == .interrupted)
                await harness.speaker.waitForStarts(2)
            } else {
                try #require(harness.speaker.cancelled.isEmpty)
                #expect(await harness.queue.status(id: first.id)?.state == .speaking)
                harness.speaker.complete(first.id)
                let finished = await harness.recorder.waitForFinished(first.id)
                #expect(finished?.success == true)
                #expect(finished?.reason == .completed)
                await harness.speaker.waitForStarts(2)
            }
            #expect(harness.speaker.started == [first.id, second.id])
            #expect(await harness.queue.status(id: second.id)?.state == .speaking)
            harness.speaker.complete(second.id)
            #expect(await harness.queue.finished(id: second.id)?.reason == .completed)
            await harness.shutDown()
            #expect(!harness.speaker.overlapped)
        }
    }

    @Test func interruptedHighKeepsWaitingOnes() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking", priority: .default)
            await harness.speaker.waitForStarts(1)
            let waitingLow = try await harness.submit("low", priority: .low)
            let waitingDefault = try await harness.submit("default")
            let urgent = try await harness.submit("urgent", priority: .high)
            #expect(await harness.recorder.waitForFinished(speaking.id)?.reason == .interrupted)
            await harness.speaker.waitForStarts(2)
            #expect(await harness.queue.snapshot().map(\.id) == [urgent.id, waitingDefault.id, waitingLow.id])
            await speakAll(harness, count: 4)
            #expect(harness.speaker.started == [speaking.id, urgent.id, waitingDefault.id, waitingLow.id])
        }
    }

    @Test func waitingOnesAreSpokenByPriorityThenFirstComeFirstServed() async throws {
        try await withQueue { harness in
            let high0 = try await harness.submit("h0", priority: .high)
            await harness.speaker.waitForStarts(1)
            let low1 = try await harness.submit("l1", priority: .low)
            let default1 = try await harness.submit("d1")
            let high1 = try await harness.submit("h1", priority: .high)
            let low2 = try await harness.submit("l2", priority: .low)
            let default2 = try await harness.submit("d2")
            let high2 = try await harness.submit("h2", priority: .high)
            let expected = [high0, high1, high2, default1, default2, low1, low2].map(\.id)

            let snapshot = await harness.queue.snapshot()
            #expect(snapshot.map(\.id) == expected)
            #expect(snapshot.map(\.position) == Array(0..<7))
            #expect(snapshot.map(\.state) == [.speaking] + Array(repeating: .queued, count: 6))
            #expect(harness.speaker.cancelled.isEmpty)

            await speakAll(harness, count: 7)
            #expect(harness.speaker.started == expected)
            #expect(harness.recorder.finished.map(\.reason) == Array(repeating: .completed, count: 7))
        }
    }

    @Test func interruptingDefaultBehindAHighGoesFirstAmongDefaults() async throws {
        try await withQueue { harness in
            let high0 = try await harness.submit("h0", priority: .high)
            await harness.speaker.waitForStarts(1)
            let default1 = try await harness.submit("d1")
            let urgent1 = try await harness.submit("u1", queue: false)
            #expect(urgent1.position == 1)
            let high1 = try await harness.submit("h1", priority: .high)
            let urgent2 = try await harness.submit("u2", queue: false)
            // The newest interrupting default is the one its client wants heard now.
            let expected = [high0, high1, urgent2, urgent1, default1].map(\.id)
            #expect(await harness.queue.snapshot().map(\.id) == expected)
            #expect(harness.speaker.cancelled.isEmpty)
            await speakAll(harness, count: 5)
            #expect(harness.speaker.started == expected)
        }
    }

    @Test func laterInterruptionInterruptsTheInterrupter() async throws {
        try await withQueue { harness in
            let first = try await harness.submit("first")
            await harness.speaker.waitForStarts(1)
            let second = try await harness.submit("second", queue: false)
            await harness.speaker.waitForStarts(2)
            let third = try await harness.submit("third", queue: false)
            await harness.speaker.waitForStarts(3)
            #expect(harness.speaker.cancelled == [first.id, second.id])
            harness.speaker.complete(third.id)
            await harness.recorder.waitForFinished(third.id)
            #expect(harness.recorder.finished.map(\.reason) == [.interrupted, .interrupted, .completed])
        }
    }

    // MARK: Cancel

    @Test func cancelWaiting() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            let waiting = try await harness.submit("waiting")
            let after = try await harness.submit("after")
            #expect(try await harness.queue.cancel(id: waiting.id))
            let finished = await harness.recorder.waitForFinished(waiting.id)
            #expect(finished?.reason == .cancelled)
            #expect(finished?.success == false)
            #expect(try await harness.queue.cancel(id: waiting.id) == false)
            await #expect(throws: AnnouncementQueueError.unknownAnnouncement("unknown")) {
                try await harness.queue.cancel(id: "unknown")
            }
            #expect(harness.speaker.cancelled.isEmpty)
            #expect(await harness.queue.snapshot().map(\.id) == [speaking.id, after.id])
            await speakAll(harness, count: 2)
            #expect(harness.speaker.started == [speaking.id, after.id])
        }
    }

    @Test func cancelSpeakingStopsItAndStartsTheNext() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            let next = try await harness.submit("next", priority: .low)
            #expect(try await harness.queue.cancel(id: speaking.id))
            #expect(harness.speaker.cancelled == [speaking.id])
            #expect(try await harness.queue.cancel(id: speaking.id) == false)
            let finished = await harness.recorder.waitForFinished(speaking.id)
            #expect(finished?.reason == .cancelled)
            #expect(finished?.success == false)
            await harness.speaker.waitForStarts(2)
            #expect(harness.speaker.started == [speaking.id, next.id])
        }
    }

    @Test func cancelAll() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            var ids = [speaking.id]
            for priority in [AnnouncementPriority.low, .default, .high] {
                ids.append(try await harness.submit("\(priority)", priority: priority).id)
            }
            // The high interrupted the speaking one, which is stopping already.
            #expect(await harness.queue.cancelAll() == 3)
            for id in ids {
                await harness.recorder.waitForFinished(id)
            }
            #expect(Set(harness.recorder.finished.map(\.id)) == Set(ids))
            #expect(harness.recorder.finished(speaking.id)?.reason == .interrupted)
            #expect(harness.recorder.finished.filter { $0.reason == .cancelled }.count == 3)
            // On a loaded machine the queue may already have started the high when cancelAll runs
            // (the interrupted one stopped at once): then it is the one cancelled while speaking.
            // Nothing else ever starts.
            #expect(harness.speaker.started == [speaking.id] || harness.speaker.started == [speaking.id, ids[3]])
            #expect(await harness.queue.snapshot().isEmpty)
            #expect(await harness.queue.cancelAll() == 0)

            let later = try await harness.submit("later")
            #expect(later.state == .speaking)
        }
    }

    // MARK: Expiry

    @Test func waitingAnnouncementExpires() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            let expiring = try await harness.submit("expiring", expiresAfter: 5)
            let staying = try await harness.submit("staying")
            await harness.clock.waitForSleepers(1)
            harness.clock.advance(by: .milliseconds(4_900))
            #expect(await harness.queue.status(id: expiring.id)?.state == .queued)
            harness.clock.advance(by: .milliseconds(100))
            let finished = await harness.recorder.waitForFinished(expiring.id)
            #expect(finished?.reason == .expired)
            #expect(finished?.success == false)
            #expect(await harness.queue.snapshot().map(\.id) == [speaking.id, staying.id])
            await speakAll(harness, count: 2)
            #expect(harness.speaker.started == [speaking.id, staying.id])
        }
    }

    @Test func startedAnnouncementDoesNotExpire() async throws {
        try await withQueue { harness in
            let first = try await harness.submit("first")
            await harness.speaker.waitForStarts(1)
            let second = try await harness.submit("second", expiresAfter: 5)
            await harness.clock.waitForSleepers(1)
            harness.speaker.complete(first.id)
            await harness.speaker.waitForStarts(2)
            #expect(harness.clock.sleeperCount == 0)
            harness.clock.advance(by: .seconds(60))
            #expect(await harness.queue.status(id: second.id)?.state == .speaking)
            harness.speaker.complete(second.id)
            #expect(await harness.queue.finished(id: second.id)?.reason == .completed)
        }
    }

    @Test func announcementThatStartsAtOnceHasNoTimer() async throws {
        try await withQueue { harness in
            let now = try await harness.submit("now", expiresAfter: 0)
            #expect(now.state == .speaking)
            #expect(harness.clock.sleeperCount == 0)
            let zero = try await harness.submit("zero", expiresAfter: 0)
            #expect(await harness.recorder.waitForFinished(zero.id)?.reason == .expired)
            harness.speaker.complete(now.id)
            #expect(await harness.queue.finished(id: now.id)?.reason == .completed)
        }
    }

    // MARK: Capacity

    @Test func fullQueueDisplacesTheNewestOfTheLowestPriorityOrRefuses() async throws {
        try await withQueue(capacity: 3) { harness in
            let speaking = try await harness.submit("speaking", priority: .high)
            await harness.speaker.waitForStarts(1)
            let low1 = try await harness.submit("l1", priority: .low)
            let low2 = try await harness.submit("l2", priority: .low)
            let default1 = try await harness.submit("d1")

            // Full: a default displaces the newest low.
            let default2 = try await harness.submit("d2")
            #expect(await harness.recorder.waitForFinished(low2.id)?.reason == .discarded)
            #expect(harness.recorder.finished(low2.id)?.success == false)
            #expect(await harness.queue.snapshot().map(\.id) == [speaking.id, default1.id, default2.id, low1.id])

            // A low finds nothing lower and is refused without a trace.
            let eventCount = harness.recorder.events.count
            await #expect(throws: AnnouncementQueueError.queueFull) {
                try await harness.submit("l3", priority: .low)
            }
            // A high displaces the last low.
            let high1 = try await harness.submit("h1", priority: .high)
            #expect(await harness.recorder.waitForFinished(low1.id)?.reason == .discarded)
            // Now only defaults wait below the highs: a high displaces the newest default.
            let high2 = try await harness.submit("h2", priority: .high)
            #expect(await harness.recorder.waitForFinished(default2.id)?.reason == .discarded)
            // Highs only, nothing lower than a default: refused.
            let error = await #expect(throws: AnnouncementQueueError.self) {
                try await harness.submit("d3")
            }
            #expect(error == .queueFull)
            #expect(error?.message.contains("full") == true)

            await harness.recorder.waitForCount(eventCount + 4)
            let queuedTexts = harness.recorder.events.filter { $0.type == .queued }.map(\.text)
            #expect(!queuedTexts.contains("l3") && !queuedTexts.contains("d3"))
            #expect(await harness.queue.snapshot().map(\.id) == [speaking.id, high1.id, high2.id, default1.id])
        }
    }

    static let scheduled = AnnouncementOrigin(front: "schedule", detail: "id=s1 slot=now", schedule: "s1")
    static let ssip = AnnouncementOrigin(front: "ssip", detail: "client=orca connection=1")

    /// Schedules and SSIP clients fill their own shares: a live default is still accepted, and
    /// it is the next to start after the speaking one, ahead of every scheduled and SSIP
    /// default, even an interrupting one, which does not cut off the live one speaking either.
    @Test func aLiveDefaultGetsAPlaceAndTheNextTurnWhateverSchedulesAndSSIPFill() async throws {
        try await withQueue(capacity: 2, shareCapacity: 3) { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            var shared: [String] = []
            for index in 0..<3 {
                shared.append(try await harness.submit("s\(index)", origin: Self.scheduled).id)
                shared.append(try await harness.submit("p\(index)", origin: Self.ssip).id)
            }
            // The shares are full: more of them are refused.
            await #expect(throws: AnnouncementQueueError.queueFull) {
                try await harness.submit("s3", queue: false, origin: Self.scheduled)
            }
            await #expect(throws: AnnouncementQueueError.queueFull) {
                try await harness.submit("p3", origin: Self.ssip)
            }
            #expect(harness.speaker.cancelled.isEmpty)

            let live = try await harness.submit("live")
            #expect(live.state == .queued && live.position == 1)
            let second = try await harness.submit("live 2")
            #expect(second.position == 2)
            #expect(await harness.queue.snapshot().map(\.id) == [speaking.id, live.id, second.id] + shared)

            harness.speaker.complete(speaking.id)
            await harness.speaker.waitForStarts(2)
            #expect(harness.speaker.started == [speaking.id, live.id])
        }
    }

    /// At equal priority a scheduled or SSIP announcement never cuts off, nor goes before, a
    /// live one: an interrupting scheduled default waits behind the live defaults, first among
    /// its own.
    @Test func anInterruptingScheduledDefaultWaitsBehindLiveOnes() async throws {
        try await withQueue(capacity: 4, shareCapacity: 4) { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            let ssip = try await harness.submit("p", origin: Self.ssip)
            let urgent = try await harness.submit("s", queue: false, origin: Self.scheduled)
            let live = try await harness.submit("live")
            #expect(harness.speaker.cancelled.isEmpty)
            #expect(await harness.queue.snapshot().map(\.id) == [speaking.id, live.id, urgent.id, ssip.id])
            // A scheduled high still goes first, as the table says, and a live interrupting
            // default still cuts off a scheduled one.
            let high = try await harness.submit("h", priority: .high, origin: Self.scheduled)
            #expect(await harness.recorder.waitForFinished(speaking.id)?.reason == .interrupted)
            await harness.speaker.waitForStarts(2)
            #expect(harness.speaker.started.last == high.id)
            harness.speaker.complete(high.id)
            await harness.speaker.waitForStarts(3)
            #expect(harness.speaker.started.last == live.id)
        }
    }

    /// A full share displaces only its own, and a refused one gets no event at all (its front
    /// tells its sender: a schedule's slot is `skipped`, an SSIP message gets an error reply);
    /// live places are never taken for it.
    @Test func aFullShareDisplacesItsOwnOrRefuses() async throws {
        try await withQueue(capacity: 1, shareCapacity: 2) { harness in
            let speaking = try await harness.submit("speaking", priority: .high)
            await harness.speaker.waitForStarts(1)
            let liveLow = try await harness.submit("live low", priority: .low)
            let low = try await harness.submit("s low", priority: .low, origin: Self.scheduled)
            let scheduled = try await harness.submit("s default", origin: Self.scheduled)
            let ssip = try await harness.submit("p low", priority: .low, origin: Self.ssip)
            // A scheduled default finds a scheduled low below it: that one goes.
            let newer = try await harness.submit("s newer", origin: Self.scheduled)
            #expect(await harness.recorder.waitForFinished(low.id)?.reason == .discarded)
            // Nothing lower of its own: refused, though a live low and an SSIP low wait.
            let eventCount = harness.recorder.events.count
            let error = await #expect(throws: AnnouncementQueueError.self) {
                try await harness.submit("s refused", origin: Self.scheduled)
            }
            #expect(error == .queueFull)
            #expect(
                error?.message
                    == "the queue's places for scheduled announcements are full (2 waiting) and nothing of lower priority can be displaced"
            )
            // A live default is not refused for it: it displaces the live low.
            let live = try await harness.submit("live")
            #expect(await harness.recorder.waitForFinished(liveLow.id)?.reason == .discarded)
            await harness.recorder.waitForCount(eventCount + 2)
            #expect(!harness.recorder.events.contains { $0.text == "s refused" })
            #expect(
                await harness.queue.snapshot().map(\.id) == [speaking.id, live.id, scheduled.id, newer.id, ssip.id])
        }
    }

    @Test func capacityCountsWaitingOnly() async throws {
        try await withQueue(capacity: 0) { harness in
            let first = try await harness.submit("first")
            #expect(first.state == .speaking)
            await #expect(throws: AnnouncementQueueError.queueFull) {
                try await harness.submit("second")
            }
        }
    }

    // MARK: Shutdown

    @Test func shutdownFinishesEverythingAndEndsTheStreams() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            let waiting = try await harness.submit("waiting")
            let low = try await harness.submit("low", priority: .low, expiresAfter: 30)
            let waiter = Task { await harness.queue.finished(id: waiting.id) }
            let live = EventRecorder(harness.queue.events())

            await harness.queue.shutdown()
            #expect(harness.speaker.cancelled == [speaking.id])
            await harness.runner.value
            await harness.recorder.waitForEnd()
            await live.waitForEnd()
            for id in [speaking.id, waiting.id, low.id] {
                #expect(harness.recorder.finished(id)?.reason == .shutdown)
                #expect(harness.recorder.finished(id)?.success == false)
                #expect(live.finished(id)?.reason == .shutdown)
            }
            #expect(await waiter.value?.reason == .shutdown)
            #expect(harness.clock.sleeperCount == 0)
            #expect(await harness.queue.isRunning == false)
            await #expect(throws: AnnouncementQueueError.shuttingDown) {
                try await harness.submit("too late")
            }
            // A late subscriber is replayed the history, then the stream ends.
            let late = EventRecorder(harness.queue.events(after: 0))
            await late.waitForEnd()
            #expect(late.events == harness.recorder.events)
            await harness.queue.shutdown()
        }
    }

    @Test func cancellingRunShutsDown() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            harness.runner.cancel()
            await harness.runner.value
            await harness.recorder.waitForEnd()
            #expect(harness.recorder.finished(speaking.id)?.reason == .shutdown)
        }
    }

    @Test func nothingSpeaksBeforeRun() async throws {
        try await withQueue(running: false) { harness in
            let first = try await harness.submit("first")
            #expect(first.state == .queued)
            #expect(first.position == 0)
            #expect(harness.speaker.started.isEmpty)
            let runner = Task { await harness.queue.run() }
            await harness.speaker.waitForStarts(1)
            #expect(harness.speaker.started == [first.id])
            await harness.queue.shutdown()
            await runner.value
        }
    }

    // MARK: Audio failure

    @Test func failureWaitsForTheSpeakerWhileTimersRun() async throws {
        try await withQueue { harness in
            let failing = try await harness.submit("failing")
            await harness.speaker.waitForStarts(1)
            let expiring = try await harness.submit("expiring", expiresAfter: 10)
            let next = try await harness.submit("next")
            await harness.clock.waitForSleepers(1)

            harness.speaker.fail(failing.id, message: "PulseAudio connection lost")
            let failed = await harness.recorder.waitForFinished(failing.id)
            #expect(failed?.reason == .failed)
            #expect(failed?.success == false)
            #expect(failed?.detail == "PulseAudio connection lost")
            #expect(await harness.queue.isSpeakerAvailable == false)
            await harness.speaker.waitForAvailabilityCalls(1)
            #expect(harness.speaker.started == [failing.id])

            // New ones wait too, and waiting ones keep expiring.
            let arriving = try await harness.submit("arriving", priority: .high)
            #expect(arriving.state == .queued)
            #expect(arriving.position == 0)
            harness.clock.advance(by: .seconds(10))
            #expect(await harness.recorder.waitForFinished(expiring.id)?.reason == .expired)
            #expect(harness.speaker.started == [failing.id])
            #expect(harness.speaker.availabilityCalls == 1)

            harness.speaker.becomeAvailable()
            await harness.speaker.waitForStarts(2)
            #expect(await harness.queue.isSpeakerAvailable)
            #expect(harness.speaker.started == [failing.id, arriving.id])

            // A second failure waits again.
            harness.speaker.fail(arriving.id, message: "sink unavailable")
            await harness.speaker.waitForAvailabilityCalls(2)
            harness.speaker.becomeAvailable()
            await harness.speaker.waitForStarts(3)
            harness.speaker.complete(next.id)
            #expect(await harness.queue.finished(id: next.id)?.success == true)
        }
    }

    @Test func shutdownWhileWaitingForTheSpeaker() async throws {
        try await withQueue { harness in
            let failing = try await harness.submit("failing")
            await harness.speaker.waitForStarts(1)
            let waiting = try await harness.submit("waiting")
            harness.speaker.fail(failing.id, message: "gone")
            await harness.speaker.waitForAvailabilityCalls(1)
            // The fake ignores cancellation of `waitUntilAvailable`; shutdown must not wait for it.
            await harness.shutDown()
            #expect(harness.recorder.finished(waiting.id)?.reason == .shutdown)
            harness.speaker.becomeAvailable()
            #expect(await harness.queue.isSpeakerAvailable == false)
        }
    }

    @Test func speakerThatDoesNotStopIsGivenUpOn() async throws {
        try await withQueue { harness in
            harness.speaker.ignoresCancellation = true
            let stuck = try await harness.submit("stuck")
            await harness.speaker.waitForStarts(1)
            let urgent = try await harness.submit("urgent", priority: .high)
            #expect(harness.speaker.cancelled == [stuck.id])
            await harness.clock.waitForSleepers(1)
            harness.clock.advance(by: .milliseconds(1_900))
            #expect(await harness.queue.status(id: stuck.id)?.state == .speaking)
            harness.clock.advance(by: .milliseconds(100))
            let finished = await harness.recorder.waitForFinished(stuck.id)
            #expect(finished?.reason == .interrupted)
            #expect(finished?.detail?.contains("did not stop") == true)

            // Treated as a failed speaker: the next one waits until it is available again.
            await harness.speaker.waitForAvailabilityCalls(1)
            #expect(harness.speaker.started == [stuck.id])
            harness.speaker.ignoresCancellation = false
            harness.speaker.becomeAvailable()
            await harness.speaker.waitForStarts(2)
            #expect(harness.speaker.started == [stuck.id, urgent.id])

            // When the stuck call returns at last, nothing more is sent for it.
            harness.speaker.complete(stuck.id)
            harness.speaker.complete(urgent.id)
            await harness.recorder.waitForFinished(urgent.id)
            await harness.shutDown()
            #expect(harness.recorder.events.filter { $0.id == stuck.id }.map(\.type) == [.queued, .started, .finished])
        }
    }

    @Test func shutdownDoesNotWaitForeverForAStuckSpeaker() async throws {
        try await withQueue { harness in
            harness.speaker.ignoresCancellation = true
            let stuck = try await harness.submit("stuck")
            await harness.speaker.waitForStarts(1)
            let shutdown = Task { await harness.queue.shutdown() }
            await harness.clock.waitForSleepers(1)
            harness.clock.advance(by: .seconds(2))
            await shutdown.value
            await harness.runner.value
            await harness.recorder.waitForEnd()
            #expect(harness.recorder.finished(stuck.id)?.reason == .shutdown)
            harness.speaker.complete(stuck.id)
        }
    }

    // MARK: Status

    @Test func statusOfWaitingSpeakingFinishedAndUnknown() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking", priority: .low)
            await harness.speaker.waitForStarts(1)
            let waiting = try await harness.submit("waiting", priority: .low, expiresAfter: 30)

            let speakingStatus = try #require(await harness.queue.status(id: speaking.id))
            #expect(speakingStatus.state == .speaking)
            #expect(speakingStatus.position == 0)
            #expect(speakingStatus.text == "speaking")

            let waitingStatus = try #require(await harness.queue.status(id: waiting.id))
            #expect(waitingStatus.state == .queued)
            #expect(waitingStatus.position == 1)
            #expect(waitingStatus.priority == .low)

            harness.speaker.complete(speaking.id)
            await harness.speaker.waitForStarts(2)
            let finishedStatus = try #require(await harness.queue.status(id: speaking.id))
            #expect(finishedStatus.state == .finished)
            #expect(finishedStatus.position == nil)
            #expect(finishedStatus.success == true)
            #expect(finishedStatus.reason == .completed)
            #expect(await harness.queue.finished(id: speaking.id)?.reason == .completed)

            #expect(await harness.queue.status(id: "nope") == nil)
            #expect(await harness.queue.finished(id: "nope") == nil)
        }
    }

    @Test func finishedAnnouncementsAreRememberedBoundedly() async throws {
        let speaker = FakeSpeaker()
        let queue = AnnouncementQueue(speaker: speaker, capacity: 10, finishedMemory: 2)
        var ids: [String] = []
        for index in 0..<4 {
            ids.append(
                try await queue.submit(.unrendered("\(index)")).id)
        }
        #expect(await queue.cancelAll() == 4)
        #expect(await queue.status(id: ids[0]) == nil)
        #expect(await queue.status(id: ids[1]) == nil)
        #expect(await queue.status(id: ids[2])?.reason == .cancelled)
        #expect(await queue.finished(id: ids[3])?.reason == .cancelled)
        await queue.shutdown()
    }

    @Test func finishedWaitReturnsNilWhenItsTaskIsCancelled() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            let waiter = Task { await harness.queue.finished(id: speaking.id) }
            waiter.cancel()
            #expect(await waiter.value == nil)
        }
    }

    @Test func idsAreShortAndUnique() async throws {
        try await withQueue(capacity: 200) { harness in
            var ids = Set<String>()
            for index in 0..<200 {
                ids.insert(try await harness.submit("\(index)").id)
            }
            #expect(ids.count == 200)
            #expect(ids.allSatisfy { $0.count == 12 && $0.allSatisfy(\.isHexDigit) })
        }
    }
}

/// Lets the speaker finish announcements one after another until `count` have started and the last has finished.
func speakAll(_ harness: QueueHarness, count: Int) async {
    var completed = Set(harness.speaker.started.filter { harness.recorder.finished($0) != nil })
    while completed.count < count {
        await harness.speaker.waitForStarts(completed.count + 1)
        let id = harness.speaker.started[completed.count]
        harness.speaker.complete(id)
        await harness.recorder.waitForFinished(id)
        completed.insert(id)
    }
}
