import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Why a file operation failed, as a person reads it: the system's message for the error behind
/// it ("No such file or directory", "Permission denied"), not the error value's dump.
///
/// FoundationEssentials' file errors describe themselves as `CocoaError(code: …, userInfo: …)`;
/// the POSIX error they wrap is what names the cause.
public func fileErrorReason(_ error: any Error) -> String {
    if let error = error as? CocoaError {
        if let underlying = error.underlying as? POSIXError {
            return String(cString: strerror(underlying.code.rawValue))
        }
        switch error.code {
        case .fileReadNoPermission, .fileWriteNoPermission: return String(cString: strerror(EACCES))
        case .fileReadNoSuchFile, .fileNoSuchFile: return String(cString: strerror(ENOENT))
        default: break
        }
    }
    if let error = error as? POSIXError { return String(cString: strerror(error.code.rawValue)) }
    return "\(error)"
}
