import FoundationEssentials
import SpeakdVersion

#if canImport(Glibc)
import Glibc
#endif

/// The documents made from `DaemonConfiguration.settings`, so that they say what `--help` says
/// and never drift from it: the commented config file the Debian package installs as
/// `/etc/speakd/speakd.conf`, and the manual page speakd(8).
///
/// `speakd --print-config-file` and `speakd --print-manual-page` print them (`debian/rules` runs
/// the built daemon for them); they are not settings, and nothing else is done.
extension SpeakdCommand {
    /// The flags that print a document instead of running, with the documents they print.
    public static let documents: [(flag: String, document: @Sendable () -> String)] = [
        ("--print-config-file", { configFile() }),
        ("--print-manual-page", { manualPage() }),
    ]

    /// The document `arguments` (the command line after the program name) asks for, if it is
    /// exactly one of `documents`' flags.
    public static func document(for arguments: [String]) -> String? {
        guard arguments.count == 1 else { return nil }
        return documents.first { $0.flag == arguments[0] }?.document()
    }

    /// Every setting, commented out at its default, under its help wrapped in comments:
    /// uncommented, each line gives the built-in default (with the system unit's
    /// `RUNTIME_DIRECTORY=/run/speakd`), the voices and chimes where the package installs them.
    public static func configFile() -> String {
        var lines = [
            "# speakd configuration: /etc/speakd/speakd.conf for the system unit; the user",
            "# unit reads ~/.config/speakd/speakd.conf when that exists, else this file.",
            "# One 'key = value' per line; '#' starts a comment. The keys are the long flag",
            "# names of `speakd --help` and speakd(8); SPEAKD_<KEY> environment variables",
            "# (Environment= in a drop-in: systemctl edit speakd) and flags override them.",
            "# Every setting is shown commented out at its built-in default. Generated from",
            "# speakd's settings by `speakd --print-config-file`.",
        ]
        for setting in DaemonConfiguration.settings {
            lines.append("")
            lines += wrap(setting.help, width: 78, prefix: "# ")
            if setting.fileDefault != nil {
                lines += wrap("Default: \(setting.defaultDescription).", width: 78, prefix: "# ")
            }
            lines.append("#\(setting.key) = \(setting.fileDefault ?? setting.defaultDescription)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// speakd(8) in man(7) markup: the abstract, how settings are given, every setting with its
    /// value, default and environment variable, and the files of the installed daemon.
    public static func manualPage() -> String {
        var page = [
            #".\" Generated from speakd's settings by `speakd --print-manual-page`; do not edit."#,
            ".TH SPEAKD 8 \(manualDate()) \"speakd \(SpeakdVersion.current)\" \"System Administration\"",
            // Left-aligned, no hyphenation: flags, paths and variable names stay whole.
            ".ad l",
            ".nh",
            ".SH NAME",
            #"speakd \- speech announcement daemon for kiosks"#,
            ".SH SYNOPSIS",
            #".B speakd"#,
            #"[\fB\-\-\fIsetting\fR \fIvalue\fR ...]"#,
            #"[\fB\-\-config\fR \fIfile\fR]"#,
            ".br",
            #".B speakd \-\-help\fR | \fB\-\-version"#,
            ".SH DESCRIPTION",
            roff(configuration.abstract),
        ]
        for paragraph in overview.split(separator: "\n\n") {
            page += [".PP", roff(String(paragraph))]
        }
        page += [
            ".SH OPTIONS",
            ".TP",
            #"\fB\-\-config\fR \fIfile\fR"#,
            roff(
                "The config file of 'key = value' lines; it must exist. Default: \(ConfigurationLoader.configVariable), "
                    + "else the first that exists of $CONFIGURATION_DIRECTORY/speakd.conf and "
                    + "\(ConfigurationLoader.defaultConfigPath)."),
        ]
        for setting in DaemonConfiguration.settings {
            let label =
                setting.kind == .toggle
                ? #"\fB\#(roff(setting.flag))\fR"# : #"\fB\#(roff(setting.flag))\fR \fI\#(roff(setting.valueName))\fR"#
            var text = "\(setting.help) Default: \(setting.defaultDescription)."
            text += " Environment: \(setting.environmentName); file: \(setting.key) = …"
            if setting.kind == .keyed { text += " (one line per entry: \(setting.key).NAME = …)" }
            text += "."
            page += [".TP", label, roff(text)]
        }
        page += [
            ".TP", #"\fB\-\-help\fR"#, "Print the settings with their defaults, and exit.",
            ".TP", #"\fB\-\-version\fR"#, "Print speakd's version, and exit.",
            ".SH SIGNALS",
            roff(
                "On SIGTERM or SIGINT speakd closes its listeners, finishes the speaking announcement and every "
                    + "waiting one with the reason 'shutdown', removes its socket and exits 0."),
            ".SH FILES",
            ".TP", #"\fI/etc/speakd/speakd.conf\fR"#,
            "The config file, every setting commented out at its default.",
            ".TP", #"\fI/run/speakd/speakd.sock\fR"#,
            "The Unix socket of the system service (mode 0660); members of the group speakd may connect.",
            ".TP", #"\fI/run/speakd/token\fR"#,
            "The bearer token TCP requests must carry (mode 0640, group speakd).",
            ".TP", #"\fI/usr/share/speakd/voices\fR"#,
            "Voice overrides, espeak-ng voice variants and chimes.",
            ".TP", #"\fI/usr/libexec/speakd/speakd\-engine\-worker\fR"#,
            "The sandboxed process that renders speech; speakd starts --engine-workers of them.",
            ".TP", #"\fI/usr/lib/systemd/system/speakd.service\fR"#,
            "The system service; the user service for a desktop session is in /usr/lib/systemd/user.",
            ".SH SEE ALSO",
            #".BR speak (1),"#,
            #".BR espeak\-ng (1),"#,
            #".BR systemctl (1),"#,
            #".BR sysusers.d (5),"#,
            #".BR tmpfiles.d (5)"#,
        ]
        return page.joined(separator: "\n") + "\n"
    }

    /// Text for man(7): backslashes and dashes escaped, no line starting with a control character.
    static func roff(_ text: String) -> String {
        let escaped = text.replacing("\\", with: "\\e").replacing("-", with: "\\-")
            .replacing("\n", with: " ")
        return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
    }

    /// The page's date: `SOURCE_DATE_EPOCH` (which dpkg-buildpackage sets from the changelog), so
    /// a rebuild makes the same page, else today; `2026-11-26`.
    public static func manualDate(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        var seconds = environment["SOURCE_DATE_EPOCH"].flatMap { Int($0) } ?? Int(time(nil))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let month = parts.tm_mon + 1
        let day = parts.tm_mday
        return "\(parts.tm_year + 1900)-\(month < 10 ? "0" : "")\(month)-\(day < 10 ? "0" : "")\(day)"
    }

    /// `text` in lines of at most `width` columns, each starting with `prefix`.
    static func wrap(_ text: String, width: Int, prefix: String) -> [String] {
        var lines: [String] = []
        var line = prefix
        for word in text.split(separator: " ") {
            if line.count > prefix.count, line.count + 1 + word.count > width {
                lines.append(line)
                line = prefix
            }
            line += (line.count > prefix.count ? " " : "") + word
        }
        lines.append(line)
        return lines
    }
}
