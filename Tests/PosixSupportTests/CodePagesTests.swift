import PosixSupport
import SpeakTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `CodePages.release()` against the kernel's own account of this process's mappings.
@Suite("Code pages")
struct CodePagesTests {
    @Test("Every code mapping of a file is released, and most of its pages leave the process")
    func releasesEveryCodeMapping() {
        let before = ProcessTable.codeMappings(of: getpid())
        let resident = before.reduce(0) { $0 + $1.residentKiB }
        #expect(resident > 1_024, "the test process has its code mapped")
        let released = CodePages.release()
        let after = ProcessTable.codeMappings(of: getpid())
        #expect(released == before.reduce(0) { $0 + $1.bytes }, "every executable mapping of a file, whole")
        // What still runs (this test, tests beside it) maps some of it again at once.
        let residentAfter = after.reduce(0) { $0 + $1.residentKiB }
        #expect(residentAfter < resident / 2, "resident code: \(resident) KiB before, \(residentAfter) KiB after")
        #expect(after.count == before.count, "the mappings themselves stay")
    }
}
