extension SyncableLoadable {
    /// Whether the loadable is in use: at least one ``LoadableLease`` of it (from ``lease()``, or
    /// from a store) is alive, a `LoadableSyncer` keeps it fresh, or a group, chain or proxy that
    /// is in use has it as a member or target.
    ///
    /// An invalidated loadable that is in use syncs at once; one that is not only marks itself
    /// stale, and syncs on its next `syncIfNeeded()`. Observing a loadable does not make it in use:
    /// a log line must not cause network traffic.
    ///
    /// Observable through the Observation framework (a change is not a notification of
    /// `addObserver` observers). Always `false` for a type of your own that conforms to
    /// ``SyncableLoadable`` directly rather than through one of the package's classes.
    public var isInUse: Bool {
        guard let owner = loadableCapabilities.owner else { return false }
        owner.core.trackAccess()
        return owner.core.isInUse
    }

    /// Takes a lease on this loadable: until the lease is released (``LoadableLease/release()``, or
    /// the lease object goes away), the loadable ``isInUse``.
    ///
    /// The lease is itself a loadable that stands for this one, so a screen can keep the lease
    /// and nothing else. Taking a lease does not sync.
    ///
    /// ```swift
    /// let feed = feedLoadable.lease()   // in use while the screen keeps `feed`
    /// feed.syncIfNeeded()
    /// feed.invalidate()                 // syncs at once: it is in use
    /// ```
    public func lease() -> LoadableLease<Self> {
        LoadableLease(self)
    }

    /// Counts one use, if this loadable is one of the package's (a type of your own has no count).
    package func beginUseIfCounted() {
        loadableCapabilities.owner?.beginUse()
    }

    /// Ends one use, if this loadable is one of the package's.
    package func endUseIfCounted() {
        loadableCapabilities.owner?.endUse()
    }
}

extension PureLoadable {
    /// Whether the contents are stale, read without telling Observation; `false` for a type of
    /// your own, which has no freshness rules the package knows.
    package var isStaleUntracked: Bool {
        loadableCapabilities.owner?.untrackedIsStale ?? false
    }

    /// The state and availability, read without telling Observation when this is one of the
    /// package's loadables (a type of your own is read through its getters): for a loadable that
    /// stands for this one (a proxy, a lease).
    package var statusUntrackedWherePossible: (state: LoadableState, isContentsAvailable: Bool) {
        if let owner = loadableCapabilities.owner { return owner.untrackedStatus }
        return (loadableState, isContentsAvailable)
    }

    /// The failure record of one of the package's loadables; `nil` for a type of your own.
    package var failureRecordIfKnown: (lastError: (any Error)?, consecutiveFailures: Int)? {
        loadableCapabilities.owner?.failureRecord
    }
}

/// One use of a loadable held by something that does not keep the loadable alive (a syncer): the
/// use begins when this is made and ends on ``end()`` or when this object goes, on any thread.
///
/// `@unchecked Sendable`: the loadable is only touched on the main actor (``end()`` is
/// main-actor-isolated, and a release on another thread hands the ending to the main actor).
package final class WeakLoadableUse: @unchecked Sendable {
    private weak var loadable: (any SyncableLoadable)?

    /// Begins a use of `loadable`, holding it weakly.
    @MainActor
    package init(_ loadable: any SyncableLoadable) {
        self.loadable = loadable
        loadable.beginUseIfCounted()
    }

    /// Ends the use now; calling it again does nothing.
    @MainActor
    package func end() {
        let loadable = loadable
        self.loadable = nil
        loadable?.endUseIfCounted()
    }

    deinit {
        // `end()` cleared the reference; a loadable that is gone has no use to end.
        guard let loadable else { return }
        let object = MainActorObject(loadable)
        runOnMainActor { object.value.endUseIfCounted() }
    }
}
