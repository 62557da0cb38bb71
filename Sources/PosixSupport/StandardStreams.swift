import CPosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// A child's standard input, output and error before it starts: the ends the parent keeps and
/// the ends that become the child's descriptors 0, 1 and 2, every one close-on-exec.
public struct StandardStreams: Sendable {
    /// The parent writes the child's standard input here (with `socket`, the same descriptor as
    /// `output`).
    public let input: Int32
    /// The parent reads the child's standard output here.
    public let output: Int32
    /// The parent reads the child's standard error here.
    public let errors: Int32
    /// The child's standard input, output and error.
    public let theirs: [Int32]

    /// Makes three pipes, or with `socket` one Unix socket pair for standard input and output
    /// (so that descriptors can be passed along it) and a pipe for standard error.
    public init(socket: Bool = false) throws(SpawnError) {
        var made: [Int32] = []
        func pair(_ operation: String, _ create: (UnsafeMutablePointer<Int32>) -> Int32) throws(SpawnError) -> (
            Int32, Int32
        ) {
            var ends: [Int32] = [-1, -1]
            guard create(&ends) == 0 else {
                let error = SpawnError(operation: operation, code: errno)
                for descriptor in made { close(descriptor) }
                throw error
            }
            made += ends
            return (ends[0], ends[1])
        }
        if socket {
            let control = try pair("socketpair", speakd_cloexec_socketpair)
            let standardError = try pair("pipe2", speakd_cloexec_pipe)
            (input, output, errors) = (control.0, control.0, standardError.0)
            theirs = [control.1, control.1, standardError.1]
        } else {
            // The child reads standard input and writes the others.
            let standardInput = try pair("pipe2", speakd_cloexec_pipe)
            let standardOutput = try pair("pipe2", speakd_cloexec_pipe)
            let standardError = try pair("pipe2", speakd_cloexec_pipe)
            (input, output, errors) = (standardInput.1, standardOutput.0, standardError.0)
            theirs = [standardInput.0, standardOutput.1, standardError.1]
        }
    }

    /// Closes the child's ends, once the child (or whoever passes them on) has its copies.
    public func closeTheirs() {
        for descriptor in Set(theirs) { close(descriptor) }
    }

    /// Closes the parent's ends, when no child came of them.
    public func closeOurs() {
        for descriptor in Set([input, output, errors]) { close(descriptor) }
    }
}
