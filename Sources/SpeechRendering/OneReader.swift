/// An async iterator that one task at a time reads, shared by reference so it can be handed on
/// (from a request to its streamed body, or into `AsyncThrowingStream(unfolding:)`, which needs
/// a `Sendable` closure). A stream has one reader; two tasks never call `next()` at once, which
/// is what makes the unchecked `Sendable` sound.
///
/// Pulling through it keeps a producer's pace tied to its reader: the stream built on it asks
/// for the next element only when its own reader does, so nothing runs ahead unread.
public final class OneReader<Base: AsyncIteratorProtocol>: @unchecked Sendable {
    private var base: Base

    public init(_ base: Base) {
        self.base = base
    }

    public func next() async throws -> Base.Element? {
        try await base.next()
    }
}

extension AsyncThrowingStream where Failure == any Error {
    /// A stream that takes each element from `iterator` when its own reader asks for it, after
    /// `taken` has seen it; dropping the stream drops the iterator (and what it reads).
    public init<Base: AsyncIteratorProtocol>(
        pulling iterator: Base, taken: @escaping @Sendable (Element) -> Void = { _ in }
    ) where Base.Element == Element {
        let reader = OneReader(iterator)
        self.init {
            guard let element = try await reader.next() else { return nil }
            taken(element)
            return element
        }
    }
}
