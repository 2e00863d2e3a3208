/// A random number generator that gives the same numbers for the same seed (SplitMix64).
///
/// Inject it wherever the code under test takes a generator — `BackoffTimeoutPolicy`'s jitter,
/// a randomized test's operation sequence — so that a failure can be replayed from its seed.
///
/// ```swift
/// var random = SeededRandomNumberGenerator(seed: 42)
/// let first = Int.random(in: 0..<100, using: &random)
/// var again = SeededRandomNumberGenerator(seed: 42)
/// #expect(Int.random(in: 0..<100, using: &again) == first)
/// ```
///
/// Not for cryptography.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable, Hashable {
    private var state: UInt64

    /// Creates a generator whose sequence is fixed by `seed`.
    ///
    /// - Parameter seed: Any value; different seeds give unrelated sequences.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
