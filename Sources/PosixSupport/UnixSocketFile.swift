#if canImport(Glibc)
import Glibc
#endif

/// The file a Unix-domain socket is bound to.
public enum UnixSocketFile {
    /// Whether `path` is a socket itself (a symbolic link to one is not).
    public static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK
    }

    /// Removes the socket at `path`, one an earlier bind left or this one's when it is done;
    /// anything else at `path` is left alone.
    public static func remove(_ path: String) {
        if isSocket(path) { unlink(path) }
    }
}
