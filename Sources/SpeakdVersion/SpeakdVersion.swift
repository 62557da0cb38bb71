/// speakd's version, set in one place: the top entry of `debian/changelog`
/// (`speakd (0.1.0) unstable; …`), which the EmbedVersion plugin compiles in as `changelog`.
///
/// Release builds (`scripts/build-release`, the Debian package) report that version as it is;
/// debug builds report it with `-dev` after it (`0.1.0-dev`), since they are development builds
/// of whatever the tree holds, not the release the changelog names.
public enum SpeakdVersion {
    /// `0.1.0`, or `0.1.0-dev` in a debug build.
    public static let current: String = {
        #if SPEAKD_RELEASE
        released
        #else
        released + "-dev"
        #endif
    }()

    /// The version in parentheses on the changelog's first line.
    static var released: String {
        let firstLine = changelog.prefix { $0 != "\n" }
        guard let open = firstLine.firstIndex(of: "("), let close = firstLine.firstIndex(of: ")"), open < close
        else { return "unknown" }
        return String(firstLine[firstLine.index(after: open)..<close])
    }
}
