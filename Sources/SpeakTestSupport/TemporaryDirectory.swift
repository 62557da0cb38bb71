import Foundation

/// A fresh directory for a test's sockets and files. It lives in /tmp, not in a long temporary
/// path: a Unix socket's path must stay under 108 bytes.
public func temporaryDirectory() throws -> URL {
    let url = URL(fileURLWithPath: "/tmp/speakd-test-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
