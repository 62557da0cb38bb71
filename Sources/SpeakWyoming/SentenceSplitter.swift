/// Cuts streamed text into sentences as they become complete, so each is spoken as soon as its
/// end has arrived: a sentence ends at `.`, `!`, `?`, `…` (or their CJK forms) and any closing
/// quotes or brackets after it, once the whitespace after that has arrived (so `3.5` and a
/// sentence cut mid-word between chunks are not cut), or at a line break.
struct SentenceSplitter: Sendable {
    private static let enders: Set<Character> = [".", "!", "?", "…", "。", "！", "？"]
    private static let closers: Set<Character> = ["\"", "'", "”", "’", ")", "]", "»", "」"]
    private static let fullWidthEnders: Set<Character> = ["。", "！", "？"]

    /// Text received and not yet part of a complete sentence.
    private(set) var pending = ""

    /// The number of UTF-8 bytes held.
    var pendingBytes: Int { pending.utf8.count }

    /// Adds `text`; returns the sentences it completes, in order, trimmed, blank ones left out.
    mutating func add(_ text: String) -> [String] {
        pending += text
        var sentences: [String] = []
        var start = pending.startIndex
        var index = pending.startIndex
        while index < pending.endIndex {
            let character = pending[index]
            var end: String.Index?
            if character == "\n" {
                end = pending.index(after: index)
            } else if Self.enders.contains(character) {
                var after = pending.index(after: index)
                while after < pending.endIndex,
                    Self.enders.contains(pending[after]) || Self.closers.contains(pending[after])
                {
                    after = pending.index(after: after)
                }
                if Self.fullWidthEnders.contains(character) {
                    end = after
                } else if after < pending.endIndex, pending[after].isWhitespace {
                    end = after
                } else if after == pending.endIndex {
                    break
                }
                index = after
                if end == nil { continue }
            }
            if let end {
                let sentence = pending[start..<end].trimmingWhitespace()
                if !sentence.isEmpty { sentences.append(sentence) }
                start = end
                index = end
            } else {
                index = pending.index(after: index)
            }
        }
        pending = String(pending[start...])
        return sentences
    }

    /// The rest, trimmed, at the end of the stream; nil when it is blank.
    mutating func finish() -> String? {
        defer { pending = "" }
        let rest = pending[...].trimmingWhitespace()
        return rest.isEmpty ? nil : rest
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map { index(after: $0) } ?? start
        return start < end ? String(self[start..<end]) : ""
    }
}
