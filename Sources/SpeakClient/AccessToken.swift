import FoundationEssentials
import Glibc
import PosixSupport
import SpeakAPI
import SpeechModel

/// The bearer token that requests over TCP carry, and the file it lives in.
///
/// The Unix socket is guarded by its group (mode 0660); TCP on 127.0.0.1 reaches every local
/// user and every web page, so there speakd wants `Authorization: Bearer <token>`. At its first
/// start the daemon writes 32 random bytes from the system's generator, as 64 hex digits, to a
/// file of mode 0640 (readable by the group that may use the socket) next to its socket:
/// `/run/speakd/token` or `$XDG_RUNTIME_DIR/speakd/token`. Later starts reuse the file. Clients
/// find it the same way (`find(file:environment:)`).
public enum AccessToken {
    /// The file name next to the socket.
    public static let fileName = "token"
    /// The shortest token accepted from a file or `SPEAKD_TOKEN`.
    public static let minimumLength = 32

    /// 32 bytes from `SystemRandomNumberGenerator` (the kernel's `getrandom`), as 64 hex digits.
    public static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }.lowercaseHex
    }

    /// The token in the file at `path`, without surrounding whitespace.
    public static func read(from path: String) throws(AccessTokenError) -> String {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable(path, reason: fileErrorReason(error))
        }
        return try validated(String(decoding: data, as: UTF8.self), from: path)
    }

    /// What `loadOrCreate(at:)` found or made.
    public struct Loaded: Sendable, Hashable {
        /// The token.
        public var token: String
        /// True when this call wrote the file.
        public var created: Bool
    }

    /// Reads the token at `path`, or writes a new one there (mode 0640) when there is no file.
    ///
    /// The new file is written under a temporary name and linked into place, so a second daemon
    /// starting at the same moment reads a whole token, never half of one. An existing file that
    /// other users may read or write is refused: its token would guard nothing.
    public static func loadOrCreate(at path: String) throws(AccessTokenError) -> Loaded {
        var info = stat()
        if lstat(path, &info) == 0 {
            return Loaded(token: try existing(path, info), created: false)
        }
        let token = generate()
        let temporary = "\(path).\(getpid()).\(UInt32.random(in: .min ... .max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw .unwritable(path, reason: String(cString: strerror(errno))) }
        defer { unlink(temporary) }
        // The umask may have taken bits away; the group must be able to read.
        let bytes = Array((token + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let failure = written != bytes.count || fchmod(descriptor, 0o640) != 0 || fsync(descriptor) != 0
        let reason = String(cString: strerror(errno))
        close(descriptor)
        if failure { throw .unwritable(path, reason: reason) }
        if link(temporary, path) != 0 {
            guard errno == EEXIST, lstat(path, &info) == 0 else {
                throw .unwritable(path, reason: String(cString: strerror(errno)))
            }
            return Loaded(token: try existing(path, info), created: false)
        }
        return Loaded(token: token, created: true)
    }

    /// The files a client looks in when neither `--token-file`, `SPEAKD_TOKEN_FILE` nor
    /// `SPEAKD_TOKEN` is given: next to `$SPEAKD_SOCKET`, then next to the default sockets
    /// (`$XDG_RUNTIME_DIR/speakd/`, `/run/speakd/`).
    public static func defaultFiles(environment: [String: String]) -> [String] {
        var directories: [String] = []
        if let socket = environment["SPEAKD_SOCKET"], !socket.isEmpty {
            directories.append(PathText.directory(of: socket))
        }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            directories.append(runtime + "/speakd")
        }
        directories.append("/run/speakd")
        var seen: Set<String> = []
        return directories.filter { seen.insert($0).inserted }.map { PathText.join($0, fileName) }
    }

    /// The token a client sends over TCP: from `file` (`--token-file`), else `SPEAKD_TOKEN_FILE`,
    /// else `SPEAKD_TOKEN`, else the first of `defaultFiles` that exists; nil when there is none
    /// (a daemon started with `--tcp-open` needs none).
    public static func find(file: String?, environment: [String: String]) throws(AccessTokenError) -> String? {
        if let file { return try read(from: file) }
        if let file = environment["SPEAKD_TOKEN_FILE"], !file.isEmpty { return try read(from: file) }
        if let token = environment["SPEAKD_TOKEN"], !token.isEmpty {
            return try validated(token, from: "SPEAKD_TOKEN")
        }
        for path in defaultFiles(environment: environment) where FileManager.default.fileExists(atPath: path) {
            return try read(from: path)
        }
        return nil
    }

    private static func existing(_ path: String, _ info: stat) throws(AccessTokenError) -> String {
        guard info.st_mode & S_IFMT == S_IFREG else { throw .unreadable(path, reason: "not a regular file") }
        if info.st_mode & 0o007 != 0 {
            throw .tooOpen(path, mode: info.st_mode & 0o777)
        }
        return try read(from: path)
    }

    private static func validated(_ text: String, from source: String) throws(AccessTokenError) -> String {
        let token = text.trimmingWhitespace()
        // Visible ASCII only: the token goes into a header line as it is.
        guard token.utf8.count >= minimumLength, token.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw .malformed(source)
        }
        return token
    }
}

/// A token file that cannot be used; the message names the file and what to do.
public struct AccessTokenError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case unreadable
        case unwritable
        case malformed
        case tooOpen
    }

    private let code: Code
    public let description: String

    static func unreadable(_ path: String, reason: String) -> AccessTokenError {
        AccessTokenError(code: .unreadable, description: "cannot read the token file \(path): \(reason)")
    }

    static func unwritable(_ path: String, reason: String) -> AccessTokenError {
        AccessTokenError(code: .unwritable, description: "cannot write the token file \(path): \(reason)")
    }

    static func malformed(_ source: String) -> AccessTokenError {
        AccessTokenError(
            code: .malformed,
            description:
                "the token in \(source) is not usable: it must be at least \(AccessToken.minimumLength) visible ASCII characters"
        )
    }

    static func tooOpen(_ path: String, mode: mode_t) -> AccessTokenError {
        AccessTokenError(
            code: .tooOpen,
            description:
                "the token file \(path) has mode 0\(String(mode, radix: 8)), so every user can see or change it; "
                + "run chmod 0640 \(path)")
    }
}
