public import Observation

/// Ends a lease's use counted by `tracker` (a store's entry, never `nil`: the optional is the
/// lease's stored property, passed as it is so that the call copies nothing); for a lease's
/// `deinit`, through ``leaseEndsOnMainActor``.
@MainActor
private func endTrackedLeaseUse(_ tracker: (any LoadableLeaseTracker)?) {
    tracker.unsafelyUnwrapped.leaseDidEnd()
    // Only a load and a compare while no inspector is attached.
    if let inspector = LoadableInspection.inspector {
        recordLeaseReleased(tracker.unsafelyUnwrapped.leasedLoadable, tracker: tracker, in: inspector)
    }
}

/// Ends a lease's use of `loadable`, counted by the loadable itself; for a lease's `deinit`,
/// through ``leaseEndsOnMainActor``.
@MainActor
private func endLeaseUse(_ loadable: any SyncableLoadable) {
    loadable.endUseIfCounted()
    if let inspector = LoadableInspection.inspector {
        recordLeaseReleased(loadable, tracker: nil, in: inspector)
    }
}

// The events of leases, for an attached inspector. Not inlined: a lease's `init` and `deinit`
// keep only the check of the hook, and none of the building of an event.

/// Records that a lease of `loadable` was taken (see `leaseCount(of:tracker:)` for the count).
@MainActor
@inline(never)
private func recordLeaseTaken(
    _ loadable: any SyncableLoadable, tracker: (any LoadableLeaseTracker)?, in inspector: LoadableInspector
) {
    inspector.record(loadable) { .leaseTaken(label: $0, time: $1, leases: leaseCount(of: loadable, tracker: tracker)) }
}

/// Records that a lease of `loadable` was released or let go.
@MainActor
@inline(never)
private func recordLeaseReleased(
    _ loadable: any SyncableLoadable, tracker: (any LoadableLeaseTracker)?, in inspector: LoadableInspector
) {
    inspector.record(loadable) {
        .leaseReleased(label: $0, time: $1, leases: leaseCount(of: loadable, tracker: tracker))
    }
}

/// The `leases` of a lease event: a store's entry counts its live leases exactly; a loadable
/// leased with `lease()` counts its live uses, which are its leases plus the syncers, and the
/// groups, chains and proxies in use, that hold it (`0` for a type of the app's own, which
/// counts nothing).
@MainActor
private func leaseCount(of loadable: any SyncableLoadable, tracker: (any LoadableLeaseTracker)?) -> Int {
    if let tracker { return tracker.leaseCount }
    return loadable.loadableCapabilities.owner?.core.extras?.useCount ?? 0
}

/// The two functions above.
private struct MainActorLeaseEnds {
    let tracked: @MainActor ((any LoadableLeaseTracker)?) -> Void
    let untracked: @MainActor (any SyncableLoadable) -> Void
}

/// ``MainActorLeaseEnds`` without the isolation: the same layout.
private struct NonisolatedLeaseEnds {
    let tracked: ((any LoadableLeaseTracker)?) -> Void
    let untracked: (any SyncableLoadable) -> Void
}

/// ``endTrackedLeaseUse(_:)`` and ``endLeaseUse(_:)`` as functions of no isolation, for a lease's
/// `deinit` that has checked that it runs on the main queue (the main actor): what
/// `MainActor.assumeIsolated` does after its check, without its closure, which is boxed (an
/// allocation and a runtime check for every lease let go rather than released). A global actor
/// changes where a function may be called, not how, so the two structs have the same layout; the
/// functions are cast inside structs because a function value cast on its own is wrapped in two
/// conversion thunks, one on each side of the generic cast.
private nonisolated(unsafe) let leaseEndsOnMainActor = unsafeBitCast(
    MainActorLeaseEnds(tracked: endTrackedLeaseUse, untracked: endLeaseUse),
    to: NonisolatedLeaseEnds.self
)

/// A use of a loadable that is itself a loadable: while the lease lives, its ``loadable`` is in
/// use (`SyncableLoadable.isInUse`).
///
/// Get one from `SyncableLoadable.lease()` (or from a store). The lease stands for its loadable:
/// it forwards the state, contents, error, observation, ``sync()``, ``syncIfNeeded()``,
/// ``invalidate()`` and ``cancelSync()``, so a screen keeps the lease and nothing else, and there
/// is no separate token to lose. Taking a lease does not sync.
///
/// ```swift
/// final class FeedScreen {
///     private let feed: LoadableLease<FeedLoadable>
///     init(feed: FeedLoadable) {
///         self.feed = feed.lease()
///         self.feed.syncIfNeeded()
///     }
///     func serverSaidFeedChanged() {
///         feed.invalidate()   // in use: syncs at once (or once more after a running sync)
///     }
/// }
/// ```
///
/// The use ends on ``release()`` or when the lease object is released, on any thread (a release
/// off the main actor is handed to the main actor). After ``release()`` the lease still reads its
/// loadable, but ``sync()``, ``syncIfNeeded()``, ``invalidate()`` and ``cancelSync()`` do nothing:
/// a forgotten handle must not drive traffic.
///
/// The lease makes its ``loadable`` in use (`loadable.isInUse`); the lease's own `isInUse` tells
/// whether something uses the lease in turn (a group or proxy in use that has it as a member or
/// target, or a lease of the lease), which it passes on to the loadable too.
///
/// While a `LoadableInspector` is attached, each lease taken and each lease ended (released, or
/// let go: on the main actor once its end got there) is recorded as `leaseTaken` or
/// `leaseReleased`, under the label of the leased ``loadable``, with its count after the change:
/// the live leases of a store's entry, or, for a lease from `SyncableLoadable.lease()`, the
/// loadable's live uses (its leases, and the syncers, groups, chains and proxies in use that hold
/// it).
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
public final class LoadableLease<Value: SyncableLoadable>: SyncableLoadable, Observable,
    @MainActor CustomStringConvertible
{
    /// The observers and the Observation registrar of the lease, made when first needed: a lease
    /// that nobody observes or reads through Observation never pays for one.
    package var core: LoadableCore {
        if let storedCore { return storedCore }
        let core = LoadableCore()
        storedCore = core
        return core
    }
    private var storedCore: LoadableCore?
    /// The loadable this lease keeps in use; held strongly, and never changes.
    public var loadable: Value { storedLoadable.value }
    /// The loadable, in a box that a `deinit` may read: it is a main-actor object, and the
    /// `deinit` only hands it to the main actor.
    private let storedLoadable: MainActorObject<Value>
    /// What counts the lease's use of ``loadable`` instead of the loadable itself (a store's
    /// entry, which keeps its loadable in use while it has leases); `nil` for a lease from
    /// `SyncableLoadable.lease()`.
    private let tracker: MainActorObject<(any LoadableLeaseTracker)?>
    /// The subscription to the loadable, while the lease has observers of its own.
    package var follower = LoadableFollower()
    /// Whether the use is alive (not released); read by `deinit`.
    private var isLive = true

    /// Takes a lease on `loadable`: a use of it, counted by the loadable itself or, when given,
    /// by `tracker`.
    ///
    /// - Parameters:
    ///   - loadable: The loadable to keep in use.
    ///   - tracker: Told of the beginning and the end of this lease instead of `loadable`.
    @usableFromInline
    package init(_ loadable: Value, tracker: (any LoadableLeaseTracker)? = nil) {
        // The use begins before the arguments are stored, so that storing them is their last
        // use and copies nothing.
        if let tracker {
            tracker.leaseDidBegin()
        } else {
            loadable.beginUseIfCounted()
        }
        if let inspector = LoadableInspection.inspector {
            recordLeaseTaken(loadable, tracker: tracker, in: inspector)
        }
        storedLoadable = MainActorObject(loadable)
        self.tracker = MainActorObject(tracker)
    }

    /// Whether ``release()`` was called.
    public var isReleased: Bool { !isLive }

    /// Ends the use. Calling it again does nothing.
    public func release() {
        guard isLive else { return }
        isLive = false
        Self.endUse(of: storedLoadable.value, tracker: tracker.value)
    }

    /// Ends the lease's use of `loadable`, counted by `tracker` when there is one, and tells an
    /// attached inspector (a lease let go on another thread gets here on the main actor).
    private static func endUse(of loadable: Value, tracker: (any LoadableLeaseTracker)?) {
        if let tracker {
            tracker.leaseDidEnd()
        } else {
            loadable.endUseIfCounted()
        }
        if let inspector = LoadableInspection.inspector {
            recordLeaseReleased(loadable, tracker: tracker, in: inspector)
        }
    }

    deinit {
        // If the lease was not released, end its use, on the main actor: at once on the main
        // queue, in a task otherwise. (An isolated `deinit` would cost every lease, released or
        // not, a trip through the runtime, and needs macOS 15.4 or iOS 18.4.)
        guard isLive else { return }
        if isRunningOnMainQueue() {
            if tracker.value != nil {
                leaseEndsOnMainActor.tracked(tracker.value)
            } else {
                leaseEndsOnMainActor.untracked(storedLoadable.value)
            }
        } else {
            let loadable = storedLoadable
            let tracker = tracker
            Task { @MainActor in Self.endUse(of: loadable.value, tracker: tracker.value) }
        }
    }

    /// The loadable's state.
    public var loadableState: LoadableState { forwardedState }

    /// The loadable's error.
    public var error: (any Error)? { forwardedError }

    /// The loadable's availability.
    public var isContentsAvailable: Bool { forwardedIsContentsAvailable }

    /// The loadable's `needsSync`.
    public var needsSync: Bool { loadable.needsSync }

    /// Calls the loadable's `sync()`; does nothing once released.
    public func sync() {
        guard !isReleased else { return }
        forwardSync()
    }

    /// Calls the loadable's `syncIfNeeded()`; does nothing once released.
    public func syncIfNeeded() {
        guard !isReleased else { return }
        forwardSyncIfNeeded()
    }

    /// Calls the loadable's `invalidate()`; does nothing once released.
    public func invalidate() {
        guard !isReleased else { return }
        forwardInvalidate()
    }

    /// Calls the loadable's `cancelSync()`; does nothing once released.
    public func cancelSync() {
        guard !isReleased else { return }
        forwardCancelSync()
    }

    /// Calls `handler` after every change of the loadable until the returned token is cancelled
    /// or released.
    ///
    /// - Parameter handler: Called on the main actor with the lease.
    /// - Returns: The token that keeps the observation alive.
    public func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// `<LoadableLease<Value>: state, contents available: yes|no, loadable: …>`.
    public var description: String {
        loadableDescription(details: ", loadable: \(loadable)")
    }
}

extension LoadableLease {
    /// One of the package's syncable loadables, with its core.
    public var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: self)
    }
}

extension LoadableLease: LoadableFollowing {
    /// The loadable.
    package var followed: Value? { loadable }

    /// A lease nobody observes must not count as an observer of its loadable. A use of the lease
    /// itself (a group or proxy in use that has the lease as a member or target) is one more use
    /// of the loadable (``LoadableForwarding``'s default).
    package static var followsOnlyWhileObserved: Bool { true }

    /// The lease stands for one loadable for its whole life: a read of it tells Observation of a
    /// read of the loadable only (the lease makes no registrar of its own for it).
    package static var followedNeverChanges: Bool { true }
}

extension LoadableLease: ContentsLoadable where Value: ContentsLoadable {
    /// The loadable's contents.
    public var contents: Value.Contents? { forwardedContents }
}

extension LoadableLease {
    /// Calls the loadable's ``PushLoadable/mutate(optimistic:commit:reconcile:)``: shows a change
    /// at once, commits it, and keeps it or takes it back.
    ///
    /// Once the lease is released it changes nothing and commits nothing: it throws
    /// `CancellationError` (a forgotten handle must not drive traffic).
    ///
    /// - Parameters:
    ///   - optimistic: Applies the change to contents.
    ///   - commit: Makes the change for real; runs in the calling task.
    ///   - reconcile: Writes the commit's answer into the base contents; `nil` to apply
    ///     `optimistic` to them instead.
    /// - Returns: What `commit` returned.
    @discardableResult
    public func mutate<Contents, R: Sendable>(
        optimistic: @escaping @MainActor (inout Contents) -> Void,
        commit: @MainActor () async throws -> R,
        reconcile: (@MainActor (inout Contents, R) -> Void)? = nil
    ) async throws -> R where Value: PushLoadable<Contents> {
        guard !isReleased else { throw CancellationError() }
        return try await forwardMutate(optimistic: optimistic, commit: commit, reconcile: reconcile)
    }
}

/// What counts the uses of a loadable by its leases instead of the loadable itself: a store's
/// entry, which keeps its loadable in use once for all its leases and learns when the last one
/// ends. Told on the main actor, once per lease each.
@MainActor
@usableFromInline
package protocol LoadableLeaseTracker: AnyObject {
    /// A lease began.
    func leaseDidBegin()
    /// A lease ended (released, or gone).
    func leaseDidEnd()
    /// The live leases it counts: the `leases` of a lease's inspector events.
    var leaseCount: Int { get }
    /// The loadable its leases stand for: whose label a lease's inspector events carry.
    var leasedLoadable: any SyncableLoadable { get }
}
