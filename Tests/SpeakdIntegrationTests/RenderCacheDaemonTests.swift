import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// The render cache through the real daemon: `POST /v1/prerender` fills it, an announcement
    /// of the same text then plays from it, with the same word events as a fresh render; kept on
    /// disk, it plays so after a restart too.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct RenderCacheDaemonTests {
        /// A counter or gauge of `/metrics`.
        static func metric(_ name: String, _ client: SpeakHTTPClient) async throws -> Double {
            let page = String(decoding: try await client.send("GET", "/metrics").body, as: UTF8.self)
            let line = page.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            return line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? -1
        }

        @Test("Prerendered, an announcement plays from the cache with the words a fresh render has; private is 422")
        func prerenderThenPlayFromTheCache() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let client = daemon.unixClient
            let events = EventStreamRecorder(client: client, path: "/v1/events?progress=true")
            try await daemon.waitForEventStreams(1)
            let text = "The next train to Porto departs from platform four."

            func count(_ name: String) async throws -> Double {
                try await Self.metric("speakd_render_cache_\(name)", client)
            }
            // Uncached: rendered by the engine (and, for a first voice, its loudness measured),
            // its words as heard.
            var misses = try await count("misses_total")
            let fresh = try await post(["text": text, "pitch": 1.1], via: client, wait: true)
            let freshID = try fresh.decode(AnnouncementEvent.self).id
            #expect(try await count("misses_total") > misses)

            let hits = try await count("hits_total")
            misses = try await count("misses_total")
            let rendered = try await client.send(
                "POST", "/v1/prerender", headers: [("Content-Type", "application/json")],
                body: Array(try JSONSerialization.data(withJSONObject: ["text": "Gate twelve is now boarding."])))
            #expect(rendered.status == 200, "\(String(decoding: rendered.body, as: UTF8.self))")
            #expect(try rendered.decode(Prerendered.self).seconds > 0.5)
            #expect(try await count("misses_total") == misses + 1)
            misses = try await count("misses_total")
            let played = try await post(["text": "Gate twelve is now boarding."], via: client, wait: true)
            #expect(try played.decode(AnnouncementEvent.self).reason == .completed)
            #expect(try await count("hits_total") == hits + 1)
            #expect(try await count("misses_total") == misses, "played from the cache, nothing rendered")

            // The first text again: from memory, with the same words at the same places.
            let again = try await post(["text": text, "pitch": 1.1], via: client, wait: true)
            let againID = try again.decode(AnnouncementEvent.self).id
            #expect(try await count("hits_total") == hits + 2)
            #expect(try await count("misses_total") == misses)
            func words(_ id: String) -> [String] {
                events.events(for: id).filter { $0.type == .word }.map {
                    "\($0.word ?? "")@\($0.range?.location ?? -1)"
                }
            }
            _ = await events.waitForFinished([freshID, againID])
            #expect(!words(freshID).isEmpty)
            #expect(words(againID) == words(freshID))
            // Another pitch is another sound: rendered.
            _ = try await post(["text": text, "pitch": 1.2], via: client, wait: true)
            #expect(try await count("misses_total") > misses)
            #expect(try await count("hits_total") == hits + 2)

            let secret = try await client.send(
                "POST", "/v1/prerender", headers: [("Content-Type", "application/json")],
                body: Array(
                    try JSONSerialization.data(withJSONObject: ["text": "Your code is 4711.", "private": true])))
            #expect(secret.status == 422)
            #expect(secret.error?.error.field == "private")
            events.stop()
            await daemon.stop()
        }

        @Test("After a restart a render plays from disk with the same words; a private one leaves no file")
        func aRestartPlaysFromDisk() async throws {
            let state = URL(fileURLWithPath: "/tmp").appendingPathComponent(
                "speakd-state-\(UUID().uuidString.prefix(8))")
            defer { try? FileManager.default.removeItem(at: state) }
            let arguments = ["--state-dir", state.path]
            let text = "The next train to Porto departs from platform four."
            func files() -> [String] {
                (try? FileManager.default.contentsOfDirectory(atPath: state.appendingPathComponent("render-cache").path))
                    ?? []
            }

            var daemon = try await SpeakdProcess.start(audio: "null", arguments: arguments)
            var events = EventStreamRecorder(client: daemon.unixClient, path: "/v1/events?progress=true")
            try await daemon.waitForEventStreams(1)
            // The loudness calibration's render, made before the daemon answers, is kept too.
            let startEntries = try await Self.metric("speakd_render_cache_disk_entries", daemon.unixClient)
            let startFiles = files().count
            let fresh = try await post(["text": text], via: daemon.unixClient, wait: true)
            let freshID = try fresh.decode(AnnouncementEvent.self).id
            _ = await events.waitForFinished([freshID])
            let freshWords = events.events(for: freshID).filter { $0.type == .word }.map {
                "\($0.word ?? "")@\($0.range?.location ?? -1)"
            }
            #expect(try await Self.metric("speakd_render_cache_disk_entries", daemon.unixClient) == startEntries + 1)
            #expect(try await Self.metric("speakd_render_cache_disk_bytes", daemon.unixClient) > 10_000)
            _ = try await post(["text": "Your code is 4711.", "private": true], via: daemon.unixClient, wait: true)
            #expect(files().count == startFiles + 1, "\(files())")
            events.stop()
            await daemon.stop()

            daemon = try await SpeakdProcess.start(audio: "null", arguments: arguments)
            events = EventStreamRecorder(client: daemon.unixClient, path: "/v1/events?progress=true")
            try await daemon.waitForEventStreams(1)
            let misses = try await Self.metric("speakd_render_cache_misses_total", daemon.unixClient)
            let diskHits = try await Self.metric("speakd_render_cache_disk_hits_total", daemon.unixClient)
            let again = try await post(["text": text], via: daemon.unixClient, wait: true)
            let againID = try again.decode(AnnouncementEvent.self).id
            #expect(try again.decode(AnnouncementEvent.self).reason == .completed)
            #expect(try await Self.metric("speakd_render_cache_disk_hits_total", daemon.unixClient) == diskHits + 1)
            #expect(try await Self.metric("speakd_render_cache_misses_total", daemon.unixClient) == misses)
            _ = await events.waitForFinished([againID])
            let againWords = events.events(for: againID).filter { $0.type == .word }.map {
                "\($0.word ?? "")@\($0.range?.location ?? -1)"
            }
            #expect(!freshWords.isEmpty)
            #expect(againWords == freshWords)
            events.stop()
            await daemon.stop()
        }
    }
}
