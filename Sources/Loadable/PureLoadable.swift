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
