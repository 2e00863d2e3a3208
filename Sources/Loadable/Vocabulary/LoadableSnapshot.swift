/// A value copy of a loadable at one moment: its state, contents and error.
///
/// Snapshots are what crosses actors (they are `Sendable` when `Contents` is) and what views
/// `switch` over through ``phase``:
///
/// ```swift
/// switch photos.snapshot.phase {
/// case .idle(let cached), .syncing(let cached): showSpinner(over: cached)
/// case .loaded(let photos): show(photos)
/// case .empty: showEmptyState()
/// case .failed(let error, let cached): showError(error, over: cached)
/// }
/// ```
public struct LoadableSnapshot<Contents> {
    /// The loadable's state when the snapshot was taken.
    public var state: LoadableState
    /// The contents when the snapshot was taken (kept across re-syncs and failures).
    public var contents: Contents?
    /// The error of the last failed sync, if the state is ``LoadableState/didFailToSync``.
    public var error: (any Error)?
    /// Whether the loadable reported its contents as available.
    public var isContentsAvailable: Bool
    /// The error of the last failure, kept while a retry runs, until a sync succeeds (see
    /// ``PushLoadable/lastError``).
    public var lastError: (any Error)?
    /// The number of failures since the last successful sync.
    public var consecutiveFailures: Int

    /// Creates a snapshot from its parts.
    ///
    /// - Parameters:
    ///   - state: The loadable's state.
    ///   - contents: The contents, if any.
    ///   - error: The error of the last failure, if any.
    ///   - isContentsAvailable: Whether contents are available; defaults to `contents != nil`.
    ///   - lastError: The error of the last failure, kept until a success; defaults to `error`.
    ///   - consecutiveFailures: Failures since the last success; defaults to 1 for a failed state,
    ///     0 otherwise.
    public init(
        state: LoadableState,
        contents: Contents? = nil,
        error: (any Error)? = nil,
        isContentsAvailable: Bool? = nil,
        lastError: (any Error)? = nil,
        consecutiveFailures: Int? = nil
    ) {
        self.state = state
        self.contents = contents
        self.error = error
        self.isContentsAvailable = isContentsAvailable ?? (contents != nil)
        self.lastError = lastError ?? error
        self.consecutiveFailures = consecutiveFailures ?? (state == .didFailToSync ? 1 : 0)
    }

    /// Whether a sync runs after one or more failures: "retrying", as opposed to "refreshing".
    public var isRetrying: Bool { state == .syncing && consecutiveFailures > 0 }

    /// What a view should show, as one value to `switch` over.
    public enum Phase {
        /// Not syncing and no outcome to show; `cached` holds contents from earlier, if any.
        case idle(cached: Contents?)
        /// A sync is running; `cached` holds contents from earlier, if any, to keep on screen.
        case syncing(cached: Contents?)
        /// The last sync succeeded with these (non-empty) contents.
        case loaded(Contents)
        /// The last sync succeeded with an empty `Collection` as contents, or with no contents.
        case empty
        /// The last sync failed with this error (``LoadableError/unspecified`` when the loadable
        /// gave none); `cached` holds contents from earlier, if any.
        case failed(any Error, cached: Contents?)
    }

    /// The snapshot as a ``Phase``.
    ///
    /// A successful sync whose contents are an empty `Collection` is ``Phase/empty``, so list
    /// screens can show their empty state without inspecting the contents themselves.
    public var phase: Phase {
        switch state {
        case .idle:
            return .idle(cached: contents)
        case .syncing:
            return .syncing(cached: contents)
        case .didFailToSync:
            return .failed(error ?? LoadableError.unspecified, cached: contents)
        case .didSyncSuccessfully:
            guard let contents else { return .empty }
            if let collection = contents as? any Collection, collection.isEmpty {
                return .empty
            }
            return .loaded(contents)
        }
    }
}

extension LoadableSnapshot: Sendable where Contents: Sendable {}
extension LoadableSnapshot.Phase: Sendable where Contents: Sendable {}

extension LoadableSnapshot: CustomStringConvertible {
    /// `<state, contents available: yes|no>` plus the error, if any.
    public var description: String {
        var text = "\(state), contents available: \(isContentsAvailable ? "yes" : "no")"
        if let error { text += ", error: \(error)" }
        if consecutiveFailures > 0 { text += ", failures: \(consecutiveFailures)" }
        return "<\(text)>"
    }
}
