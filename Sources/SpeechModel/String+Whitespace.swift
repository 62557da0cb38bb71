extension StringProtocol {
    /// The text without the characters at either end for which `isTrimmed` holds.
    public func trimming(where isTrimmed: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !isTrimmed($0) }), let last = lastIndex(where: { !isTrimmed($0) })
        else { return "" }
        return String(self[first...last])
    }

    /// The text without white space (spaces, tabs, line breaks) at either end.
    public func trimmingWhitespace() -> String {
        trimming(where: \.isWhitespace)
    }
}
