import CPosixSupport

/// The pages of a process's code (its program's and its shared libraries'), which an idle
/// process can hand back.
///
/// Code is mapped from its files, and Linux maps the pages around each page a process runs (its
/// fault-around, 64 kB), so a daemon that started up or spoke once keeps most of its code and
/// its libraries' mapped: about 16 MB of the 38 MB of PSS that speakd with two workers held idle
/// was code, of which an idle process runs almost none. Those pages are clean copies of the
/// files, so dropping the mappings costs nothing to keep: they stay in the page cache (where the
/// kernel can reclaim them like any cache) and the next call into one maps it again with a minor
/// fault, without reading the disk while the cache holds it.
public enum CodePages {
    /// Drops this process's mappings of its code (`MADV_DONTNEED` on every loaded object's
    /// executable, read-only segments; the vDSO, and an object that relocates its own code, are
    /// left alone). Safe while other threads run: they map what they run again. Returns the
    /// bytes of address space dropped. Call when the process is about to sit idle.
    @discardableResult
    public static func release() -> Int {
        Int(speakd_release_code_pages())
    }
}
