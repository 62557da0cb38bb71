/// File paths as text, for the few places that split or join them: what `NSString`'s path
/// methods did, without loading Foundation.
public enum PathText {
    /// `path` without its last component: `/run/speakd` for `/run/speakd/socket`, `/` for
    /// `/socket`, `.` for `socket`.
    public static func directory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    /// `name` inside `directory`.
    public static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
