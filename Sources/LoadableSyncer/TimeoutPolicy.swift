/// Decides how long a ``LoadableSyncer`` waits before the next sync.
///
/// A policy is a value with state (how far a backoff has grown). The syncer owns its own copy and
/// asks it for a delay on every *transition* of its loadable to a finished state:
/// after a failure for the retry delay, after a success for the refresh delay (which also resets
/// the backoff).
///
/// ```swift
/// /// Retries every 5 seconds, never refreshes.
/// struct FixedRetryPolicy: TimeoutPolicy {
///     mutating func nextTimeout(afterFailure: Bool) -> Duration? {
///         afterFailure ? .seconds(5) : nil
///     }
///     mutating func reset() {}
/// }
/// let syncer = LoadableSyncer(token, timeoutPolicy: FixedRetryPolicy())
/// ```
///
/// ``BackoffTimeoutPolicy`` is the policy most code wants. Policies are `Sendable` values; they are
/// used on the main actor by the syncer that owns them.
public protocol TimeoutPolicy: Sendable {
    /// The delay before the next sync, and advances the policy's state.
    ///
    /// - Parameter afterFailure: `true` when the last sync failed (the delay before a retry),
    ///   `false` when it succeeded (the delay before a refresh; a success also resets a backoff).
    /// - Returns: The delay, or `nil` for "do not sync again by yourself" (typically no refresh after a
    ///   success, or no more retries).
    mutating func nextTimeout(afterFailure: Bool) -> Duration?

    /// Forgets the failures seen so far: the next retry delay is the shortest one again.
    mutating func reset()
}
