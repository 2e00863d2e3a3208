/// A loadable that stands for another one: the one mechanism behind both proxies, `map`, leases,
/// keyed proxies and combined loadables.
///
/// A forwarding type names what it stands for (``followed``); this protocol gives it the rest,
/// and ``LoadableFollowing`` the subscription to it:
/// - **reads**: the tracked reads its public getters return (``forwardedState``,
///   ``forwardedError``, ``forwardedIsContentsAvailable``, ``forwardedContents``), and the
///   untracked ones the package's bookkeeping uses (status, staleness, failure record);
/// - **in use**: a use of the forwarding loadable is a use of a syncable ``followed``;
/// - **requests**: ``forwardSync()``, ``forwardSyncIfNeeded()``, ``forwardInvalidate()``,
///   ``forwardCancelSync()``, ``forwardMutate(optimistic:commit:reconcile:)`` and
///   ``forwardedNeedsSync(default:)``.
///
/// Each type adds only what makes it different: a proxy's changeable target and its sync before a
/// target exists, a mapped loadable's transform, a lease's release, a keyed proxy's key and
/// placeholder, a combined loadable's contents.
@MainActor
package protocol LoadableForwarding: LoadableCoreOwner {
    /// The type of loadable this one stands for.
    associatedtype Followed: PureLoadable
    /// What this loadable stands for now; `nil` when nothing (it is then idle, with no contents
    /// and no error, unless it shows a state of its own).
    var followed: Followed? { get }
    /// Called at every change of ``followed``: by default ``announceChange(_:)``. Types that
    /// derive values from it update them in between.
    func followedDidNotify()
    /// Whether ``followed`` is the same loadable for this one's whole life (a lease): its
    /// forwarded getters then tell Observation of a read of ``followed`` only, whose registrar is
    /// told of every change they show. `false` (the default): of this loadable's own too, which a
    /// change of ``followed`` is told to.
    static var followedNeverChanges: Bool { get }
}

/// A ``LoadableForwarding`` loadable that follows what it stands for as an immediate observer of
/// it, through a ``LoadableFollower`` it keeps (a combined loadable follows its group through the
/// group's member-change handler instead).
///
/// ``follow()`` subscribes to ``LoadableForwarding/followed`` (held weakly, so the forwarding
/// loadable may be released on another thread while the followed one notifies) and calls
/// ``LoadableForwarding/followedDidNotify()`` at each of its changes; ``stopFollowing()`` ends it;
/// ``followedDidChange(from:beforeFollowing:)`` moves everything to a new one.
@MainActor
package protocol LoadableFollowing: LoadableForwarding {
    /// The subscription to ``LoadableForwarding/followed``.
    var follower: LoadableFollower { get set }
    /// Whether this loadable follows ``LoadableForwarding/followed`` only while it has observers
    /// of its own (a lease, a keyed proxy: one that nobody observes must not count as an observer
    /// of what it stands for, which would, say, start an `AutosyncLoadable`'s timer); `false` (the
    /// default): always (a proxy, `map`: what they derive is up to date at every change).
    /// Observation needs no subscription either way: every getter reads the followed loadable's,
    /// which Observation tracks too.
    static var followsOnlyWhileObserved: Bool { get }
}

extension LoadableForwarding {
    package func followedDidNotify() {
        // Readers of this loadable's contents track ``followed``'s too, but one that is not built
        // on a core may not tell Observation: its readers are told here when they may have changed.
        announceChange(changesContents: LoadableCore.followedChangeMayHaveChangedContents)
    }

    package static var followedNeverChanges: Bool { false }

    /// Tells Observation of a read of this loadable's own state, unless ``followed`` never
    /// changes and there is one (whose tracked getter the forwarded getters read).
    private func trackForwardedAccess() {
        if Self.followedNeverChanges, followed != nil { return }
        core.trackAccess()
    }

    /// Tells Observation of a read of this loadable's own contents (mutated when ``followed`` is
    /// replaced), unless ``followed`` never changes and there is one. A change of the contents of
    /// ``followed`` reaches the reader through ``followed``'s own tracked getter.
    private func trackForwardedContentsAccess() {
        if Self.followedNeverChanges, followed != nil { return }
        core.trackContentsAccess()
    }

    /// Tells Observation and the observers that this loadable changed, running `update` (values
    /// derived from ``followed``) after Observation's `willSet` and before the observers.
    ///
    /// - Parameters:
    ///   - changesContents: Whether the contents this loadable shows change too (it stands for
    ///     another loadable now): readers of its contents are told. A change of ``followed``'s
    ///     contents reaches them through ``followed``'s getter.
    ///   - update: Updates values derived from ``followed``.
    @inline(__always)
    package func announceChange(changesContents: Bool = false, _ update: () -> Void = {}) {
        core.willChange()
        if changesContents { core.willChangeContents() }
        update()
        core.didChange(NotificationSubject(self), changedContents: changesContents)
    }
}

extension LoadableFollowing {
    package static var followsOnlyWhileObserved: Bool { false }

    /// Starts following when the first observer arrives, if it follows only while observed.
    package func observersDidBecomeNonEmpty() {
        if Self.followsOnlyWhileObserved { follow() }
    }

    /// Stops following when the last observer leaves, if it follows only while observed.
    package func observersDidBecomeEmpty() {
        if Self.followsOnlyWhileObserved { stopFollowing() }
    }

    /// Follows the current ``LoadableForwarding/followed`` (stops following an earlier one);
    /// stops following when there is none.
    package func follow() {
        guard let followed else {
            follower.stop()
            return
        }
        // Weakly: this loadable may be released on another thread while `followed` notifies.
        // Immediate: this loadable (and what it derives) is up to date at every change of it.
        follower.start(followed.addFollowerObserver { [weak self] _ in self?.followedDidNotify() })
    }

    /// Stops following ``LoadableForwarding/followed``.
    func stopFollowing() {
        follower.stop()
    }

    /// Moves to a new ``LoadableForwarding/followed`` (already stored), after `oldFollowed`: stops
    /// following the old one, passes "in use" from it to the new one, runs `beforeFollowing`, and
    /// follows the new one (unless this loadable follows only while observed and has no
    /// observers). Does not notify.
    package func followedDidChange(from oldFollowed: Followed?, beforeFollowing: () -> Void = {}) {
        follower.stop()
        if core.isInUse {
            // The new one first, so that one object in both places stays in use throughout.
            followed?.loadableCapabilities.countedUse?.beginUse()
            oldFollowed?.loadableCapabilities.countedUse?.endUse()
        }
        beforeFollowing()
        if !Self.followsOnlyWhileObserved || core.hasObservers { follow() }
    }
}

extension LoadableForwarding {
    // MARK: Reads

    /// ``followed``'s state, read for a public getter (tracked); this loadable's own without it.
    var forwardedState: LoadableState {
        trackForwardedAccess()
        return followed?.loadableState ?? core.state
    }

    /// ``followed``'s error, read for a public getter; `nil` without it.
    var forwardedError: (any Error)? {
        trackForwardedAccess()
        return followed?.error
    }

    /// ``followed``'s availability, read for a public getter; `false` without it.
    var forwardedIsContentsAvailable: Bool {
        trackForwardedAccess()
        return followed?.isContentsAvailable ?? false
    }

    /// ``followed``'s state and availability, read without telling Observation; this loadable's
    /// own state, without contents, when there is nothing to follow.
    package var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        followed?.statusUntrackedWherePossible ?? (core.state, false)
    }

    /// ``followed``'s staleness; `false` without it.
    package var untrackedIsStale: Bool { followed?.isStaleUntracked ?? false }

    /// ``followed``'s failure record.
    package var failureRecord: (lastError: (any Error)?, consecutiveFailures: Int)? {
        followed?.failureRecordIfKnown
    }

    // MARK: In use

    /// Passes "in use" on to a syncable ``followed``.
    package func didBeginUse() { followed?.loadableCapabilities.countedUse?.beginUse() }

    /// Ends the use of a syncable ``followed`` through this loadable.
    package func didEndUse() { followed?.loadableCapabilities.countedUse?.endUse() }
}

extension LoadableForwarding where Followed: ContentsLoadable {
    /// ``followed``'s contents, read for a public getter; `nil` without it.
    var forwardedContents: Followed.Contents? {
        trackForwardedContentsAccess()
        return followed?.contents
    }
}

extension LoadableForwarding where Followed: SyncableLoadable {
    /// ``followed``'s `needsSync`; `default` without it.
    func forwardedNeedsSync(default: Bool) -> Bool { followed?.needsSync ?? `default` }
    /// Asks ``followed`` to sync; does nothing without it.
    package func forwardSync() { followed?.sync() }
    /// Asks ``followed`` to sync if needed; does nothing without it.
    package func forwardSyncIfNeeded() { followed?.syncIfNeeded() }
    /// Invalidates ``followed``; does nothing without it.
    package func forwardInvalidate() { followed?.invalidate() }
    /// Cancels ``followed``'s sync; does nothing without it.
    package func forwardCancelSync() { followed?.cancelSync() }
}

extension LoadableForwarding where Followed: ContentsLoadable {
    /// Calls ``followed``'s optimistic `mutate`; throws `CancellationError`, committing nothing,
    /// without it.
    package func forwardMutate<Contents, R: Sendable>(
        optimistic: @escaping @MainActor (inout Contents) -> Void,
        commit: @MainActor () async throws -> R,
        reconcile: (@MainActor (inout Contents, R) -> Void)?
    ) async throws -> R where Followed: PushLoadable<Contents> {
        guard let followed else { throw CancellationError() }
        return try await followed.mutate(optimistic: optimistic, commit: commit, reconcile: reconcile)
    }
}

/// A ``LoadableForwarding`` loadable whose contents are derived from what it follows (a mapped
/// loadable, a combined one): they are recomputed at each change of it, and count as available
/// only once they exist.
@MainActor
package protocol LoadableDeriving: LoadableForwarding {
    /// Whether the derived contents exist.
    var hasDerivedContents: Bool { get }
    /// Recomputes the derived contents from ``LoadableForwarding/followed``'s, read untracked.
    func refreshDerivedContents()
}

extension LoadableDeriving {
    /// Recomputes the contents, then notifies.
    package func followedDidNotify() { announceChange { refreshDerivedContents() } }

    /// ``LoadableForwarding/followed``'s state, and its availability when the derived contents
    /// exist.
    package var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        guard let status = followed?.statusUntrackedWherePossible else { return (core.state, false) }
        return (status.state, status.isContentsAvailable && hasDerivedContents)
    }
}

/// The subscription of a ``LoadableFollowing`` loadable to what it stands for.
@MainActor
package struct LoadableFollower {
    private var observation: LoadableObservation?

    /// Creates a follower that follows nothing yet.
    package init() {}

    /// Whether it follows something.
    var isFollowing: Bool { observation != nil }

    /// Keeps `observation`, ending the one kept before.
    package mutating func start(_ observation: LoadableObservation) {
        self.observation?.cancel()
        self.observation = observation
    }

    /// Ends the observation kept, if any.
    package mutating func stop() {
        observation?.cancel()
        observation = nil
    }
}
