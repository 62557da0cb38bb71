import AnnouncementQueue
import SpeakAPI
import SpeechModel

/// What a session asks of every announcement on its output, and the rules that apply it to a
/// request (docs/session.md):
///
/// - `rate` and `volume` multiply the request's own (the utterance's and each span's that sets
///   one; 1 where none is set), clamped to the attribute's range;
/// - `voice` fills in on the spans that name neither a voice nor a language (their own or the
///   utterance's): a request that asks for a language keeps the voice that language resolves to;
/// - `language` fills in where the request has none: the utterance's default, which spans
///   without their own inherit;
/// - `moveTo` moves the announcement to that output;
/// - `isPrivate` makes it private (`"private": true`), so it is heard only on a private output.
///
/// While the headphones of the private output the session is heard on are known to be out
/// (`headsetOut`), `moveTo` and `isPrivate` wait: announcements stay on the output they address,
/// as they are, until the headphones are plugged in again.
public struct SessionPreferences: Sendable, Hashable {
    public var rate: Double = 1
    public var volume: Double = 1
    public var language: LanguageTag?
    public var voice: String?
    public var moveTo: String?
    /// Makes every announcement private.
    public var isPrivate = false
    /// Seconds without activity after which the session ends.
    public var idleTimeout: Double = SessionRequest.defaultIdleTimeout

    public init() {}

    /// These preferences with the changes `request` asks for: an absent key keeps the value,
    /// `null` sets the default back.
    public func changed(by request: SessionRequest) -> SessionPreferences {
        var result = self
        if let rate = request.rate { result.rate = rate ?? 1 }
        if let volume = request.volume { result.volume = volume ?? 1 }
        if let language = request.language { result.language = language }
        if let voice = request.voice { result.voice = voice }
        if let moveTo = request.moveTo { result.moveTo = moveTo }
        if let isPrivate = request.isPrivate { result.isPrivate = isPrivate ?? false }
        if let timeout = request.idleTimeout { result.idleTimeout = timeout ?? SessionRequest.defaultIdleTimeout }
        return result
    }

    /// `request` as the session wants it heard; see the type's rules. `headsetOut`: the
    /// headphones of the output it is heard on are known to be out.
    public func apply(to request: AnnouncementRequest, headsetOut: Bool = false) -> AnnouncementRequest {
        var request = request
        var utterance = request.utterance
        if let voice {
            for index in utterance.spans.indices {
                let resolved = utterance.spans[index].attributes.inheriting(from: utterance.defaults)
                if resolved.voice == nil && resolved.language == nil {
                    utterance.spans[index].attributes.voice = voice
                }
            }
        }
        if let language, utterance.defaults.language == nil {
            utterance.defaults.language = language
        }
        Self.scale(\.rate, by: rate, within: SpeechAttributes.rateRange, in: &utterance)
        Self.scale(\.volume, by: volume, within: SpeechAttributes.volumeRange, in: &utterance)
        request.utterance = utterance
        guard !headsetOut else { return request }
        if let moveTo { request.output = moveTo }
        if isPrivate { request.delivery.isPrivate = true }
        return request
    }

    /// Multiplies the utterance's value of `attribute` (1 when it has none) and every span's own
    /// by `factor`, clamped to `range`.
    private static func scale(
        _ attribute: WritableKeyPath<SpeechAttributes, Double?>, by factor: Double, within range: ClosedRange<Double>,
        in utterance: inout Utterance
    ) {
        guard factor != 1 else { return }
        utterance.defaults[keyPath: attribute] = clamp(
            (utterance.defaults[keyPath: attribute] ?? 1) * factor, to: range)
        for index in utterance.spans.indices {
            if let own = utterance.spans[index].attributes[keyPath: attribute] {
                utterance.spans[index].attributes[keyPath: attribute] = clamp(own * factor, to: range)
            }
        }
    }

    private static func clamp(_ value: Double, to range: ClosedRange<Double>) -> Double {
        min(max(value, range.lowerBound), range.upperBound)
    }
}
