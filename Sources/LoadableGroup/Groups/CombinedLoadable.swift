public import Observation

/// A loadable whose contents are computed from the contents of two to four other loadables.
///
/// Made by ``LoadableGroup/combine(_:_:transform:)`` and its overloads. It follows a
/// ``PureLoadableGroup/Policy/strict`` group of its members: it fails when any member fails
/// (``error`` is then a ``LoadableGroupError``), syncs while any syncs, succeeds when all have
/// succeeded. Its ``contents`` are `transform` of all members' contents, recomputed on every
/// member notification while every member's contents are available, and `nil` as soon as one
/// member has none.
///
/// It notifies when its state or availability changes, on every member notification while it is
/// `LoadableState.didSyncSuccessfully`, and whenever its contents were recomputed. Syncing it
/// syncs its syncable members. It holds its members strongly.
///
/// Isolated to the main actor; observers are called on the main actor.
///
/// ```swift
/// let account = LoadableGroup.combine(user, services) { user, services in
///     Account(user: user, services: services)
/// }
/// let token = account.observe { account in
///     if let account = account.contents { render(account) }
/// }
/// account.syncIfNeeded()
/// ```
///
/// - Complexity: Each member notification costs O(1) plus one call of `transform` when all
///   members have contents.
@MainActor
public final class CombinedLoadable<Contents>: ContentsLoadable, SyncableLoadable, Observable,
    @MainActor CustomStringConvertible
{
    /// The observers and the Observation registrar.
    package let core = LoadableCore()
    /// The strict group of the members that this loadable follows.
    package let group: LoadableGroup
    private let compute: @MainActor () -> Contents?
    private var storedContents: Contents?

    /// Creates a loadable following a strict group of `members`.
    ///
    /// - Parameters:
    ///   - members: The loadables whose contents `compute` reads.
    ///   - compute: Returns the combined contents, or `nil` if a member has no contents.
    init(members: [any PureLoadable], compute: @escaping @MainActor () -> Contents?) {
        group = LoadableGroup(members, policy: .strict)
        self.compute = compute
        refreshDerivedContents()
        // Not an observer of the group: the contents are recomputed on member changes the group
        // itself does not notify (a member's new contents while another syncs).
        group.memberChangeHandler = { [weak self] groupWillNotify in
            guard let self else { return }
            // Contents are recomputed whenever every member has contents.
            guard groupWillNotify || self.group.untrackedStatus.isContentsAvailable else { return }
            self.followedDidNotify()
        }
    }

    /// Recomputes the contents, or clears them when a member has none; the members' contents
    /// are read untracked (following them is not a read by a view).
    package func refreshDerivedContents() {
        storedContents = group.untrackedStatus.isContentsAvailable ? LoadableCore.readUntracked(compute) : nil
    }

    /// `transform` of the members' contents while all members have contents; `nil` otherwise.
    public var contents: Contents? {
        core.trackAccess()
        return storedContents
    }

    /// The members, in the order they were passed to ``LoadableGroup/combine(_:_:transform:)``.
    public var members: [any PureLoadable] { group.members }

    /// The state of a ``PureLoadableGroup/Policy/strict`` group of the members.
    ///
    /// - Complexity: O(1).
    public var loadableState: LoadableState {
        core.trackAccess()
        return group.untrackedStatus.state
    }

    /// A ``LoadableGroupError`` listing every failed member while the state is
    /// `LoadableState.didFailToSync`; `nil` otherwise.
    ///
    /// - Complexity: O(n) in the number of members, on each read.
    public var error: (any Error)? {
        core.trackAccess()
        return LoadableCore.readUntracked { group.groupError }
    }

    /// Whether every member's contents are available and the combined contents exist.
    ///
    /// - Complexity: O(1).
    public var isContentsAvailable: Bool {
        core.trackAccess()
        return group.untrackedStatus.isContentsAvailable && storedContents != nil
    }

    /// Whether any syncable member needs to sync.
    public var needsSync: Bool { group.needsSync }

    /// Calls `sync()` on every syncable member, in member order.
    public func sync() { forwardSync() }

    /// Calls `syncIfNeeded()` on every syncable member, in member order.
    public func syncIfNeeded() { forwardSyncIfNeeded() }

    /// Calls `invalidate()` on every syncable member, in member order.
    public func invalidate() { forwardInvalidate() }

    /// Cancels the member syncs this loadable started (see `LoadableGroup.cancelSync()`).
    public func cancelSync() { forwardCancelSync() }

    /// `<CombinedLoadable<Contents>: state, contents available: yes|no>`.
    public var description: String { loadableDescription() }

    /// Calls `handler` after every change until the returned token is cancelled or released.
    ///
    /// - Parameter handler: Called on the main actor with this loadable.
    /// - Returns: The token that keeps the observation alive.
    public func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }
}

extension CombinedLoadable {
    /// One of the package's syncable loadables, with its core.
    public var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: self)
    }
}

extension CombinedLoadable: LoadableDeriving {
    /// The strict group of the members, which this loadable follows through its member-change
    /// handler; "in use", staleness and sync requests go to it (``LoadableForwarding``'s
    /// defaults).
    package var followed: LoadableGroup? { group }
    package var hasDerivedContents: Bool { storedContents != nil }
}
