extension SyncableLoadable {
    /// Syncs if needed (or always, with `forceSync`) and waits for the sync to end.
    ///
    /// A sync already running is joined, not restarted, so many tasks may await one sync. Works
    /// on every syncable loadable: a group waits for its members, a proxy for its target.
    ///
    /// ```swift
    /// try await dashboard.synced()   // a LoadableGroup: returns once every member is done
    /// ```
    ///
    /// - Parameter forceSync: Start a new sync even if ``SyncableLoadable/needsSync`` is `false`
    ///   (a running sync is still joined rather than restarted).
    /// - Throws: The loadable's error when the sync fails (``LoadableError/unspecified`` when it
    ///   has none); `CancellationError` when the waiting task is cancelled (an already-cancelled
    ///   task starts nothing), or when the sync was cancelled and left no contents. Cancelling the
    ///   waiting task does not cancel the sync.
    public func synced(forceSync: Bool = false) async throws {
        try Task.checkCancellation()
        if forceSync { sync() } else { syncIfNeeded() }
        try await doneSyncing()
        // Untracked: waiting is not a read by a view.
        let (state, error, isContentsAvailable) = LoadableCore.readUntracked {
            (loadableState, self.error, self.isContentsAvailable)
        }
        switch state {
        case .didFailToSync:
            throw error ?? LoadableError.unspecified
        case .didSyncSuccessfully:
            return
        case .idle, .syncing:
            // Idle after a cancelled sync: what was there before still counts.
            if isContentsAvailable { return }
            throw CancellationError()
        }
    }
}

extension SyncableLoadable where Self: ContentsLoadable {
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
    /// It works on every loadable that has contents and can sync: a `Loadable`, a
    /// `LoadableProxy`, a mapped loadable, a combined one.
    ///
    /// - Parameter forceSync: Start a new sync even if ``SyncableLoadable/needsSync`` is `false`
    ///   (a running sync is still joined rather than restarted).
    /// - Returns: The contents after a successful sync (or the current contents when no sync was
    ///   needed).
    /// - Throws: The loadable's error when the sync fails (``LoadableError/unspecified`` when it
    ///   has none); `CancellationError` when the waiting task is cancelled (an already-cancelled
    ///   task starts nothing), or when the sync was cancelled and left no contents. Cancelling the
    ///   waiting task does not cancel the sync.
    public func syncedContents(forceSync: Bool = false) async throws -> Contents {
        try await synced(forceSync: forceSync)
        let (state, contents) = LoadableCore.readUntracked {
            (loadableState, isContentsAvailable ? self.contents : nil)
        }
        if let contents { return contents }
        if state == .didSyncSuccessfully { throw LoadableError.unspecified }
        throw CancellationError()
    }
}
