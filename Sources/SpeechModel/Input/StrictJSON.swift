/// A strict check of a JSON text (RFC 8259) that names the field at fault, run over a request
/// body before `JSONDecoder` decodes it.
///
/// Foundation's `JSONDecoder` is lenient where a request body must not be: it accepts a trailing
/// comma, keeps one of two equal keys without a word, and reports invalid UTF-8, a lone
/// surrogate (`"\ud800"`) or a number out of range (`1e309`) without saying where, so the
/// client hears "expected a string" or nothing at all. None of the JSON libraries this project
/// can depend on is strict and names the field, so this check walks the bytes once, keeping
/// the path (`spans[1].pitch`), and refuses:
/// - anything outside the RFC grammar: trailing commas, comments, single quotes, unquoted keys,
///   leading zeros, `NaN`, `Infinity`, raw control characters in strings, a byte order mark,
///   text after the value;
/// - a key given twice in one object (after escapes are resolved, so `"p\u0069tch"` is `pitch`);
/// - bytes that are not UTF-8, and `\u` escapes that leave a surrogate unpaired;
/// - numbers a `Double` cannot hold (`1e309`, `-1e400`), which would otherwise become infinity;
/// - nesting deeper than `maximumDepth`, so a body of brackets cannot exhaust the stack.
public enum StrictJSON {
    /// The deepest nesting of objects and arrays accepted; a request body needs 3.
    public static let maximumDepth = 64

    /// Checks `bytes`; returns the keys of the top-level object in order (empty when the value
    /// is not an object), so a caller can tell which form of a request was used.
    @discardableResult
    public static func check(_ bytes: some Collection<UInt8>) throws(StrictJSONError) -> [String] {
        var scanner = Scanner(bytes: Array(bytes))
        return try scanner.document()
    }
}

extension StrictJSON {
    /// The wire path of `key` in the object at `path` (`""` at the top level): `spans[1].pitch`,
    /// `pitch`. A key that is empty or not a plain name (ASCII letters, digits, `_`, `-`) is
    /// written as a quoted JSON string, `spans[1][""]`, `["a.b"]`, so a path is never empty and
    /// never reads as another one.
    public static func memberPath(_ path: String, _ key: String) -> String {
        let isPlain =
            !key.isEmpty
            && key.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || $0 == "-")
            }
        if isPlain { return path.isEmpty ? key : "\(path).\(key)" }
        var quoted = "\""
        for scalar in key.unicodeScalars {
            switch scalar {
            case "\"", "\\": quoted += "\\\(scalar)"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                quoted += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return "\(path)[\(quoted)\"]"
    }
}

/// A body that is not strict JSON; `field` is the wire path of the value at fault (`spans[1].pitch`),
/// nil when the fault is in the document as a whole.
public struct StrictJSONError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case syntax
        case duplicateKey
        case trailingComma
        case invalidString
        case nonFinite
        case outOfRange
        case tooDeep
    }

    private let code: Code
    /// The wire path of the value at fault, or nil for the whole body.
    public let field: String?
    /// What is wrong, for a person.
    public let message: String
    /// The byte offset where the fault was found.
    public let offset: Int

    private init(_ code: Code, field: String, _ message: String, at offset: Int) {
        self.code = code
        self.field = field.isEmpty ? nil : field
        self.message = message
        self.offset = offset
    }

    /// True for a well-formed number that no `Double` can hold (`1e309`): the JSON is valid,
    /// the value is not, so the server answers 422 `outOfRange` rather than 400.
    public var isOutOfRange: Bool { code == .outOfRange }

    public var description: String {
        if let field { return "\(field): \(message)" }
        return message
    }

    static func syntax(_ field: String, _ message: String, at offset: Int) -> StrictJSONError {
        StrictJSONError(.syntax, field: field, message, at: offset)
    }

    static func duplicateKey(_ field: String, at offset: Int) -> StrictJSONError {
        StrictJSONError(
            .duplicateKey, field: field, "duplicate key; a key may appear only once in an object", at: offset)
    }

    static func trailingComma(_ field: String, in container: String, at offset: Int) -> StrictJSONError {
        StrictJSONError(
            .trailingComma, field: field, "trailing comma after the last \(container) (byte \(offset))", at: offset)
    }

    static func invalidString(_ field: String, _ message: String, at offset: Int) -> StrictJSONError {
        StrictJSONError(.invalidString, field: field, message, at: offset)
    }

    static func nonFinite(_ field: String, _ literal: String, at offset: Int) -> StrictJSONError {
        StrictJSONError(
            .nonFinite, field: field, "\(literal) is not a JSON number; numbers must be finite", at: offset)
    }

    static func outOfRange(_ field: String, _ number: String, at offset: Int) -> StrictJSONError {
        let shown = number.count > 24 ? number.prefix(24) + "…" : Substring(number)
        return StrictJSONError(
            .outOfRange, field: field, "\(shown) is out of range; a number must fit a 64-bit float", at: offset)
    }

    static func tooDeep(_ field: String, at offset: Int) -> StrictJSONError {
        StrictJSONError(
            .tooDeep, field: field, "nested more than \(StrictJSON.maximumDepth) levels deep", at: offset)
    }
}

/// One pass over the bytes; `path` arguments are wire paths, `""` for the top level.
private struct Scanner {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func document() throws(StrictJSONError) -> [String] {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw .syntax("", "the body starts with a byte order mark; send plain UTF-8", at: 0)
        }
        skipWhitespace()
        var keys: [String] = []
        try value(path: "", depth: 0, topLevelKeys: &keys)
        skipWhitespace()
        guard index == bytes.count else {
            throw .syntax("", "unexpected \(describeCurrent()) after the JSON value at byte \(index)", at: index)
        }
        return keys
    }

    // MARK: Values

    private mutating func value(path: String, depth: Int, topLevelKeys: inout [String]) throws(StrictJSONError) {
        guard index < bytes.count else {
            throw .syntax(path, "the body ends where a value was expected", at: index)
        }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            try object(path: path, depth: depth + 1, keys: &topLevelKeys)
        case UInt8(ascii: "["):
            try array(path: path, depth: depth + 1)
        case UInt8(ascii: "\""):
            _ = try string(path: path, collect: false)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number(path: path)
        case UInt8(ascii: "t"):
            try literal("true", path: path)
        case UInt8(ascii: "f"):
            try literal("false", path: path)
        case UInt8(ascii: "n"):
            try literal("null", path: path)
        case UInt8(ascii: "N") where matches("NaN"):
            throw .nonFinite(path, "NaN", at: index)
        case UInt8(ascii: "I") where matches("Infinity"):
            throw .nonFinite(path, "Infinity", at: index)
        default:
            throw .syntax(path, "expected a value, found \(describeCurrent()) at byte \(index)", at: index)
        }
    }

    private mutating func object(path: String, depth: Int, keys topLevelKeys: inout [String]) throws(StrictJSONError) {
        let start = index
        guard try open(.object, path: path, depth: depth) else { return }
        var seen: Set<String> = []
        var ignored: [String] = []
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else {
                throw .syntax(
                    path, "expected a key in double quotes, found \(describeCurrent()) at byte \(index)", at: index)
            }
            let keyOffset = index
            let key = try string(path: path, collect: true)
            let member = StrictJSON.memberPath(path, key)
            guard seen.insert(key).inserted else { throw .duplicateKey(member, at: keyOffset) }
            if depth == 1 { topLevelKeys.append(key) }
            skipWhitespace()
            guard current == UInt8(ascii: ":") else {
                throw .syntax(
                    member, "expected ':' after the key, found \(describeCurrent()) at byte \(index)", at: index)
            }
            index += 1
            skipWhitespace()
            try value(path: member, depth: depth, topLevelKeys: &ignored)
            if try closes(.object, at: member, of: path, startingAt: start) { return }
        }
    }

    private mutating func array(path: String, depth: Int) throws(StrictJSONError) {
        let start = index
        guard try open(.array, path: path, depth: depth) else { return }
        var ignored: [String] = []
        var count = 0
        while true {
            let element = "\(path)[\(count)]"
            skipWhitespace()
            try value(path: element, depth: depth, topLevelKeys: &ignored)
            count += 1
            if try closes(.array, at: element, of: path, startingAt: start) { return }
        }
    }

    /// An object or an array: its closing bracket, what it holds, and what follows each of those.
    private enum Container {
        case object, array

        var closing: UInt8 { self == .object ? UInt8(ascii: "}") : UInt8(ascii: "]") }
        var name: String { self == .object ? "object" : "array" }
        var item: String { self == .object ? "member of the object" : "element of the array" }
        var expected: String { self == .object ? "',' or '}' after the value" : "',' or ']' after the element" }
    }

    /// Steps over the opening bracket at `index`: false when the container is empty (its
    /// closing bracket is stepped over too), true when an item follows.
    private mutating func open(_ container: Container, path: String, depth: Int) throws(StrictJSONError) -> Bool {
        guard depth <= StrictJSON.maximumDepth else { throw .tooDeep(path, at: index) }
        index += 1
        skipWhitespace()
        guard current == container.closing else { return true }
        index += 1
        return false
    }

    /// After the item at `item` of the container at `path` that opened at byte `start`: steps
    /// over a comma (false: another item follows) or the closing bracket (true).
    private mutating func closes(
        _ container: Container, at item: String, of path: String, startingAt start: Int
    ) throws(StrictJSONError) -> Bool {
        skipWhitespace()
        switch current {
        case UInt8(ascii: ","):
            let comma = index
            index += 1
            skipWhitespace()
            if current == container.closing { throw .trailingComma(item, in: container.item, at: comma) }
            return false
        case container.closing:
            index += 1
            return true
        case nil:
            throw .syntax(
                path, "the body ends before the \(container.name) that starts at byte \(start) is closed", at: index)
        default:
            throw .syntax(
                item, "expected \(container.expected), found \(describeCurrent()) at byte \(index)", at: index)
        }
    }

    private mutating func literal(_ word: String, path: String) throws(StrictJSONError) {
        guard matches(word) else {
            throw .syntax(path, "expected a value, found \(describeCurrent()) at byte \(index)", at: index)
        }
        index += word.utf8.count
    }

    /// The number grammar of RFC 8259 §6, then a range check: `Double` turns what it cannot hold
    /// into infinity.
    private mutating func number(path: String) throws(StrictJSONError) {
        let start = index
        if current == UInt8(ascii: "-") {
            index += 1
            if current == UInt8(ascii: "I"), matches("Infinity") { throw .nonFinite(path, "-Infinity", at: start) }
        }
        guard let first = current, isDigit(first) else {
            throw .syntax(path, "expected a digit at byte \(index), found \(describeCurrent())", at: index)
        }
        index += 1
        if first == UInt8(ascii: "0"), let next = current, isDigit(next) {
            throw .syntax(path, "a number must not have leading zeros (byte \(start))", at: start)
        }
        skipDigits()
        if current == UInt8(ascii: ".") {
            index += 1
            guard let digit = current, isDigit(digit) else {
                throw .syntax(path, "expected a digit after the decimal point at byte \(index)", at: index)
            }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let digit = current, isDigit(digit) else {
                throw .syntax(path, "expected a digit in the exponent at byte \(index)", at: index)
            }
            skipDigits()
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let number = Double(text), number.isFinite else { throw .outOfRange(path, text, at: start) }
    }

    // MARK: Strings

    /// Reads a string, checking escapes, control characters and UTF-8; returns its value when
    /// `collect` is true (keys), else an empty string (values are only checked).
    private mutating func string(path: String, collect: Bool) throws(StrictJSONError) -> String {
        let start = index
        index += 1
        var value: [UInt8] = []
        while true {
            guard let byte = current else {
                throw .syntax(path, "the string that starts at byte \(start) is not closed", at: start)
            }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return collect ? String(decoding: value, as: UTF8.self) : ""
            case UInt8(ascii: "\\"):
                let scalar = try escape(path: path)
                if collect { UTF8.encode(scalar) { value.append($0) } }
            case 0..<0x20:
                throw .invalidString(
                    path,
                    "contains a raw control character (byte \(hex(byte)) at \(index)); write it as an escape such as \\n",
                    at: index)
            case 0x20..<0x80:
                if collect { value.append(byte) }
                index += 1
            default:
                let length = try utf8Sequence(path: path)
                if collect { value.append(contentsOf: bytes[index..<index + length]) }
                index += length
            }
        }
    }

    /// Reads one escape after the backslash; a `\u` high surrogate must be followed by a `\u` low one.
    private mutating func escape(path: String) throws(StrictJSONError) -> Unicode.Scalar {
        let start = index
        index += 1
        guard let letter = current else {
            throw .syntax(path, "the string ends inside an escape at byte \(start)", at: start)
        }
        index += 1
        switch letter {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try hexUnit(path: path, escapeAt: start)
            switch unit {
            case 0xD800...0xDBFF:
                guard matches("\\u") else { throw loneSurrogate(path, unit, at: start) }
                let lowStart = index
                index += 2
                let low = try hexUnit(path: path, escapeAt: lowStart)
                guard (0xDC00...0xDFFF).contains(low) else { throw loneSurrogate(path, unit, at: start) }
                let combined = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                return Unicode.Scalar(combined)!
            case 0xDC00...0xDFFF:
                throw loneSurrogate(path, unit, at: start)
            default:
                return Unicode.Scalar(unit)!
            }
        default:
            throw .invalidString(
                path, "contains the unknown escape \\\(Character(Unicode.Scalar(letter))) at byte \(start)", at: start)
        }
    }

    private mutating func hexUnit(path: String, escapeAt start: Int) throws(StrictJSONError) -> UInt16 {
        guard index + 4 <= bytes.count else {
            throw .invalidString(path, "contains an incomplete \\u escape at byte \(start)", at: start)
        }
        var unit: UInt16 = 0
        for byte in bytes[index..<index + 4] {
            guard let digit = hexValue(byte) else {
                throw .invalidString(path, "contains a \\u escape without four hex digits at byte \(start)", at: start)
            }
            unit = unit << 4 | UInt16(digit)
        }
        index += 4
        return unit
    }

    private func loneSurrogate(_ path: String, _ unit: UInt16, at offset: Int) -> StrictJSONError {
        .invalidString(
            path,
            "contains the lone surrogate \\u\(String(unit, radix: 16)) at byte \(offset); a surrogate must be one half of a \\uD800–\\uDBFF \\uDC00–\\uDFFF pair",
            at: offset)
    }

    /// The length of the well-formed UTF-8 sequence at `index` (Unicode 15, table 3-7: no
    /// overlong forms, no encoded surrogates, nothing above U+10FFFF).
    private func utf8Sequence(path: String) throws(StrictJSONError) -> Int {
        let lead = bytes[index]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            secondRange = 0x80...0x9F
        case 0xF0:
            length = 4
            secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            secondRange = 0x80...0x8F
        default: throw invalidUTF8(path, at: index)
        }
        guard index + length <= bytes.count, secondRange.contains(bytes[index + 1]) else {
            throw invalidUTF8(path, at: index)
        }
        for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) {
            throw invalidUTF8(path, at: index)
        }
        return length
    }

    private func invalidUTF8(_ path: String, at offset: Int) -> StrictJSONError {
        .invalidString(path, "is not valid UTF-8 (byte \(hex(bytes[offset])) at \(offset))", at: offset)
    }

    // MARK: Bytes

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current,
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
                || byte == UInt8(ascii: "\t")
        {
            index += 1
        }
    }

    private mutating func skipDigits() {
        while let byte = current, isDigit(byte) { index += 1 }
    }

    private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private func matches(_ word: String) -> Bool {
        let utf8 = Array(word.utf8)
        return index + utf8.count <= bytes.count && bytes[index..<index + utf8.count].elementsEqual(utf8)
    }

    private func hex(_ byte: UInt8) -> String {
        "0x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16, uppercase: true)
    }

    /// The byte at `index` as a reader would name it.
    private func describeCurrent() -> String {
        guard let byte = current else { return "the end of the body" }
        if (0x21..<0x7F).contains(byte) { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte \(hex(byte))"
    }
}
