/// Where each character of an engine's input came from in the utterance's own text, so the
/// positions the engine reports (`EngineEvent.textPosition`, `length`) can be given back as
/// ranges of the text a client sent.
///
/// Ranges are in UTF-16 code units of `Utterance.text` (`NSRange` counts them too), the
/// unit Apple's speech APIs report. Engine positions count Unicode scalars of the engine's input
/// from 1, markup included, which is how espeak-ng counts them.
public struct TextOffsetMap: Sendable, Hashable {
    /// For each scalar of the engine's input, the first UTF-16 offset of the text it came from;
    /// -1 for markup the compiler added.
    private var starts: [Int32] = []
    /// For each scalar of the engine's input, the UTF-16 length of the text it came from.
    private var lengths: [Int32] = []
    /// UTF-16 offsets in the text where a sentence starts, ascending.
    public private(set) var sentenceStarts: [Int] = []
    /// The UTF-16 length of the whole text.
    public let textLength: Int

    /// An empty map for a text `textLength` UTF-16 units long; `append` fills it.
    public init(textLength: Int) {
        self.textLength = textLength
    }

    /// How many scalars of engine input the map covers.
    public var count: Int { starts.count }

    /// Records `scalars` scalars of engine input that came from `source` (a UTF-16 range of the
    /// text), or that are markup when `source` is nil.
    public mutating func append(scalars: Int, from source: Range<Int>?) {
        let start = Int32(source?.lowerBound ?? -1)
        let length = Int32(source?.count ?? 0)
        starts.append(contentsOf: repeatElement(start, count: scalars))
        lengths.append(contentsOf: repeatElement(length, count: scalars))
    }

    /// Records the map of a part of the text, rendered apart, whose text starts at UTF-16
    /// `offset` of this one: its engine input follows this map's, its text ranges move by `offset`.
    public mutating func append(_ part: TextOffsetMap, at offset: Int) {
        starts.append(contentsOf: part.starts.map { $0 < 0 ? $0 : $0 + Int32(offset) })
        lengths.append(contentsOf: part.lengths)
        for start in part.sentenceStarts { noteSentenceStart(start + offset) }
    }

    /// Records that a sentence starts at `offset` (UTF-16) in the text.
    public mutating func noteSentenceStart(_ offset: Int) {
        if sentenceStarts.last.map({ $0 < offset }) ?? true {
            sentenceStarts.append(offset)
        } else if !sentenceStarts.contains(offset) {
            sentenceStarts.append(offset)
            sentenceStarts.sort()
        }
    }

    /// The range of the text that the engine input from `position` (counted from 1) for
    /// `length` scalars came from: the smallest range covering every character of text among
    /// them. With no length (a sentence), or when those scalars are all markup, the first
    /// character of text at or after `position` starts a range as long as that character.
    /// Nil when no text follows `position`.
    public func range(position: Int, length: Int) -> Range<Int>? {
        let first = max(0, position - 1)
        guard first < starts.count else { return nil }
        let end = min(starts.count, first + max(0, length))
        var lower = Int.max
        var upper = Int.min
        for index in first..<end where starts[index] >= 0 {
            lower = min(lower, Int(starts[index]))
            upper = max(upper, Int(starts[index] + lengths[index]))
        }
        if lower <= upper { return lower..<upper }
        guard let index = starts[first...].firstIndex(where: { $0 >= 0 }) else { return nil }
        return Int(starts[index])..<Int(starts[index] + lengths[index])
    }

    /// The part of the text `event` is about: a word's own characters, a sentence up to the next
    /// one. Nil for marks, and for words that cover no text: espeak-ng also reports words of
    /// no length (where a clause ends) and words inside markup.
    public func range(of event: EngineEvent) -> Range<Int>? {
        switch event.kind {
        case .word:
            guard event.length > 0, let range = range(position: event.textPosition, length: event.length) else {
                return nil
            }
            return wordCovers(position: event.textPosition, length: event.length) ? range : nil
        case .sentence:
            return range(position: event.textPosition, length: 0).map { sentence(containing: $0.lowerBound) }
        case .mark, .clip:
            return nil
        }
    }

    /// Whether any scalar from `position` for `length` came from the text.
    private func wordCovers(position: Int, length: Int) -> Bool {
        let first = max(0, position - 1)
        let end = min(starts.count, first + length)
        return first < end && starts[first..<end].contains { $0 >= 0 }
    }

    /// The sentence that starts at or contains UTF-16 offset `location`: up to the next
    /// sentence start or the end of the text.
    public func sentence(containing location: Int) -> Range<Int> {
        let start = sentenceStarts.last(where: { $0 <= location }) ?? 0
        let end = sentenceStarts.first(where: { $0 > location }) ?? textLength
        return start..<max(start, end)
    }
}
