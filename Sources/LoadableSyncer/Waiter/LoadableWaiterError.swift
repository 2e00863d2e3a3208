/// Why a ``LoadableWaiter`` wait failed.
///
/// ```swift
/// do {
///     let token = try await tokenWaiter.wait()
/// } catch LoadableWaiterError.timedOut {
///     // The token did not arrive in time: a slow network, a server that does not answer.
/// } catch LoadableWaiterError.targetFailed(let error) {
///     // The token cannot be had (the credentials were refused): ask the user to log in again.
///     print("no token:", error)
/// }
/// ```
///
/// Equatable: two ``targetFailed(_:)`` values are equal when their errors have the same type and
/// the same description (`String(describing:)`), so `== .timedOut` and
/// `#expect(throws: LoadableWaiterError.timedOut)` work as they read. Hashable to match.
///
/// ``RetryAfterProviding``, with no hint: ``timedOut`` may be retried (the target may come in
/// time next time), ``targetFailed(_:)`` may not (a retry fails the same way until the target
/// syncs again), so a `LoadableSyncer` of a loadable whose sync waits for a token retries a
/// timeout and stops after a refused token.
public enum LoadableWaiterError: Error, Sendable, Hashable, CustomStringConvertible, RetryAfterProviding {
    /// The condition did not hold before the waiter's timeout.
    case timedOut
    /// The target failed and its waiter's syncer will not retry it (its error may not be
    /// retried, or the retries are used up): the wait failed at once, with the target's error.
    ///
    /// Every wait fails this way, pending or later, until the target syncs again (a sync someone
    /// else starts, such as a new login); a wait never starts that sync itself.
    case targetFailed(any Error)

    /// A readable explanation of the error, with the target's error for ``targetFailed(_:)``.
    public var description: String {
        switch self {
        case .timedOut: "Timed out waiting for the loadable"
        case .targetFailed(let error): "The loadable waited for failed: \(error)"
        }
    }

    /// `nil`: a waiter has no hint of when to come back.
    public var retryAfter: Duration? { nil }

    /// `true` for ``timedOut``; `false` for ``targetFailed(_:)``, which a retry cannot fix before
    /// the target syncs again.
    public var isRetryable: Bool {
        switch self {
        case .timedOut: true
        case .targetFailed: false
        }
    }

    /// Whether `lhs` and `rhs` are the same case, with errors of the same type and description.
    ///
    /// - Parameters:
    ///   - lhs: An error.
    ///   - rhs: Another error.
    /// - Returns: `true` when they are equal.
    public static func == (lhs: LoadableWaiterError, rhs: LoadableWaiterError) -> Bool {
        switch (lhs, rhs) {
        case (.timedOut, .timedOut):
            true
        case (.targetFailed(let left), .targetFailed(let right)):
            type(of: left) == type(of: right) && String(describing: left) == String(describing: right)
        case (.timedOut, _), (.targetFailed, _):
            false
        }
    }

    /// Hashes the case and, for ``targetFailed(_:)``, the error's type and description.
    ///
    /// - Parameter hasher: The hasher to feed.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .timedOut:
            hasher.combine(0)
        case .targetFailed(let error):
            hasher.combine(1)
            hasher.combine(ObjectIdentifier(type(of: error)))
            hasher.combine(String(describing: error))
        }
    }
}
