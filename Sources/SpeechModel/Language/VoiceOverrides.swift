import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// BCP 47 tag → renderer voice overrides, read from `Voices/overrides`.
///
/// The format is one entry per line: `TAG  VOICE  [+VARIANT]`, separated by spaces or tabs.
/// `#` starts a comment that runs to the end of the line; blank lines are ignored. `TAG` is a
/// well-formed BCP 47 tag (matched case-insensitively, in canonical form), `VOICE` the renderer's
/// voice identifier (espeak-ng: `gmw/en-US`), `+VARIANT` an optional voice variant
/// (`+speakd-kiosk`). A tag may appear once.
public struct VoiceOverrides: Sendable, Hashable {
    /// One line of the file.
    public struct Entry: Sendable, Hashable {
        public var tag: LanguageTag
        /// The renderer's voice identifier (`gmw/en-US`).
        public var voice: String
        /// A variant applied on top of the voice, without the `+`.
        public var variant: String?
        /// The line of the file the entry came from (1-based), or 0 when built in code.
        public var line: Int

        public init(tag: LanguageTag, voice: String, variant: String? = nil, line: Int = 0) {
            self.tag = tag
            self.voice = voice
            self.variant = variant
            self.line = line
        }
    }

    /// The entries in file order.
    public let entries: [Entry]
    private let byTag: [String: Entry]

    /// Overrides from `entries`; a later entry for the same tag replaces an earlier one.
    public init(_ entries: [Entry] = []) {
        self.entries = entries
        var byTag: [String: Entry] = [:]
        for entry in entries { byTag[entry.tag.canonical.lowercased()] = entry }
        self.byTag = byTag
    }

    /// Parses the text of an overrides file; errors name the line.
    public init(parsing text: String) throws(VoiceOverridesError) {
        var entries: [Entry] = []
        var seen: [String: Int] = [:]
        for (offset, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated()
        {
            let lineNumber = offset + 1
            let content = rawLine.prefix { $0 != "#" }
            let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard !fields.isEmpty else { continue }
            guard fields.count == 2 || fields.count == 3 else {
                throw .malformed(line: lineNumber, "expected 'TAG VOICE [+VARIANT]', found \(fields.count) fields")
            }
            let tag: LanguageTag
            do {
                tag = try LanguageTag(fields[0])
            } catch {
                throw .malformed(line: lineNumber, error.message)
            }
            let voice = fields[1]
            guard Self.isIdentifier(voice), !voice.hasPrefix("+") else {
                throw .malformed(line: lineNumber, "'\(voice)' is not a voice identifier")
            }
            var variant: String?
            if fields.count == 3 {
                let field = fields[2]
                guard field.hasPrefix("+"), field.count > 1, Self.isIdentifier(String(field.dropFirst())) else {
                    throw .malformed(line: lineNumber, "the variant '\(field)' must be '+NAME'")
                }
                variant = String(field.dropFirst())
            }
            let key = tag.canonical.lowercased()
            if let earlier = seen[key] {
                throw .malformed(line: lineNumber, "'\(tag)' is already mapped on line \(earlier)")
            }
            seen[key] = lineNumber
            entries.append(Entry(tag: tag, voice: voice, variant: variant, line: lineNumber))
        }
        self.init(entries)
    }

    /// Reads and parses an overrides file; errors name the file and the line.
    public init(contentsOf url: URL) throws(VoiceOverridesError) {
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw .unreadable(path: url.path, fileErrorReason(error))
        }
        do {
            try self.init(parsing: text)
        } catch {
            throw error.in(path: url.path)
        }
    }

    /// The entry for a tag in canonical form, compared case-insensitively.
    public func entry(for tag: String) -> Entry? {
        byTag[tag.lowercased()]
    }

    private static func isIdentifier(_ string: String) -> Bool {
        !string.isEmpty
            && string.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/-_.+".contains($0)) }
    }
}

/// An overrides file that cannot be read or parsed.
public struct VoiceOverridesError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case malformed
        case unreadable
    }

    private let code: Code
    /// The file, when the overrides were read from one.
    public let path: String?
    /// The 1-based line that is wrong, when there is one.
    public let line: Int?
    public let message: String

    private init(_ code: Code, path: String?, line: Int?, message: String) {
        self.code = code
        self.path = path
        self.line = line
        self.message = message
    }

    /// A stable, machine-readable name for the kind of problem.
    public var kind: String { code.rawValue }

    /// `PATH:LINE: message`, leaving out what is not known.
    public var description: String {
        let location = [path, line.map { "line \($0)" }].compactMap { $0 }.joined(separator: ", ")
        return location.isEmpty ? message : "\(location): \(message)"
    }

    static func malformed(line: Int, _ message: String) -> VoiceOverridesError {
        VoiceOverridesError(.malformed, path: nil, line: line, message: message)
    }

    static func unreadable(path: String, _ message: String) -> VoiceOverridesError {
        VoiceOverridesError(.unreadable, path: path, line: nil, message: message)
    }

    func `in`(path: String) -> VoiceOverridesError {
        VoiceOverridesError(code, path: path, line: line, message: message)
    }
}
