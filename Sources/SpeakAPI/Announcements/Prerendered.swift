/// The answer to `POST /v1/prerender`: how much audio was rendered (and is now in the render
/// cache, unless it is off or the render was over a quarter of it).
public struct Prerendered: Sendable, Hashable, Codable {
    public var samples: Int
    public var seconds: Double

    public init(samples: Int, seconds: Double) {
        self.samples = samples
        self.seconds = seconds
    }
}
