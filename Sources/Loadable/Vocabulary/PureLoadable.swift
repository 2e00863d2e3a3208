/// A read-only view of something that loads: its state, error, and whether contents are available.
///
/// This is the "promise" side of a loadable: whoever holds a `PureLoadable` can watch it but cannot
/// ask it to sync. ``SyncableLoadable`` adds that; ``ContentsLoadable`` adds typed contents.
///
/// Isolated to the main actor; observers are called on the main actor, synchronously, in the order
/// they were added.
///
/// ```swift
/// let token = feed.addObserver { feed in
///     print(feed.loadableState)
/// }
/// ```
///
/// A type of your own that conforms directly works with every part of the package (groups,
/// chains, proxies, leases, syncers, waiters, stores) through these requirements. It lacks what the
/// package's own classes keep in their core: reads that do not tell Observation, observers called
/// before ordinary ones, and use counting (``SyncableLoadable/isInUse`` stays `false`; a lease or
/// a store does not make it sync at once when invalidated). Subclass a package class (such as
/// `Loadable`) to have them.
@MainActor
public protocol PureLoadable: AnyObject {
    /// The stage the loadable is at.
    var loadableState: LoadableState { get }
    /// Why the last sync failed, if it failed and said why.
    var error: (any Error)? { get }
    /// Whether there are contents to show, in any state.
    ///
    /// ``LoadableState/didSyncSuccessfully`` implies `true`; the reverse does not hold (stale
    /// contents stay available while syncing again or after a failure).
    var isContentsAvailable: Bool { get }
    /// Calls `handler` after every change of the loadable until the returned token is cancelled
    /// or released.
    ///
    /// The handler is not called for the current state; read it directly if you need it.
    ///
    /// - Parameter handler: Called on the main actor with the loadable that changed.
    /// - Returns: A token that keeps the observation alive; keep it for as long as you observe.
    func addObserver(_ handler: @escaping @MainActor (any PureLoadable) -> Void) -> LoadableObservation
    /// What the package's groups, syncers, waiters, stores and leases can do with this loadable
    /// beyond the requirements above.
    ///
    /// Keep the default: a type of your own answers "nothing more" (or, as a
    /// ``SyncableLoadable``, "it syncs"), and the package's classes answer for themselves. A class
    /// that adds ``SyncableLoadable`` to a subclass of a class that is not syncable (one of yours,
    /// or `PushLoadable`, `PureLoadableProxy`, `PureLoadableGroup`) is not seen as syncable by
    /// groups and waiters: conform on the first class, or subclass `Loadable`,
    /// `LoadableProxy` or `LoadableGroup`.
    var loadableCapabilities: LoadableCapabilities { get }
}

/// What the package can do with a loadable beyond the public requirements of ``PureLoadable``:
/// the answer of ``PureLoadable/loadableCapabilities``, opaque to apps.
///
/// Found through a requirement rather than a cast, so a type of your own is seen as what it
/// declares, and the package's consumers ask once, without a runtime conformance check.
public struct LoadableCapabilities {
    /// The loadable as one of the package's (with a core); `nil` for a type of your own.
    package let owner: (any LoadableCoreOwner)?
    /// The loadable as a ``SyncableLoadable``; `nil` when it is only a ``PureLoadable``.
    package let syncable: (any SyncableLoadable)?

    /// The capabilities of a loadable that is `owner` and, when syncable, `syncable`.
    package init(owner: (any LoadableCoreOwner)? = nil, syncable: (any SyncableLoadable)? = nil) {
        self.owner = owner
        self.syncable = syncable
    }

    /// The core of a syncable loadable of the package's: the one whose uses are counted.
    var countedUse: (any LoadableCoreOwner)? {
        syncable == nil ? nil : owner
    }
}

extension PureLoadable {
    /// Nothing beyond ``PureLoadable``: a type of your own.
    public var loadableCapabilities: LoadableCapabilities { LoadableCapabilities() }
}

extension SyncableLoadable {
    /// Syncable, without a core: a type of your own.
    public var loadableCapabilities: LoadableCapabilities { LoadableCapabilities(syncable: self) }
}

/// A loadable that can be asked to sync (the "deferred" side of a promise).
///
/// Isolated to the main actor.
///
/// ```swift
/// func screenDidAppear(_ photos: some SyncableLoadable) {
///     photos.syncIfNeeded()
/// }
/// ```
@MainActor
public protocol SyncableLoadable: PureLoadable {
    /// Whether the loadable would sync when asked through ``syncIfNeeded()``.
    var needsSync: Bool { get }
    /// Starts a sync now, unless one is running already.
    func sync()
    /// Starts a sync if ``needsSync`` is `true`.
    func syncIfNeeded()
    /// Marks the contents stale: "what you have is out of date".
    ///
    /// While a sync runs, exactly one more sync starts when it ends (whether it succeeds or
    /// fails), however many times this is called during it, so a change on the server that the
    /// running sync may have missed is never lost; ``cancelSync()`` drops that pending sync.
    /// Otherwise the loadable is marked stale and observers are notified once; if it is in use
    /// (see ``isInUse``) it syncs at once, otherwise on its next ``syncIfNeeded()``.
    ///
    /// Composite loadables pass it on: groups to their members, proxies to their target.
    func invalidate()
    /// Cancels the running sync, if any, and goes back to the state from before it.
    ///
    /// Composite loadables pass it on: proxies to their target; groups and chains cancel only the
    /// member syncs they started themselves, never a sync another user of the member started.
    /// Does nothing when not syncing.
    func cancelSync()
}

/// A loadable with typed contents.
///
/// Isolated to the main actor.
///
/// ```swift
/// func titles(of feed: some ContentsLoadable<[Post]>) -> [String] {
///     feed.contents?.map(\.title) ?? []
/// }
/// ```
@MainActor
public protocol ContentsLoadable<Contents>: PureLoadable {
    /// The type of what the loadable loads.
    associatedtype Contents
    /// The contents, when available; kept across re-syncs and failures.
    var contents: Contents? { get }
}
