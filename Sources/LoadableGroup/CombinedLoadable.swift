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
public final class CombinedLoadable<Contents>: ContentsLoadable, SyncableLoadable,
    @MainActor CustomStringConvertible
{
    package var observerList = ObserverList()
    private let group: LoadableGroup
    private let compute: @MainActor () -> Contents?

    /// `transform` of the members' contents while all members have contents; `nil` otherwise.
    public private(set) var contents: Contents?

    /// Creates a loadable following a strict group of `members`.
    ///
    /// - Parameters:
    ///   - members: The loadables whose contents `compute` reads.
    ///   - compute: Returns the combined contents, or `nil` if a member has no contents.
    init(members: [any PureLoadable], compute: @escaping @MainActor () -> Contents?) {
        group = LoadableGroup(members, policy: .strict)
        self.compute = compute
        refresh()
        group.memberChangeHandler = { [weak self] groupWillNotify in
            guard let self else { return }
            let didRecompute = self.refresh()
            if groupWillNotify || didRecompute { self.notifyObservers() }
        }
    }

    /// Recomputes ``contents``; returns whether `compute` ran.
    @discardableResult
    private func refresh() -> Bool {
        guard group.isContentsAvailable else {
            contents = nil
            return false
        }
        contents = compute()
        return true
    }

    /// The members, in the order they were passed to ``LoadableGroup/combine(_:_:transform:)``.
    public var members: [any PureLoadable] { group.members }

    /// The state of a ``PureLoadableGroup/Policy/strict`` group of the members.
    ///
    /// - Complexity: O(1).
    public var loadableState: LoadableState { group.loadableState }

    /// A ``LoadableGroupError`` listing every failed member while the state is
    /// `LoadableState.didFailToSync`; `nil` otherwise.
    ///
    /// - Complexity: O(n) in the number of members, on each read.
    public var error: (any Error)? { group.groupError }

    /// Whether every member's contents are available and the combined contents exist.
    ///
    /// - Complexity: O(1).
    public var isContentsAvailable: Bool { group.isContentsAvailable && contents != nil }

    /// Whether any syncable member needs to sync.
    public var needsSync: Bool { group.needsSync }

    /// Calls `sync()` on every syncable member, in member order.
    public func sync() { group.sync() }

    /// Calls `syncIfNeeded()` on every syncable member, in member order.
    public func syncIfNeeded() { group.syncIfNeeded() }

    /// `<CombinedLoadable<Contents>: state, contents available: yes|no>`.
    public var description: String {
        "<\(type(of: self)): \(loadableState), contents available: \(isContentsAvailable ? "yes" : "no")>"
    }

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

extension CombinedLoadable: ObserverOwner {}
