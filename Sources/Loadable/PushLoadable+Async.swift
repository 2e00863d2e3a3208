extension PushLoadable where Contents: Sendable {
    /// The loadable's snapshot now and after every notification, as an async sequence.
    ///
    /// Yields the current snapshot first. The sequence ends when the loadable is released or the
    /// consuming task is cancelled.
    ///
    /// ```swift
    /// for await snapshot in photos.snapshots() {
    ///     render(snapshot.phase)
    /// }
    /// ```
    ///
    /// - Parameter bufferingPolicy: What to keep while the consumer is busy; by default only the
    ///   newest snapshot (a view only needs the latest).
    public func snapshots(
        bufferingPolicy: AsyncStream<LoadableSnapshot<Contents>>.Continuation.BufferingPolicy = .bufferingNewest(1)
    ) -> AsyncStream<LoadableSnapshot<Contents>> {
        makeStream(bufferingPolicy: bufferingPolicy) { $0.snapshot }
    }
}

extension Loadable {
    /// Syncs if needed (or always, with `forceSync`), waits for the sync, and returns the contents.
    ///
    /// A sync already running is joined, not restarted, so many tasks may await one sync:
    ///
    /// ```swift
    /// async let a = token.syncedContents()
    /// async let b = token.syncedContents()   // waits for the same sync
    /// let (first, second) = try await (a, b)
    /// ```
    ///
    /// - Parameter forceSync: Start a new sync even if ``needsSync`` is `false` (a running sync is
    ///   still joined rather than restarted).
    /// - Returns: The contents after a successful sync (or the current contents when no sync was
    ///   needed).
    /// - Throws: The loadable's error when the sync fails (``LoadableError/unspecified`` when it
    ///   has none); `CancellationError` when the waiting task is cancelled, or when the sync was
    ///   cancelled and left no contents. Cancelling the waiting task does not cancel the sync.
    public func syncedContents(forceSync: Bool = false) async throws -> Contents {
        if forceSync { sync() } else { syncIfNeeded() }
        try await doneSyncing()
        switch loadableState {
        case .didFailToSync:
            throw error ?? LoadableError.unspecified
        case .idle, .syncing, .didSyncSuccessfully:
            if isContentsAvailable, let contents { return contents }
            if loadableState == .didSyncSuccessfully { throw LoadableError.unspecified }
            throw CancellationError()
        }
    }
}
