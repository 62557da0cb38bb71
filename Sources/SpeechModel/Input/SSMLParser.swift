import FoundationEssentials
import PosixSupport

#if canImport(Glibc)
import Glibc
#endif

extension Utterance {
    /// Parses a document in speakd's SSML subset into spans.
    ///
    /// Supported: `speak` (root, optional `xml:lang`), `voice xml:lang`, `prosody` with `pitch`,
    /// `rate` and `volume`, `say-as interpret-as="characters"`, `break` (`time`, `strength`),
    /// `mark name` (an NMTOKEN), `s` and `p` (each with optional `xml:lang`), comments, CDATA,
    /// the XML declaration, the five predefined entities and numeric character references.
    /// `audio src="clip:NAME"` (empty) plays a clip of the library, as a `{"clip": "NAME"}` span.
    /// Everything else (another `audio` source, `voice name`, processing instructions, DOCTYPE) is
    /// `unsupported`; XML that does not parse is `malformed` naming the line and column. Both
    /// errors are in the field `ssml`.
    ///
    /// Text comes out literal (`&lt;audio&gt;` is the text `<audio>`), whitespace runs are
    /// collapsed to one space, sentences are separated by a space and paragraphs by a newline.
    /// Where an `s` or `p` starts or ends between two pieces of text, the utterance records a
    /// boundary (`boundaries`), so the sentence before ends there even without punctuation.
    /// `speak xml:lang` becomes the utterance's default language; prosody values become span
    /// attributes, relative values (`+20%`) taken relative to the enclosing `prosody`, or to
    /// normal (1.0). A `break` adds its pause to the span before it. A `mark` becomes the `mark`
    /// of the span that starts with the text after it (an empty span when a break, another mark
    /// or the end of the document follows), so it is reported as that text starts being heard.
    ///
    /// | attribute | accepted | result |
    /// |---|---|---|
    /// | `pitch` | `x-low` 0.7, `low` 0.85, `medium`/`default` 1.0, `high` 1.2, `x-high` 1.4; `+N%`/`-N%`; `+Nst`/`-Nst`; `N%`; a multiplier `1.2` | 0.0–2.0 |
    /// | `rate` | `x-slow` 0.5, `slow` 0.75, `medium`/`default` 1.0, `fast` 1.5, `x-fast` 2.0; `+N%`/`-N%`; `N%`; a multiplier | 0.5–2.0 |
    /// | `volume` | `silent` 0, `x-soft` 0.25, `soft` 0.5, `medium` 0.75, `loud`/`x-loud`/`default` 1.0; `+NdB`/`-NdB`; `+N%`/`-N%`; `N%`; a number on SSML 1.0's 0–100 scale | 0.0–2.0 |
    /// | `break time` | `500ms`, `1.5s` | 0–10 s |
    /// | `break strength` | `none` 0, `x-weak` 0.1, `weak` 0.25, `medium` 0.5 (also a bare `<break/>`), `strong` 0.75, `x-strong` 1.0 s | |
    ///
    /// A result outside its range is `outOfRange`; Hz values are `unsupported` (a voice's base
    /// frequency is not known here). `voice` takes only `xml:lang`: `name`, `gender` and the
    /// like are `unsupported`, because voices are chosen by language (see `VoiceCatalog`).
    public init(ssml: String) throws(SpeechInputError) {
        var parser = SSMLParser(source: ssml)
        self = try parser.parse()
    }
}

/// A hand-written parser for the SSML subset; no XML library, so behaviour is the same on
/// every platform and nothing outside the subset (entities, external DTDs) is ever resolved.
struct SSMLParser {
    private let characters: [Character]
    private var index = 0

    /// What the text inside an element is spoken with.
    private struct Frame {
        var name: String
        var attributes: SpeechAttributes
        /// Where the start tag was, for "never closed" errors.
        var start: Int
    }

    private enum Piece {
        case text(String, SpeechAttributes)
        /// A sentence (`" "`) or paragraph (`"\n"`) boundary.
        case boundary(String)
        case pause(Double)
        /// `<mark name="…"/>`.
        case mark(String)
        /// `<audio src="clip:NAME"/>`.
        case clip(String)
    }

    private var stack: [Frame] = []
    private var pieces: [Piece] = []
    private var defaultLanguage: LanguageTag?
    private var rootSeen = false

    init(source: String) {
        characters = Array(source)
    }

    mutating func parse() throws(SpeechInputError) -> Utterance {
        if characters.first == "\u{FEFF}" { index = 1 }
        if starts(with: "<?xml") && (peek(5)?.isXMLWhitespace ?? false) {
            try skipPast("?>", what: "XML declaration")
        }
        while index < characters.count {
            if characters[index] == "<" {
                try markup()
            } else {
                try text()
            }
        }
        if let open = stack.last {
            throw malformed("<\(open.name)> is never closed", at: open.start)
        }
        guard rootSeen else { throw .malformed(field: "ssml", "the document has no <speak> element") }
        return try assemble()
    }

    // MARK: - Markup

    private mutating func markup() throws(SpeechInputError) {
        let start = index
        if starts(with: "<!--") {
            try skipPast("-->", what: "comment")
        } else if starts(with: "<![CDATA[") {
            index += 9
            guard let end = find("]]>") else { throw malformed("CDATA section is never closed", at: start) }
            let content = String(characters[index..<end])
            index = end + 3
            try appendText(content, at: start)
        } else if starts(with: "<!") {
            let what = starts(with: "<!DOCTYPE") ? "DOCTYPE declarations are" : "'<!' declarations are"
            throw unsupported("\(what) not supported", at: start)
        } else if starts(with: "<?") {
            throw unsupported("processing instructions are not supported", at: start)
        } else if starts(with: "</") {
            try endTag()
        } else {
            try startTag()
        }
    }

    private mutating func startTag() throws(SpeechInputError) {
        let start = index
        index += 1
        let name = try readName(at: start, what: "element name")
        var attributes: [(name: String, value: String, at: Int)] = []
        var selfClosing = false
        while true {
            skipWhitespace()
            guard let character = peek() else { throw malformed("<\(name)> tag is never closed", at: start) }
            if character == ">" {
                index += 1
                break
            }
            if character == "/" {
                guard peek(1) == ">" else { throw malformed("expected '>' after '/'", at: index) }
                index += 2
                selfClosing = true
                break
            }
            let attributeStart = index
            guard characters[index - 1].isXMLWhitespace else {
                throw malformed("expected whitespace before an attribute", at: index)
            }
            let attributeName = try readName(at: attributeStart, what: "attribute name")
            skipWhitespace()
            guard peek() == "=" else {
                throw malformed("attribute '\(attributeName)' needs '=' and a value", at: index)
            }
            index += 1
            skipWhitespace()
            let value = try readAttributeValue(name: attributeName)
            if attributes.contains(where: { $0.name == attributeName }) {
                throw malformed("attribute '\(attributeName)' appears twice", at: attributeStart)
            }
            attributes.append((attributeName, value, attributeStart))
        }

        if stack.isEmpty {
            guard !rootSeen else { throw malformed("content after the </speak> element", at: start) }
            guard name == "speak" else {
                throw malformed("the document must start with <speak>, found <\(name)>", at: start)
            }
        } else if name == "speak" {
            throw malformed("<speak> may only be the root element", at: start)
        }

        var frame = Frame(name: name, attributes: stack.last?.attributes ?? SpeechAttributes(), start: start)
        var pause: Double?
        let allowed: Set<String>
        switch name {
        case "speak":
            rootSeen = true
            allowed = ["xml:lang", "version", "xml:base"]
        case "voice", "s", "p":
            allowed = ["xml:lang"]
        case "prosody":
            allowed = ["pitch", "rate", "volume"]
        case "say-as":
            allowed = ["interpret-as"]
            guard let interpretAs = attributes.first(where: { $0.name == "interpret-as" }) else {
                throw malformed("<say-as> needs interpret-as", at: start)
            }
            guard ["characters", "spell-out"].contains(interpretAs.value) else {
                throw unsupported(
                    "say-as interpret-as=\"\(interpretAs.value)\" is not supported (only \"characters\")",
                    at: interpretAs.at)
            }
            frame.attributes.spellOut = true
        case "break":
            allowed = ["time", "strength"]
        case "audio":
            allowed = ["src"]
            guard let source = attributes.first(where: { $0.name == "src" }) else {
                throw malformed("<audio> needs src", at: start)
            }
            guard source.value.hasPrefix("clip:"), Span.isValidClipName(String(source.value.dropFirst(5))) else {
                throw unsupported(
                    "audio src=\"\(source.value)\" is not supported: only a clip of the library, src=\"clip:NAME\"",
                    at: source.at)
            }
        case "mark":
            allowed = ["name"]
            guard let markName = attributes.first(where: { $0.name == "name" }) else {
                throw malformed("<mark> needs name", at: start)
            }
            guard Span.isValidMark(markName.value) else {
                throw malformed(
                    "mark name '\(markName.value)' is not a mark name (letters, digits, '.', '-', '_', ':')",
                    at: markName.at)
            }
        default:
            throw unsupported("unsupported element <\(name)>", at: start)
        }

        for attribute in attributes {
            if attribute.name == "xmlns" || attribute.name.hasPrefix("xmlns:") || attribute.name.hasPrefix("xsi:") {
                guard name == "speak" else {
                    throw unsupported("namespace declarations are only accepted on <speak>", at: attribute.at)
                }
                continue
            }
            guard allowed.contains(attribute.name) else {
                let hint = name == "voice" ? "; voices are chosen by xml:lang" : ""
                throw unsupported(
                    "attribute '\(attribute.name)' on <\(name)> is not supported\(hint)", at: attribute.at)
            }
            switch attribute.name {
            case "xml:lang":
                let tag: LanguageTag
                do {
                    tag = try LanguageTag(attribute.value, field: "ssml")
                } catch {
                    throw malformed("xml:lang: \(error.message)", at: attribute.at)
                }
                if name == "speak" { defaultLanguage = tag } else { frame.attributes.language = tag }
            case "pitch":
                frame.attributes.pitch = try ProsodyValue.pitch.resolve(
                    attribute.value, relativeTo: frame.attributes.pitch ?? 1.0, position: position(of: attribute.at))
            case "rate":
                frame.attributes.rate = try ProsodyValue.rate.resolve(
                    attribute.value, relativeTo: frame.attributes.rate ?? 1.0, position: position(of: attribute.at))
            case "volume":
                frame.attributes.volume = try ProsodyValue.volume.resolve(
                    attribute.value, relativeTo: frame.attributes.volume ?? 1.0, position: position(of: attribute.at))
            case "time":
                pause = try Self.breakTime(attribute.value, position: position(of: attribute.at))
            case "strength":
                guard let seconds = Self.breakStrengths[attribute.value] else {
                    throw malformed(
                        "break strength '\(attribute.value)' is not one of none, x-weak, weak, medium, strong, x-strong",
                        at: attribute.at)
                }
                // `time` wins over `strength` when both are given.
                if !attributes.contains(where: { $0.name == "time" }) { pause = seconds }
            default:
                break
            }
        }

        if name == "break" || name == "mark" || name == "audio" {
            if name == "break" {
                pieces.append(.pause(pause ?? Self.breakStrengths["medium"]!))
            } else if name == "audio", let source = attributes.first(where: { $0.name == "src" }) {
                pieces.append(.clip(String(source.value.dropFirst(5))))
            } else if let markName = attributes.first(where: { $0.name == "name" }) {
                pieces.append(.mark(markName.value))
            }
            if !selfClosing {
                // `<break></break>` is fine; anything inside it is not.
                skipWhitespace()
                guard starts(with: "</\(name)") else { throw malformed("<\(name)> must be empty", at: index) }
                try endTag(expected: name)
            }
            return
        }
        if name == "s" || name == "p" { pieces.append(.boundary(name == "p" ? "\n" : " ")) }
        if selfClosing {
            if name == "s" || name == "p" { pieces.append(.boundary(name == "p" ? "\n" : " ")) }
            if name == "speak" { rootSeen = true }
            return
        }
        stack.append(frame)
    }

    private mutating func endTag(expected: String? = nil) throws(SpeechInputError) {
        let start = index
        index += 2
        let name = try readName(at: start, what: "element name")
        skipWhitespace()
        guard peek() == ">" else { throw malformed("expected '>' to end </\(name)>", at: index) }
        index += 1
        if let expected {
            guard name == expected else { throw malformed("</\(name)> does not close <\(expected)>", at: start) }
            return
        }
        guard let open = stack.last else { throw malformed("</\(name)> closes nothing", at: start) }
        guard open.name == name else { throw malformed("</\(name)> does not close <\(open.name)>", at: start) }
        stack.removeLast()
        if name == "s" || name == "p" { pieces.append(.boundary(name == "p" ? "\n" : " ")) }
    }

    // MARK: - Text

    private mutating func text() throws(SpeechInputError) {
        let start = index
        var content = ""
        while let character = peek(), character != "<" {
            if character == "&" {
                content.append(contentsOf: try entity())
            } else {
                content.append(character)
                index += 1
            }
        }
        try appendText(content, at: start)
    }

    private mutating func appendText(_ content: String, at start: Int) throws(SpeechInputError) {
        guard let frame = stack.last else {
            guard content.allSatisfy(\.isXMLWhitespace) else {
                throw malformed(rootSeen ? "text after </speak>" : "text before <speak>", at: start)
            }
            return
        }
        pieces.append(.text(content, frame.attributes))
    }

    /// Decodes `&name;` or `&#N;` / `&#xH;` at the cursor.
    private mutating func entity() throws(SpeechInputError) -> String {
        let start = index
        guard let end = characters[index...].prefix(12).firstIndex(of: ";") else {
            throw malformed("'&' must start an entity such as &amp;", at: start)
        }
        let name = String(characters[(index + 1)..<end])
        index = end + 1
        switch name {
        case "amp": return "&"
        case "lt": return "<"
        case "gt": return ">"
        case "quot": return "\""
        case "apos": return "'"
        default:
            var digits = Substring(name)
            guard digits.hasPrefix("#") else { throw malformed("unknown entity '&\(name);'", at: start) }
            digits = digits.dropFirst()
            var radix = 10
            if digits.hasPrefix("x") {
                digits = digits.dropFirst()
                radix = 16
            }
            guard !digits.isEmpty, digits.allSatisfy({ $0.isHexDigit && (radix == 16 || $0.isNumber) }),
                let value = UInt32(digits, radix: radix), value != 0, let scalar = Unicode.Scalar(value)
            else {
                throw malformed("'&\(name);' is not a valid character reference", at: start)
            }
            return String(Character(scalar))
        }
    }

    // MARK: - Assembly

    /// Turns pieces into spans: collapses whitespace, places boundaries, pauses and marks, merges
    /// neighbours with the same attributes.
    private func assemble() throws(SpeechInputError) -> Utterance {
        var spans: [Span] = []
        var separator: String?
        /// A mark waiting for the text it is reached at.
        var pendingMark: String?
        /// The strongest `s` or `p` boundary since the last text, recorded where the next text starts.
        var pendingBoundary: Utterance.Boundary?
        var boundaries: [Int: Utterance.Boundary] = [:]

        func append(_ character: Character, _ attributes: SpeechAttributes) {
            if pendingMark == nil, let last = spans.last, last.clip == nil, last.attributes == attributes,
                last.pauseAfter == nil
            {
                spans[spans.count - 1].text.append(character)
            } else {
                spans.append(Span(String(character), attributes: attributes, mark: pendingMark))
                pendingMark = nil
            }
        }
        /// Whitespace goes with the text before it; a clip has no text, so whitespace after one
        /// goes to the text before the clip, unless that ends with some already.
        func appendSeparator(_ pending: String) {
            guard let last = spans.lastIndex(where: { $0.clip == nil }) else { return }
            if last < spans.count - 1, spans[last].text.last?.isXMLWhitespace ?? true { return }
            spans[last].text += pending
        }
        /// A mark with no text of its own before what follows: an empty span keeps its place.
        func placePendingMark(pauseAfter: Double? = nil) {
            guard let mark = pendingMark else { return }
            // Whitespace before the mark stays with the text before it, as between words.
            if let pending = separator, spans.contains(where: { !$0.text.isEmpty }) {
                appendSeparator(pending)
                separator = nil
            }
            spans.append(
                Span("", attributes: spans.last?.attributes ?? SpeechAttributes(), pauseAfter: pauseAfter, mark: mark))
            pendingMark = nil
        }

        for piece in pieces {
            switch piece {
            case .text(let text, let attributes):
                for character in text {
                    if character.isXMLWhitespace {
                        separator = separator ?? " "
                        continue
                    }
                    let hasText = !spans.isEmpty && !spans.allSatisfy(\.text.isEmpty)
                    // Whitespace goes with the text before it, so a span starts with its own words.
                    if let pending = separator, hasText {
                        appendSeparator(pending)
                    }
                    let boundary = hasText ? pendingBoundary : nil
                    separator = nil
                    pendingBoundary = nil
                    append(character, attributes)
                    if let boundary {
                        // Counted span by span, as `Utterance.boundaries` is, after the character is
                        // appended: one that extends the Character before it (a combining mark after
                        // the separator, `<s/>&#x301;`) starts no Character of its own, so the
                        // boundary goes where the Character it joined starts, never past the end.
                        boundaries[spans.reduce(0) { $0 + $1.text.count } - 1] = boundary
                    }
                }
            case .boundary(let boundary):
                if boundary == "\n" || separator == nil { separator = boundary }
                let kind: Utterance.Boundary = boundary == "\n" ? .paragraph : .sentence
                pendingBoundary = pendingBoundary.map { .stronger($0, kind) } ?? kind
            case .mark(let name):
                placePendingMark()
                pendingMark = name
            case .clip(let name):
                // Whitespace before the clip stays with the text before it, as before a mark.
                if let pending = separator, spans.contains(where: { !$0.text.isEmpty }) {
                    appendSeparator(pending)
                }
                separator = nil
                spans.append(.clip(name, mark: pendingMark))
                pendingMark = nil
            case .pause(let seconds) where pendingMark != nil:
                placePendingMark(pauseAfter: seconds)
            case .pause(let seconds):
                if spans.isEmpty {
                    spans.append(Span("", pauseAfter: seconds))
                } else {
                    spans[spans.count - 1].pauseAfter = (spans[spans.count - 1].pauseAfter ?? 0) + seconds
                }
            }
        }
        placePendingMark()
        guard spans.contains(where: { Utterance.hasSpeech($0.text) || $0.clip != nil }) else {
            throw .malformed(field: "ssml", "the SSML document has no text to speak and no clip to play")
        }
        var utterance = Utterance(spans: spans, boundaries: boundaries)
        utterance.defaults.language = defaultLanguage
        return utterance
    }

    // MARK: - Values

    static let breakStrengths: [String: Double] = [
        "none": 0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.0,
    ]

    /// `500ms`, `1s`, `1.5s` → seconds, within `Span.pauseAfterRange`.
    /// `position` is computed only for an error: it counts lines from the start of the document.
    private static func breakTime(
        _ value: String, position: @autoclosure () -> String
    ) throws(SpeechInputError) -> Double {
        let (number, unit): (Substring, Double) =
            value.hasSuffix("ms") ? (value.dropLast(2), 0.001) : value.hasSuffix("s") ? (value.dropLast(), 1) : ("", 0)
        guard let amount = ProsodyValue.unsignedNumber(number) else {
            throw .malformed(field: "ssml", "break time '\(value)' at \(position()) must be like '500ms' or '1.5s'")
        }
        let seconds = amount * unit
        guard Span.pauseAfterRange.contains(seconds) else {
            throw .outOfRange(
                field: "ssml",
                "break time '\(value)' at \(position()) is out of range \(Span.pauseAfterRange.lowerBound)–\(Span.pauseAfterRange.upperBound) s"
            )
        }
        return seconds
    }

    // MARK: - Scanning

    private func peek(_ offset: Int = 0) -> Character? {
        index + offset < characters.count ? characters[index + offset] : nil
    }

    private func starts(with prefix: String) -> Bool {
        var position = index
        for character in prefix {
            guard position < characters.count, characters[position] == character else { return false }
            position += 1
        }
        return true
    }

    private func find(_ needle: String) -> Int? {
        let pattern = Array(needle)
        var position = index
        while position + pattern.count <= characters.count {
            if Array(characters[position..<(position + pattern.count)]) == pattern { return position }
            position += 1
        }
        return nil
    }

    private mutating func skipPast(_ terminator: String, what: String) throws(SpeechInputError) {
        let start = index
        guard let end = find(terminator) else { throw malformed("\(what) is never closed", at: start) }
        index = end + terminator.count
    }

    private mutating func skipWhitespace() {
        while let character = peek(), character.isXMLWhitespace { index += 1 }
    }

    private mutating func readName(at start: Int, what: String) throws(SpeechInputError) -> String {
        var name = ""
        while let character = peek(), character.isASCII,
            character.isLetter || character.isNumber || "-_:.".contains(character)
        {
            name.append(character)
            index += 1
        }
        guard let first = name.first, first.isLetter || first == "_" else {
            let found = peek().map { "'\($0)'" } ?? "the end of the document"
            throw malformed("expected \(what), found \(found)", at: index)
        }
        return name
    }

    private mutating func readAttributeValue(name: String) throws(SpeechInputError) -> String {
        let start = index
        guard let quote = peek(), quote == "\"" || quote == "'" else {
            throw malformed("the value of '\(name)' must be quoted", at: index)
        }
        index += 1
        var value = ""
        while true {
            guard let character = peek() else { throw malformed("the value of '\(name)' is never closed", at: start) }
            if character == quote {
                index += 1
                return value
            }
            if character == "<" { throw malformed("'<' is not allowed in the value of '\(name)'", at: index) }
            if character == "&" {
                value += try entity()
            } else {
                value.append(character)
                index += 1
            }
        }
    }

    /// `line L, column C` (1-based) of a character index.
    private func position(of offset: Int) -> String {
        var line = 1
        var column = 1
        for character in characters[..<min(offset, characters.count)] {
            if character.isNewline {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return "line \(line), column \(column)"
    }

    private func malformed(_ message: String, at offset: Int) -> SpeechInputError {
        .malformed(field: "ssml", "\(message) at \(position(of: offset))")
    }

    private func unsupported(_ message: String, at offset: Int) -> SpeechInputError {
        .unsupported(field: "ssml", "\(message) at \(position(of: offset))")
    }
}

/// How a `prosody` attribute's words and numbers map onto the span attribute ranges.
struct ProsodyValue {
    let attribute: String
    let labels: [String: Double]
    let range: ClosedRange<Double>
    /// Accepts `+2st` / `-2st` (pitch).
    let semitones: Bool
    /// Accepts `+6dB` / `-6dB`, and reads a plain number on SSML 1.0's 0–100 scale (volume).
    let decibels: Bool

    static let pitch = ProsodyValue(
        attribute: "pitch",
        labels: ["x-low": 0.7, "low": 0.85, "medium": 1.0, "default": 1.0, "high": 1.2, "x-high": 1.4],
        range: SpeechAttributes.pitchRange, semitones: true, decibels: false)
    static let rate = ProsodyValue(
        attribute: "rate",
        labels: ["x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.5, "x-fast": 2.0],
        range: SpeechAttributes.rateRange, semitones: false, decibels: false)
    static let volume = ProsodyValue(
        attribute: "volume",
        labels: ["silent": 0, "x-soft": 0.25, "soft": 0.5, "medium": 0.75, "loud": 1.0, "x-loud": 1.0, "default": 1.0],
        range: SpeechAttributes.volumeRange, semitones: false, decibels: true)

    /// The absolute value of `text`; relative forms (`+20%`, `-2st`, `+6dB`) apply to `base`.
    /// `position` is computed only for an error: it counts lines from the start of the document,
    /// and a document of many `prosody` elements would otherwise be read once per attribute.
    func resolve(
        _ text: String, relativeTo base: Double, position: @autoclosure () -> String
    ) throws(SpeechInputError) -> Double {
        let value: Double
        if let label = labels[text] {
            value = label
        } else if let sign = text.first, sign == "+" || sign == "-" {
            let body = text.dropFirst()
            let direction: Double = sign == "+" ? 1 : -1
            if body.hasSuffix("%"), let amount = Self.unsignedNumber(body.dropLast()) {
                value = base * (1 + direction * amount / 100)
            } else if semitones, body.hasSuffix("st"), let amount = Self.unsignedNumber(body.dropLast(2)) {
                value = base * pow(2, direction * amount / 12)
            } else if decibels, body.hasSuffix("dB"), let amount = Self.unsignedNumber(body.dropLast(2)) {
                value = base * pow(10, direction * amount / 20)
            } else {
                throw unreadable(text, position: position())
            }
        } else if text.hasSuffix("%"), let amount = Self.unsignedNumber(text.dropLast()) {
            value = amount / 100
        } else if let amount = Self.unsignedNumber(Substring(text)) {
            value = decibels ? amount / 100 : amount
        } else if text.hasSuffix("Hz") {
            throw .unsupported(
                field: "ssml",
                "prosody \(attribute)=\"\(text)\" at \(position()): Hz values are not supported; use a label, a percentage or semitones"
            )
        } else {
            throw unreadable(text, position: position())
        }
        guard value.isFinite, range.contains(value) else {
            throw .outOfRange(
                field: "ssml",
                "prosody \(attribute)=\"\(text)\" at \(position()) gives \(Self.format(value)), outside \(range.lowerBound)–\(range.upperBound)"
            )
        }
        return value
    }

    private func unreadable(_ text: String, position: String) -> SpeechInputError {
        let forms =
            ["a label (\(labels.keys.sorted().joined(separator: ", ")))", "+N% or -N%", "N%", "a number"]
            + (semitones ? ["+Nst or -Nst"] : []) + (decibels ? ["+NdB or -NdB"] : [])
        return .malformed(
            field: "ssml", "prosody \(attribute)=\"\(text)\" at \(position) is not \(forms.joined(separator: ", "))")
    }

    /// Digits with an optional fraction (`12`, `0.5`, `.5`); no signs, exponents or `nan`.
    static func unsignedNumber(_ text: Substring) -> Double? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !text.isEmpty, parts.count <= 2, parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            parts.contains(where: { !$0.isEmpty })
        else { return nil }
        return Double(text.hasPrefix(".") ? "0\(text)" : String(text))
    }

    private static func format(_ value: Double) -> String {
        cFormat("%.3g", value)
    }
}

extension Character {
    /// XML's whitespace: space, tab, carriage return, line feed (and CR LF, one `Character`).
    fileprivate var isXMLWhitespace: Bool {
        self == " " || self == "\t" || self == "\n" || self == "\r" || self == "\r\n"
    }
}
