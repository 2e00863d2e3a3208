/// Something that loads asynchronously, tells observers how it is going, and keeps what it loaded
/// while it loads it again.
///
/// Subclass it and override ``doSync()``: start the work there and finish it with
/// ``PushLoadable/setDidSyncSuccessfully(_:)`` or ``PushLoadable/setDidFailToSync(_:)``.
///
/// ```swift
/// final class PhotosLoadable: Loadable<[Photo]> {
///     private let client: any PhotosClient
///     init(client: any PhotosClient) {
///         self.client = client
///         super.init()
///     }
///     override func doSync() {
///         Task {
///             do { setDidSyncSuccessfully(try await client.photos()) }
///             catch { setDidFailToSync(error) }
///         }
///     }
/// }
/// ```
///
/// Contents are kept across re-syncs and failures; the state moves
/// idle → syncing → did-sync-successfully / did-fail-to-sync, and back to syncing on the next
/// sync. For work that is one `async` call, ``AsyncLoadable`` does the `Task` bookkeeping
/// (cancellation, late results) for you.
///
/// Isolated to the main actor; observers are called on the main actor, synchronously, in the
/// order they were added. Observable through closures (``PushLoadable/addObserver(_:)``,
/// ``PureLoadable/observe(_:)``), async sequences (``PureLoadable/states()``,
/// ``PushLoadable/snapshots(bufferingPolicy:)``) and the Observation framework.
@MainActor
open class Loadable<Contents>: PushLoadable<Contents>, SyncableLoadable {
    /// Creates an idle loadable.
    ///
    /// - Parameter contents: Contents to start with (for example from a cache); the state is
    ///   ``LoadableState/idle`` either way, and ``needsSync`` stays `true` until a sync succeeds.
    public override init(contents: Contents? = nil) {
        super.init(contents: contents)
    }

    /// Whether ``syncIfNeeded()`` would sync: by default when contents are not available, or the
    /// state is ``LoadableState/idle`` or ``LoadableState/didFailToSync``.
    ///
    /// Override it for caches that expire.
    open var needsSync: Bool {
        switch loadableState {
        case .idle, .didFailToSync: true
        case .syncing, .didSyncSuccessfully: !isContentsAvailable
        }
    }

    /// Starts a sync: clears the error, moves to ``LoadableState/syncing``, notifies observers,
    /// then calls ``doSync()``.
    ///
    /// Calling it while syncing does nothing (the running sync is the one that counts). If an
    /// observer moves the loadable out of `syncing` while being told of the sync, ``doSync()`` is
    /// not called.
    public final func sync() {
        // Stored state, not `loadableState`: starting a sync is not a read for Observation.
        guard storedState != .syncing else { return }
        willBeginSync()
        core.willChange()
        core.store(state: .syncing, error: nil)
        core.isSyncAwaitingDoSync = true
        core.didChange(NotificationSubject(self))
        // An observer may have cancelled this sync, or cancelled it and started another (which
        // already called `doSync()` for itself, clearing the flag).
        guard storedState == .syncing, core.isSyncAwaitingDoSync else { return }
        core.isSyncAwaitingDoSync = false
        doSync()
    }

    /// Called by ``sync()`` just before it moves to `syncing` and notifies, so that a subclass in
    /// this module can change more of its state in that one notification. Does nothing here.
    func willBeginSync() {}

    /// Calls ``sync()`` if ``needsSync`` is `true`.
    public final func syncIfNeeded() {
        if needsSync { sync() }
    }

    /// Does the work of a sync; every subclass overrides it.
    ///
    /// Called by ``sync()`` after observers saw ``LoadableState/syncing``. Finish the sync by
    /// calling ``PushLoadable/setDidSyncSuccessfully(_:)`` or ``PushLoadable/setDidFailToSync(_:)``,
    /// now or later. Do not call `super`.
    open func doSync() {
        fatalError(
            "\(type(of: self)) must override doSync(): Loadable does not know how to load its contents"
        )
    }

    /// Cancels the running sync: calls ``doCancelSync()`` and goes back to the state and error the
    /// loadable had before the sync began. Contents are untouched.
    ///
    /// Does nothing when not syncing. A completion that arrives after the cancel must be ignored
    /// by the subclass; ``AsyncLoadable`` does that itself.
    public final func cancelSync() {
        guard storedState == .syncing else { return }
        // An observer of the `syncing` notification cancelling before `doSync()` ran: there is
        // no work to stop.
        if !core.isSyncAwaitingDoSync {
            doCancelSync()
            guard storedState == .syncing else { return }
        }
        restoreStateBeforeSyncing()
    }

    /// Stops the work started by ``doSync()``; does nothing by default.
    ///
    /// Called by ``cancelSync()`` before the state is restored; not called when the sync is
    /// cancelled before ``doSync()`` ran (by an observer of the `syncing` notification).
    open func doCancelSync() {}

    /// `<TypeName: state, contents available: yes|no>`.
    open override var description: String { super.description }
}
