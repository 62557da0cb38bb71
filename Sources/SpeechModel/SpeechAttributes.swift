/// Attributes that a span of an utterance may carry; `nil` means "inherit".
///
/// The ranges follow the wire format: pitch 0.0–2.0 (1.0 normal, an F0 multiplier),
/// rate 0.5–2.0 (× 175 words per minute), volume 0.0–2.0 (above 1.0 raised after the engine, see `EngineSpeaker`).
public struct SpeechAttributes: Sendable, Hashable {
    public var pitch: Double?
    public var rate: Double?
    public var volume: Double?
    /// true: every punctuation mark is spoken; false: none; nil: the configured default.
    public var punctuation: Bool?
    public var language: LanguageTag?
    public var spellOut: Bool?
    /// Pronunciation of the span in IPA.
    public var ipa: String?
    /// A voice by name (`en_US-joe-medium`); nil: the voice `language` resolves to.
    public var voice: String?

    public static let pitchRange: ClosedRange<Double> = 0.0...2.0
    public static let rateRange: ClosedRange<Double> = 0.5...2.0
    public static let volumeRange: ClosedRange<Double> = 0.0...2.0

    public init(
        pitch: Double? = nil, rate: Double? = nil, volume: Double? = nil,
        punctuation: Bool? = nil, language: LanguageTag? = nil,
        spellOut: Bool? = nil, ipa: String? = nil, voice: String? = nil
    ) {
        self.pitch = pitch
        self.rate = rate
        self.volume = volume
        self.punctuation = punctuation
        self.language = language
        self.spellOut = spellOut
        self.ipa = ipa
        self.voice = voice
    }

    /// These attributes, with every attribute that is not set here taken from `defaults`.
    public func inheriting(from defaults: SpeechAttributes) -> SpeechAttributes {
        SpeechAttributes(
            pitch: pitch ?? defaults.pitch,
            rate: rate ?? defaults.rate,
            volume: volume ?? defaults.volume,
            punctuation: punctuation ?? defaults.punctuation,
            language: language ?? defaults.language,
            spellOut: spellOut ?? defaults.spellOut,
            ipa: ipa ?? defaults.ipa,
            voice: voice ?? defaults.voice
        )
    }

    /// Checks every value against its range; the error names the field.
    public func validate() throws(SpeechInputError) {
        try Self.check(pitch, in: Self.pitchRange, field: "pitch")
        try Self.check(rate, in: Self.rateRange, field: "rate")
        try Self.check(volume, in: Self.volumeRange, field: "volume")
    }

    private static func check(_ value: Double?, in range: ClosedRange<Double>, field: String) throws(SpeechInputError) {
        guard let value else { return }
        guard value.isFinite, range.contains(value) else {
            throw SpeechInputError.outOfRange(field: field, value: value, range: range)
        }
    }
}
