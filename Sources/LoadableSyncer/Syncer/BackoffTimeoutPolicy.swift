import LoadableSupport

/// A ``TimeoutPolicy`` that refreshes every `period` after a success and retries after failures
/// with an exponentially growing delay, optionally randomised ("jitter").
///
/// After a reset (and after every success) the retry delays are
/// `min, min·m, min·m², …`, capped at `max`, where `m` is the `multiplier`. With the defaults
/// (`m = √2`), `min` 1 s and `max` 15 s:
///
/// `1, 1.414, 2, 2.828, 4, 5.657, 8, 11.31, 15, 15, …` seconds.
///
/// ```swift
/// var policy = BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(15))
/// policy.nextTimeout(afterFailure: true)   // 1 s
/// policy.nextTimeout(afterFailure: true)   // 1.414 s
/// policy.nextTimeout(afterFailure: false)  // 60 s, and the backoff starts over
/// ```
///
/// With ``Jitter-swift.enum/full`` or ``Jitter-swift.enum/equal``, each retry delay `d` of the
/// sequence above is replaced by a random one (see ``Jitter-swift.enum``), so that many clients
/// failing together do not retry together. The random numbers come from the generator given to
/// ``init(period:min:max:multiplier:jitter:maxRetries:random:)``; pass a seeded one in tests. The refresh
/// `period` is never randomised.
///
/// With `maxRetries`, the policy answers `nil` (no retry) once that many retries in a row have
/// failed, until a reset: a success, or the syncer's catch-up (the app active again, the network
/// back, a sync someone else starts). Without it, retries never stop.
///
/// ```swift
/// var capped = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), maxRetries: 2)
/// capped.nextTimeout(afterFailure: true)   // 1 s: the first attempt failed, retry 1
/// capped.nextTimeout(afterFailure: true)   // 1.414 s: retry 1 failed, retry 2
/// capped.nextTimeout(afterFailure: true)   // nil: retry 2 failed too; the syncer stops
/// ```
///
/// Invalid values stop the program with a message naming the value and the valid range:
/// `min <= .zero`, `max < min`, `multiplier < 1` (or not finite), `period < .zero`,
/// `maxRetries < 0`. Any valid values
/// work, however extreme: a huge `multiplier` (`1e30`, `.greatestFiniteMagnitude`) jumps to `max`
/// after the first retry, and no delay ever overflows `Duration`.
///
/// A `Sendable` value; copies are independent (each has its own backoff and its own copy of the
/// generator).
public struct BackoffTimeoutPolicy: TimeoutPolicy {
    /// How retry delays are randomised.
    ///
    /// For a delay `d` taken from the backoff sequence:
    /// - ``none``: exactly `d`.
    /// - ``full``: uniformly random in `0...d` ("full jitter").
    /// - ``equal``: `d/2` plus a uniformly random amount in `0...d/2` ("equal jitter"), so never
    ///   less than half the backoff.
    ///
    /// ```swift
    /// let policy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(30), jitter: .equal)
    /// ```
    public enum Jitter: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// No randomisation: the delays follow the backoff sequence exactly.
        case none
        /// Uniformly random in `0...d`.
        case full
        /// `d/2` plus a uniformly random amount in `0...d/2`.
        case equal

        /// `none`, `full` or `equal`.
        public var description: String {
            switch self {
            case .none: "none"
            case .full: "full"
            case .equal: "equal"
            }
        }
    }

    /// The delay before a refresh after a success; `nil` (or `.zero`) for no refresh.
    public let period: Duration?
    /// The first retry delay after a reset or a success; greater than `.zero`.
    public let min: Duration
    /// The largest retry delay (before jitter); at least ``min``.
    public let max: Duration
    /// How much each retry delay grows over the previous one; at least 1 (1 means a constant delay).
    public let multiplier: Double
    /// How retry delays are randomised.
    public let jitter: Jitter
    /// How many retries in a row may fail before the policy stops answering with a delay; `nil`
    /// for no limit.
    public let maxRetries: Int?

    /// The retry delay the next failure gets, before jitter.
    public private(set) var nextRetryDelay: Duration
    /// The retries handed out since the last reset.
    public private(set) var retryCount = 0

    private var generator: AnyRandomNumberGenerator

    /// Creates a policy with the system's random number generator for jitter.
    ///
    /// Every duration may be as long as `.seconds(Int64.max)` ("practically never"): a syncer's
    /// timer sleeps any delay in chunks on the real clock.
    ///
    /// - Parameters:
    ///   - period: The delay before a refresh after each success; `nil` or `.zero` for none. Not
    ///     negative.
    ///   - min: The first retry delay; greater than `.zero`. One second by default.
    ///   - max: The largest retry delay; at least `min`. One minute by default, so that
    ///     `BackoffTimeoutPolicy()` retries after 1, 1.4, 2, 2.8, … seconds, then every minute.
    ///   - multiplier: The growth of each retry delay over the previous one; at least 1. √2 by
    ///     default, so the delay doubles every two failures.
    ///   - jitter: How retry delays are randomised; none by default.
    ///   - maxRetries: How many retries in a row may fail before the policy answers `nil`; `nil`
    ///     (the default) for no limit. Not negative; `0` never retries.
    public init(
        period: Duration? = nil,
        min: Duration = .seconds(1),
        max: Duration = .seconds(60),
        multiplier: Double = 2.0.squareRoot(),
        jitter: Jitter = .none,
        maxRetries: Int? = nil
    ) {
        self.init(
            period: period,
            min: min,
            max: max,
            multiplier: multiplier,
            jitter: jitter,
            maxRetries: maxRetries,
            random: SystemRandomNumberGenerator()
        )
    }

    /// Creates a policy whose jitter draws from `random`.
    ///
    /// Pass a seeded generator in tests to get a reproducible sequence of delays:
    ///
    /// ```swift
    /// var policy = BackoffTimeoutPolicy(
    ///     min: .seconds(1), max: .seconds(15), jitter: .full, random: SeededRandomNumberGenerator(seed: 42)
    /// )
    /// ```
    ///
    /// - Parameters:
    ///   - period: The delay before a refresh after each success; `nil` or `.zero` for none. Not
    ///     negative.
    ///   - min: The first retry delay; greater than `.zero`.
    ///   - max: The largest retry delay; at least `min`.
    ///   - multiplier: The growth of each retry delay over the previous one; at least 1.
    ///   - jitter: How retry delays are randomised.
    ///   - maxRetries: How many retries in a row may fail before the policy answers `nil`; `nil`
    ///     for no limit. Not negative.
    ///   - random: The generator jitter draws from; the policy keeps its own copy.
    public init(
        period: Duration? = nil,
        min: Duration,
        max: Duration,
        multiplier: Double = 2.0.squareRoot(),
        jitter: Jitter = .none,
        maxRetries: Int? = nil,
        random: some RandomNumberGenerator & Sendable
    ) {
        if let period {
            requireValid(
                period >= .zero,
                "BackoffTimeoutPolicy: period must be >= .zero (or nil for no refresh), got \(period)"
            )
        }
        requireValid(min > .zero, "BackoffTimeoutPolicy: min must be > .zero, got \(min)")
        requireValid(max >= min, "BackoffTimeoutPolicy: max must be >= min (\(min)), got \(max)")
        requireValid(
            multiplier.isFinite && multiplier >= 1,
            "BackoffTimeoutPolicy: multiplier must be a finite number >= 1, got \(multiplier)"
        )
        if let maxRetries {
            requireValid(
                maxRetries >= 0,
                "BackoffTimeoutPolicy: maxRetries must be >= 0 (or nil for no limit), got \(maxRetries)"
            )
        }
        self.maxRetries = maxRetries
        self.period = period
        self.min = min
        self.max = max
        self.multiplier = multiplier
        self.jitter = jitter
        self.nextRetryDelay = min
        self.generator = AnyRandomNumberGenerator(random)
    }

    /// After a failure: the current retry delay (jittered), and the next one grows by
    /// ``multiplier`` up to ``max``; `nil` once ``maxRetries`` retries were handed out since the
    /// last reset. After a success: resets the backoff and returns ``period``.
    ///
    /// - Parameter afterFailure: Whether the last sync failed.
    /// - Returns: The retry delay after a failure (`nil` when the retries are used up); ``period``
    ///   after a success (`nil` when there is no period or it is `.zero`).
    public mutating func nextTimeout(afterFailure: Bool) -> Duration? {
        guard afterFailure else {
            reset()
            guard let period, period > .zero else { return nil }
            return period
        }
        if let maxRetries, retryCount >= maxRetries { return nil }
        retryCount += 1
        let delay = nextRetryDelay
        nextRetryDelay = grown(delay)
        return jittered(delay)
    }

    /// `delay · multiplier`, capped at ``max``, without overflowing.
    ///
    /// `Duration * Double` stops the program when the product does not fit in a `Duration`, which
    /// a huge multiplier (`1e30`) reaches at once. So the product is first estimated in seconds, as
    /// a `Double` (infinity at worst): at twice ``max`` or more the answer is ``max`` without
    /// multiplying; below that (and far from `Duration`'s limit) the delay is multiplied as it
    /// always was, so ordinary sequences are exactly `min, min·m, …`, capped at ``max``.
    private func grown(_ delay: Duration) -> Duration {
        let estimate = (delay / .seconds(1)) * multiplier
        let limit = Swift.min((max / .seconds(1)) * 2, Self.largestMultipliedSeconds)
        guard estimate < limit else { return max }
        return Swift.min(delay * multiplier, max)
    }

    /// The largest product, in seconds, that is computed as a `Duration`: well below the
    /// `Duration` limit (about 1.7e20 seconds), so rounding cannot push it over.
    private static let largestMultipliedSeconds = 1e20

    /// Starts the backoff over: the next retry delay is ``min``, and ``maxRetries`` more retries
    /// may be handed out.
    public mutating func reset() {
        nextRetryDelay = min
        retryCount = 0
    }

    private mutating func jittered(_ delay: Duration) -> Duration {
        let seconds = delay / .seconds(1)
        switch jitter {
        case .none:
            return delay
        case .full:
            return .seconds(Double.random(in: 0...seconds, using: &generator))
        case .equal:
            let half = seconds / 2
            return .seconds(half + Double.random(in: 0...half, using: &generator))
        }
    }
}

/// A type-erased, `Sendable` random number generator (a value: copies are independent).
private struct AnyRandomNumberGenerator: RandomNumberGenerator, Sendable {
    private var base: any RandomNumberGenerator & Sendable

    init(_ base: some RandomNumberGenerator & Sendable) {
        self.base = base
    }

    mutating func next() -> UInt64 {
        base.next()
    }
}
