/// The bounds on renders without queueing (`POST /v1/speech`, a Wyoming `synthesize`), whichever
/// front asks: each render's audio, and how many hold audio at once.
public struct RenderLimits: Sendable, Hashable {
    /// The longest audio one render makes, in seconds (`--max-speech-seconds`): past it the
    /// render stops with 413 `tooLarge` naming the field that carries the text.
    public var maxSeconds: Int
    /// How many renders hold audio at once; more wait for one of them.
    public var maxConcurrent: Int
    /// How many renders may wait for a slot (429 `tooManyRenders` beyond).
    public var maxWaiting: Int

    /// - Parameters: see the properties of the same names.
    public init(maxSeconds: Int = 20 * 60, maxConcurrent: Int = 2, maxWaiting: Int = 64) {
        self.maxSeconds = maxSeconds
        self.maxConcurrent = maxConcurrent
        self.maxWaiting = maxWaiting
    }
}
