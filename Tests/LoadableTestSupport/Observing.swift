public import Loadable
import Observation

/// Runs `body` while `handler` observes `loadable`, and ends the observation when `body` returns.
///
/// For a test that observes a loadable for a few steps and keeps the token only to keep the
/// observation alive; a test whose subject is the token (cancelling or releasing it) keeps its own.
///
/// ```swift
/// var states: [LoadableState] = []
/// observing(loadable, { states.append($0.loadableState) }) {
///     loadable.setSyncing()
///     #expect(states == [.syncing])
/// }
/// ```
///
/// - Parameters:
///   - loadable: The loadable to observe.
///   - handler: Called on the main actor with `loadable` after each of its changes during `body`.
///   - body: The steps to observe.
/// - Returns: What `body` returns.
/// - Throws: What `body` throws.
@MainActor
public func observing<Observed: PureLoadable, Result>(
    _ loadable: Observed,
    _ handler: @escaping @MainActor (Observed) -> Void,
    body: () throws -> Result
) rethrows -> Result {
    let observation = loadable.observe(handler)
    defer { observation.cancel() }
    return try body()
}

/// The same as ``observing(_:_:body:)``, for steps that `await`.
@MainActor
public func observing<Observed: PureLoadable, Result>(
    _ loadable: Observed,
    _ handler: @escaping @MainActor (Observed) -> Void,
    body: () async throws -> Result
) async rethrows -> Result {
    let observation = loadable.observe(handler)
    defer { observation.cancel() }
    return try await body()
}

/// The changes Observation reported for one tracked read (at most one: tracking is one-shot).
public final class ObservationChanges: @unchecked Sendable {
    /// How many changes were reported.
    public var count = 0
}

/// Tracks `read` once with `withObservationTracking` and counts the changes Observation reports.
///
/// ```swift
/// let changes = trackObservationChanges { _ = loadable.contents }
/// loadable.setSyncing()
/// #expect(changes.count == 0)
/// ```
///
/// - Parameter read: The reads to track.
/// - Returns: The counter, updated as Observation reports.
@MainActor
public func trackObservationChanges(_ read: @escaping @MainActor () -> Void) -> ObservationChanges {
    let changes = ObservationChanges()
    withObservationTracking {
        read()
    } onChange: {
        changes.count += 1
    }
    return changes
}
