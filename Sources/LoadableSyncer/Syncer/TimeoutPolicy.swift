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
/// Delays must not be negative: the syncer stops the program with a message naming the policy
/// and the delay.
///
/// A zero delay (retry or refresh) means "at once, once": the syncer's timer fires as soon as the
/// main actor is free. But when the sync a zero delay started ends and the policy answers `.zero`
/// again, with no non-zero delay, no sync by someone else and no app activation in between, the
/// syncer does not honour it: it schedules nothing, as for `nil` (``LoadableSyncer/nextSyncIn`` is
/// `nil`), until something else happens: someone syncs the loadable, the loadable changes state
/// (to success after a failure, for example), or ``LoadableSyncer/appDidBecomeActive()`` retries a
/// failure. A policy that always answers `.zero` thus gets one immediate sync per such event, never
/// a sync on every turn of the main actor.
///
/// ``BackoffTimeoutPolicy`` is the policy most code wants. Policies are `Sendable` values; they are
/// used on the main actor by the syncer that owns them.
public protocol TimeoutPolicy: Sendable {
    /// The delay before the next sync, and advances the policy's state.
    ///
    /// - Parameter afterFailure: `true` when the last sync failed (the delay before a retry),
    ///   `false` when it succeeded (the delay before a refresh; a success also resets a backoff).
    /// - Returns: The delay, `.zero` or more, or `nil` for "do not sync again by yourself"
    ///   (typically no refresh after a success, or no more retries). `.zero` is honoured once in a
    ///   row (see above).
    mutating func nextTimeout(afterFailure: Bool) -> Duration?

    /// Forgets the failures seen so far: the next retry delay is the shortest one again.
    mutating func reset()
}
