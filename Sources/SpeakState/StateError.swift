internal import GRDB

/// A failure of the state database: a file that cannot be used at start, or a write that did not land.
///
/// Built from SQLite's result code and its own message, plus what the store was doing. Switch on
/// ``kind`` (`case .diskFull:`), or match a thrown error directly (`catch StateError.Kind.diskFull`).
public struct StateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a value that can grow new cases without breaking a `switch` (it has a `default`).
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Code: Sendable, Hashable {
            case corrupt, inaccessible, unsafe, newerSchema, diskFull, ioError, failed
        }
        fileprivate let code: Code

        /// The file is not a database, or is damaged: it must be moved aside or restored by hand.
        public static let corrupt = Kind(code: .corrupt)
        /// The file or its directory cannot be created, opened or written (permissions, a missing parent).
        public static let inaccessible = Kind(code: .inaccessible)
        /// The state directory is not speakd's user's alone (another owner, writable by its group or
        /// others), or the file is a symbolic link: speakd does not start on it.
        public static let unsafe = Kind(code: .unsafe)
        /// The file was written by a newer speakd whose schema this code does not know.
        public static let newerSchema = Kind(code: .newerSchema)
        /// The file system is full (`SQLITE_FULL`): the write was rolled back.
        public static let diskFull = Kind(code: .diskFull)
        /// The disk reported an input/output error (`SQLITE_IOERR`): the write was rolled back.
        public static let ioError = Kind(code: .ioError)
        /// Any other SQLite failure.
        public static let failed = Kind(code: .failed)

        public var description: String { "\(code)" }

        /// Matches a thrown error of this kind, so `catch StateError.Kind.diskFull { … }` works.
        public static func ~= (kind: Kind, error: any Error) -> Bool {
            (error as? StateError)?.kind == kind
        }
    }

    /// What went wrong.
    public let kind: Kind
    /// The database file (or, when it could not be created, its directory).
    public let path: String
    /// What the store was doing (`open`, `record an audit entry`).
    public let operation: String
    /// SQLite's own message, or the system's for a directory.
    public let message: String
    /// SQLite's extended result code, when SQLite reported the failure.
    public let resultCode: Int32?

    init(_ kind: Kind, path: String, operation: String, message: String, resultCode: Int32? = nil) {
        self.kind = kind
        self.path = path
        self.operation = operation
        self.message = message
        self.resultCode = resultCode
    }

    /// Wraps whatever GRDB threw; a `StateError` thrown from inside a database closure passes through.
    init(_ error: any Error, path: String, operation: String) {
        if let error = error as? StateError {
            self = error
            return
        }
        guard let error = error as? DatabaseError else {
            self.init(.failed, path: path, operation: operation, message: "\(error)")
            return
        }
        let kind: Kind =
            switch error.resultCode {
            case .SQLITE_FULL: .diskFull
            case .SQLITE_IOERR: .ioError
            case .SQLITE_NOTADB, .SQLITE_CORRUPT: .corrupt
            case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY, .SQLITE_AUTH: .inaccessible
            default: .failed
            }
        // Only SQLite's message: GRDB's description can carry the statement, and the message never
        // carries bound values, so no announcement text reaches a log through this error.
        self.init(
            kind, path: path, operation: operation,
            message: error.message ?? "SQLite error \(error.resultCode.rawValue)",
            resultCode: error.extendedResultCode.rawValue)
    }

    /// True when the file system is full: the caller marks its health degraded and keeps going.
    public var isDiskFull: Bool { kind == .diskFull }

    /// True when the file cannot be used at all, so the daemon must not start on it.
    public var isUnusable: Bool {
        kind == .corrupt || kind == .inaccessible || kind == .unsafe || kind == .newerSchema
    }

    public var description: String {
        switch kind.code {
        case .corrupt:
            "the state database \(path) cannot be used (\(message)): move it aside and speakd starts with a new one, "
                + "or restore it from a backup"
        case .inaccessible:
            "the state database \(path) cannot be opened for writing (\(message)): check that its directory exists "
                + "and that speakd's user owns it and can write to it"
        case .unsafe:
            "the state directory or database \(path) is refused (\(message)): the state directory must be owned "
                + "by speakd's user and writable by it alone (mode 0700), and the database must not be a symbolic link"
        case .newerSchema:
            "the state database \(path) was written by a newer speakd (\(message)): run that version, "
                + "or move the file aside and speakd starts with a new one"
        case .diskFull:
            "the state database \(path) could not \(operation): the disk is full (\(message)); "
                + "free space on its file system"
        case .ioError:
            "the state database \(path) could not \(operation): input/output error (\(message)); "
                + "check the disk and the system log"
        case .failed:
            "the state database \(path) could not \(operation) (\(message))"
        }
    }
}
