/// A well-formed BCP 47 (RFC 5646) language tag, in canonical casing.
///
/// Parsing is case-insensitive and accepts every well-formed tag: language (2–3 letters with up
/// to three extlangs, 4 letters, or 5–8 letters), script, region, variants, extensions and private
/// use, as well as whole private-use tags (`x-kiosk`) and the grandfathered tags of RFC 5646.
/// The result is canonicalised: subtags are cased by kind (`en-Latn-GB`), grandfathered and
/// deprecated codes are replaced by their preferred values (`i-klingon` → `tlh`, `iw` → `he`,
/// `zh-yue` → `yue`), and extensions are ordered by singleton.
public struct LanguageTag: Sendable, Hashable, CustomStringConvertible {
    /// An extension: a singleton other than `x` and the subtags that follow it (`u-co-phonebk`).
    public struct Extension: Sendable, Hashable, CustomStringConvertible {
        /// The singleton, lowercased (`u`, `t`).
        public let singleton: Character
        /// The subtags after the singleton, lowercased (`co`, `phonebk`).
        public let subtags: [String]

        public var description: String { ([String(singleton)] + subtags).joined(separator: "-") }
    }

    /// The canonical form (`pt-PT`, `zh-Hant-HK`, `sr-Latn`).
    public let canonical: String
    /// The primary language subtag, lowercased (`en`, `yue`).
    ///
    /// Empty for a private-use tag (`x-kiosk`); the whole tag for a grandfathered tag that has
    /// no preferred value (`i-default`, `zh-min`).
    public let language: String
    /// Extended language subtags that remain after canonicalisation, lowercased.
    public let extlangs: [String]
    /// The script subtag in title case (`Hant`), if any.
    public let script: String?
    /// The region subtag in upper case (`GB`) or three digits (`419`), if any.
    public let region: String?
    /// Variant subtags, lowercased, in their order in the tag (`fonipa`, `1996`).
    public let variants: [String]
    /// Extensions, ordered by singleton.
    public let extensions: [Extension]
    /// Private-use subtags after `x`, lowercased (`["kiosk"]` for `en-x-kiosk`).
    public let privateUse: [String]
    /// True for a grandfathered tag that has no preferred value (`i-default`, `cel-gaulish`).
    public let isGrandfathered: Bool

    /// Parses `string`; a malformed tag is an error in the field `language` that names the tag
    /// and what is wrong.
    public init(_ string: String) throws(SpeechInputError) {
        try self.init(string, field: "language")
    }

    /// Parses `string`; a malformed tag is an error in `field` (`spans[1].language`) that names
    /// the tag and what is wrong.
    public init(_ string: String, field: String) throws(SpeechInputError) {
        do {
            self = try Self.parse(string)
        } catch {
            throw .malformed(field: field, "'\(string)' is not a well-formed BCP 47 tag: \(error.reason)")
        }
    }

    private init(
        language: String, extlangs: [String] = [], script: String? = nil, region: String? = nil,
        variants: [String] = [], extensions: [Extension] = [], privateUse: [String] = [],
        isGrandfathered: Bool = false
    ) {
        self.language = language
        self.extlangs = extlangs
        self.script = script
        self.region = region
        self.variants = variants
        self.extensions = extensions
        self.privateUse = privateUse
        self.isGrandfathered = isGrandfathered
        if isGrandfathered {
            canonical = language
        } else {
            var parts: [String] = language.isEmpty ? [] : [language]
            parts += extlangs
            if let script { parts.append(script) }
            if let region { parts.append(region) }
            parts += variants
            parts += extensions.map(\.description)
            if !privateUse.isEmpty { parts += ["x"] + privateUse }
            canonical = parts.joined(separator: "-")
        }
    }

    public var description: String { canonical }

    /// The tags to try, most specific first, when looking this tag up (RFC 4647 §3.4).
    ///
    /// The list starts with the whole tag and removes one subtag at a time from the end; a
    /// singleton (`x`, `u`) left at the end is removed with the subtag after it, so
    /// `zh-Hant-HK-x-foo` gives `zh-Hant-HK-x-foo`, `zh-Hant-HK`, `zh-Hant`, `zh`.
    public var lookupCandidates: [String] {
        var subtags = canonical.split(separator: "-").map(String.init)
        var candidates = [canonical]
        while true {
            subtags.removeLast()
            while subtags.last?.count == 1 { subtags.removeLast() }
            guard !subtags.isEmpty else { return candidates }
            candidates.append(subtags.joined(separator: "-"))
        }
    }
}

extension LanguageTag: Codable {
    /// Decodes a tag from a JSON string; a malformed tag is a `DecodingError.dataCorrupted`
    /// whose description is the parser's message.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        do {
            self = try Self.parse(string)
        } catch {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(string)' is not a well-formed BCP 47 tag: \(error.reason)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(canonical)
    }
}

// MARK: - Parsing

extension LanguageTag {
    /// Why a string is not a well-formed tag, for the message of `SpeechInputError`.
    private struct SyntaxError: Error {
        let reason: String
    }

    private static func parse(_ string: String) throws(SyntaxError) -> LanguageTag {
        guard !string.isEmpty else { throw SyntaxError(reason: "the tag is empty") }
        for (offset, character) in string.enumerated() {
            guard character.isASCII, character.isLetter || character.isNumber || character == "-" else {
                let hint = character == "_" ? " (subtags are separated by '-')" : ""
                throw SyntaxError(reason: "invalid character '\(character)' at position \(offset + 1)\(hint)")
            }
        }
        let subtags = string.lowercased().split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        for (index, subtag) in subtags.enumerated() {
            if subtag.isEmpty { throw SyntaxError(reason: "empty subtag at position \(index + 1)") }
            if subtag.count > 8 {
                throw SyntaxError(reason: "subtag '\(subtag)' at position \(index + 1) is longer than 8 characters")
            }
        }

        let lowered = subtags.joined(separator: "-")
        if let grandfathered = LanguageTagRegistry.grandfathered[lowered] {
            guard let preferred = grandfathered else {
                return LanguageTag(language: lowered, isGrandfathered: true)
            }
            return try parse(preferred)
        }

        var scanner = SubtagScanner(subtags: subtags)
        if subtags[0] == "x" {
            let privateUse = try scanner.privateUse()
            return LanguageTag(language: "", privateUse: privateUse)
        }
        return try scanner.langtag()
    }

    /// Walks the subtags of a `langtag` production (RFC 5646 §2.1) in order.
    private struct SubtagScanner {
        let subtags: [String]
        var index = 0

        init(subtags: [String]) {
            self.subtags = subtags
        }

        private var current: String? { index < subtags.count ? subtags[index] : nil }
        private var position: Int { index + 1 }

        mutating func langtag() throws(SyntaxError) -> LanguageTag {
            var language = try primaryLanguage()
            var extlangs: [String] = []
            while let subtag = current, subtag.count == 3, subtag.isAlpha {
                guard language.count <= 3 else {
                    throw SyntaxError(
                        reason: "extlang '\(subtag)' at position \(position) may only follow a 2–3 letter language")
                }
                guard extlangs.count < 3 else {
                    throw SyntaxError(reason: "more than 3 extlang subtags ('\(subtag)' at position \(position))")
                }
                extlangs.append(subtag)
                index += 1
            }

            var script: String?
            if let subtag = current, subtag.count == 4, subtag.isAlpha {
                script = subtag.prefix(1).uppercased() + subtag.dropFirst()
                index += 1
            }

            var region: String?
            if let subtag = current, (subtag.count == 2 && subtag.isAlpha) || (subtag.count == 3 && subtag.isDigits) {
                region = subtag.uppercased()
                index += 1
            }

            var variants: [String] = []
            while let subtag = current, subtag.isVariant {
                guard !variants.contains(subtag) else {
                    throw SyntaxError(reason: "duplicate variant '\(subtag)' at position \(position)")
                }
                variants.append(subtag)
                index += 1
            }

            var extensions: [Extension] = []
            while let subtag = current, subtag.count == 1, subtag != "x" {
                let singleton = Character(subtag)
                guard !extensions.contains(where: { $0.singleton == singleton }) else {
                    throw SyntaxError(reason: "duplicate extension singleton '\(subtag)' at position \(position)")
                }
                index += 1
                var values: [String] = []
                while let value = current, (2...8).contains(value.count) {
                    values.append(value)
                    index += 1
                }
                guard !values.isEmpty else {
                    throw SyntaxError(
                        reason:
                            "extension '\(subtag)' at position \(position - 1) needs at least one subtag of 2–8 characters"
                    )
                }
                extensions.append(Extension(singleton: singleton, subtags: values))
            }

            var privateUse: [String] = []
            if current == "x" { privateUse = try self.privateUse() }

            if let subtag = current {
                throw SyntaxError(reason: "subtag '\(subtag)' at position \(position) is not valid here")
            }

            // Canonicalisation (RFC 5646 §4.5): extlang form, then deprecated codes.
            if extlangs.count == 1, LanguageTagRegistry.extlangPrefixes[extlangs[0]] == language {
                language = extlangs[0]
                extlangs = []
            }
            language = LanguageTagRegistry.deprecatedLanguages[language] ?? language
            region = region.map { LanguageTagRegistry.deprecatedRegions[$0] ?? $0 }
            extensions.sort { $0.singleton < $1.singleton }

            return LanguageTag(
                language: language, extlangs: extlangs, script: script, region: region,
                variants: variants, extensions: extensions, privateUse: privateUse)
        }

        private mutating func primaryLanguage() throws(SyntaxError) -> String {
            let subtag = subtags[0]
            guard subtag.isAlpha, subtag.count >= 2 else {
                if subtag.count == 1, subtags.count > 1 {
                    throw SyntaxError(reason: "a tag cannot start with the singleton '\(subtag)'")
                }
                throw SyntaxError(reason: "language subtag '\(subtag)' must be 2–8 letters")
            }
            index = 1
            return subtag
        }

        /// `x` followed by one or more subtags of 1–8 characters; consumes the rest of the tag.
        mutating func privateUse() throws(SyntaxError) -> [String] {
            let start = position
            index += 1
            guard current != nil else {
                throw SyntaxError(reason: "private use 'x' at position \(start) needs at least one subtag")
            }
            let rest = Array(subtags[index...])
            index = subtags.count
            return rest
        }
    }
}

extension String {
    fileprivate var isAlpha: Bool { allSatisfy { $0.isASCII && $0.isLetter } }
    fileprivate var isDigits: Bool { allSatisfy { $0.isASCII && $0.isNumber } }

    /// 5–8 alphanumerics, or a digit followed by 3 alphanumerics (RFC 5646 `variant`).
    fileprivate var isVariant: Bool {
        (5...8).contains(count) || (count == 4 && first?.isNumber == true)
    }
}
