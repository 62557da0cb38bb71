/// The parts of the IANA Language Subtag Registry that canonicalisation needs.
///
/// The service matches tags against voices, so only entries that change which voice a tag
/// reaches are kept: grandfathered tags, extlangs (whose preferred value is the extlang as a
/// language), and deprecated language and region codes with a preferred value.
enum LanguageTagRegistry {
    /// Grandfathered tags (RFC 5646 §2.2.8), lowercased, with their preferred value, or nil when
    /// the registry gives none.
    static let grandfathered: [String: String?] = [
        // Irregular: not well-formed by the langtag production.
        "en-gb-oed": "en-GB-oxendict",
        "i-ami": "ami",
        "i-bnn": "bnn",
        "i-default": nil,
        "i-enochian": nil,
        "i-hak": "hak",
        "i-klingon": "tlh",
        "i-lux": "lb",
        "i-mingo": nil,
        "i-navajo": "nv",
        "i-pwn": "pwn",
        "i-tao": "tao",
        "i-tay": "tay",
        "i-tsu": "tsu",
        "sgn-be-fr": "sfb",
        "sgn-be-nl": "vgt",
        "sgn-ch-de": "sgg",
        // Regular: well-formed, but registered as whole tags.
        "art-lojban": "jbo",
        "cel-gaulish": nil,
        "no-bok": "nb",
        "no-nyn": "nn",
        "zh-guoyu": "cmn",
        "zh-hakka": "hak",
        "zh-min": nil,
        "zh-min-nan": "nan",
        "zh-xiang": "hsn",
    ]

    /// Deprecated language subtags with a preferred value.
    static let deprecatedLanguages: [String: String] = [
        "iw": "he",
        "in": "id",
        "ji": "yi",
        "jw": "jv",
        "mo": "ro",
    ]

    /// Deprecated region subtags with a preferred value.
    static let deprecatedRegions: [String: String] = [
        "BU": "MM",
        "DD": "DE",
        "FX": "FR",
        "TP": "TL",
        "YD": "YE",
        "ZR": "CD",
    ]

    /// Registered extlangs and the one language each may follow; `prefix-extlang` is replaced by
    /// `extlang` (`zh-yue` → `yue`).
    static let extlangPrefixes: [String: String] = {
        var table: [String: String] = [:]
        let byPrefix: [String: [String]] = [
            "zh": [
                "cdo", "cjy", "cmn", "cnp", "cpx", "csp", "czh", "czo", "gan", "hak", "hsn", "lzh",
                "mnp", "nan", "wuu", "yue",
            ],
            "ar": [
                "aao", "abh", "abv", "acm", "acq", "acw", "acx", "acy", "adf", "aeb", "aec", "afb",
                "ajp", "apc", "apd", "arb", "arq", "ars", "ary", "arz", "auz", "avl", "ayh", "ayl",
                "ayn", "ayp", "pga", "shu", "ssh",
            ],
            "ms": [
                "bjn", "btj", "bve", "bvu", "coa", "dup", "hji", "jak", "jax", "kvb", "kvr", "kxd",
                "lce", "lcf", "liw", "max", "meo", "mfa", "mfb", "min", "mqg", "msi", "mui", "orn",
                "pel", "pse", "tmw", "urk", "vkk", "vkt", "xmm", "zlm", "zmi", "zsm",
            ],
            "sgn": [
                "ase", "bfi", "bzs", "csl", "fsl", "gsg", "ise", "jsl", "ncs", "nzs", "rsl", "sfb",
                "sgg", "vgt", "ssp", "swl",
            ],
            "kok": ["gom", "knn"],
            "lv": ["ltg"],
            "sw": ["swc", "swh"],
            "uz": ["uzs"],
            "et": ["ekk", "vro"],
        ]
        for (prefix, extlangs) in byPrefix {
            for extlang in extlangs { table[extlang] = prefix }
        }
        return table
    }()
}
