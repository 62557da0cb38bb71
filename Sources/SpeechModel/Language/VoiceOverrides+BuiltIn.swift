/// The project's `Voices/overrides`, built in so that a process without the file (the CLI's
/// no-daemon mode, a daemon started without `--voices`) resolves tags the same way.
///
/// A test checks that this copy equals `Voices/overrides`; after editing the file, paste it here.
extension VoiceOverrides {
    /// The overrides shipped with speakd.
    public static let builtIn: VoiceOverrides = {
        do {
            return try VoiceOverrides(parsing: builtInText)
        } catch {
            // The text is a constant that a test parses; a failure here is a build defect.
            fatalError("the built-in voice overrides do not parse: \(error)")
        }
    }()

    /// The text of `Voices/overrides` at build time.
    static let builtInText = ##"""
        # speakd voice overrides: BCP 47 tag → espeak-ng voice.
        #
        # Format (see Voices/README.md): one entry per line,
        #
        #   TAG  VOICE  [+VARIANT]
        #
        # TAG is a BCP 47 tag (case-insensitive), VOICE an espeak-ng voice identifier as printed in the
        # File column of `espeak-ng --voices`, +VARIANT an optional espeak-ng variant, for example
        #
        #   en-US  gmw/en-US  +speakd-kiosk
        #
        # A request is resolved by RFC 4647 lookup: `es-AR-x-lobby` tries es-AR-x-lobby, es-AR, es; at
        # each step these overrides are asked before espeak's own voice list, so only tags for which
        # espeak picks the wrong voice (or none) need an entry. Every identifier below was checked against
        # `espeak-ng --voices` (espeak-ng 1.51); a test keeps it that way.

        # English. espeak picks British English for a bare `en`; the likely region for `en` is the US.
        en          gmw/en-US
        en-US       gmw/en-US
        en-CA       gmw/en-US
        en-GB       gmw/en
        # Varieties whose pronunciation is closer to British than to American English.
        en-AU       gmw/en
        en-NZ       gmw/en
        en-IE       gmw/en
        en-ZA       gmw/en
        en-IN       gmw/en
        # The English-speaking Caribbean.
        en-029      gmw/en-029
        en-JM       gmw/en-029
        en-TT       gmw/en-029
        en-BB       gmw/en-029
        en-BS       gmw/en-029

        # Spanish. espeak reads every region as Spain; Latin America and the US get the Latin American voice.
        es          roa/es
        es-ES       roa/es
        es-419      roa/es-419
        es-AR       roa/es-419
        es-BO       roa/es-419
        es-CL       roa/es-419
        es-CO       roa/es-419
        es-CR       roa/es-419
        es-CU       roa/es-419
        es-DO       roa/es-419
        es-EC       roa/es-419
        es-GT       roa/es-419
        es-HN       roa/es-419
        es-MX       roa/es-419
        es-NI       roa/es-419
        es-PA       roa/es-419
        es-PE       roa/es-419
        es-PR       roa/es-419
        es-PY       roa/es-419
        es-SV       roa/es-419
        es-US       roa/es-419
        es-UY       roa/es-419
        es-VE       roa/es-419

        # Portuguese. A bare `pt` is Brazilian (the likely region for `pt`, and most speakers); espeak
        # picks Portugal. Africa and Asia follow the European norm.
        pt          roa/pt-BR
        pt-BR       roa/pt-BR
        pt-PT       roa/pt
        pt-AO       roa/pt
        pt-CV       roa/pt
        pt-GW       roa/pt
        pt-MO       roa/pt
        pt-MZ       roa/pt
        pt-ST       roa/pt
        pt-TL       roa/pt

        # Chinese. `zh` and the Mandarin-speaking regions are Mandarin; Hong Kong and Macau are Cantonese
        # (espeak reads them as Mandarin). espeak has two voices for each; these are the ones that read
        # Latin letters as English rather than as Pinyin or Jyutping.
        zh          sit/cmn
        zh-CN       sit/cmn
        zh-SG       sit/cmn
        zh-TW       sit/cmn
        zh-Hans     sit/cmn
        zh-Hant     sit/cmn
        cmn         sit/cmn
        zh-HK       sit/yue
        zh-MO       sit/yue
        zh-Hant-HK  sit/yue
        zh-Hant-MO  sit/yue
        yue         sit/yue

        # Norwegian. espeak has no Nynorsk voice (and nothing for `nn`); Bokmål is the nearest.
        no          gmq/nb
        nb          gmq/nb
        nn          gmq/nb

        # French: espeak's `fr` voice is France; pin it so the Belgian and Swiss voices never win `fr`.
        fr          roa/fr
        fr-FR       roa/fr
        fr-BE       roa/fr-BE
        fr-CH       roa/fr-CH

        # Armenian: `hy` is Eastern Armenian; espeak's Western voice also lists `hy`.
        hy          ine/hy

        # Klingon: espeak files it under its script's private-use code `piqd`, not under `tlh`
        # (which `i-klingon` canonicalises to).
        tlh         art/piqd

        # Voices whose espeak tag is not a well-formed BCP 47 tag, or is shared with another voice, and
        # that no request could reach otherwise.
        chr                 iro/chr                 # espeak: chr-US-Qaaa-x-west (script after region)
        en-US-x-nyc         gmw/en-US-nyc           # espeak: en-us-nyc (a 3-letter variant)
        yue-Latn-jyutping   sit/yue-Latn-jyutping   # espeak lists it as plain `yue`, like sit/yue
        """##
}
