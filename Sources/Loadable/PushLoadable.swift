public import Observation

/// A loadable its owner drives: a socket feed, a database listener, anything that pushes.
///
/// It has contents, setters, hooks, snapshots and observation like ``Loadable``, but no `sync()`:
/// only the owner changes it. Vend it as `any PureLoadable` (or `any ContentsLoadable<Contents>`)
/// so that nobody else can. ``Loadable`` is a `PushLoadable` that can also be asked to sync; the
/// two share this one implementation.
///
/// Isolated to the main actor; observers are called on the main actor. It conforms to
/// `Observable`, so a SwiftUI view (or `withObservationTracking`) that reads ``loadableState``,
/// ``contents``, ``error`` or ``isContentsAvailable`` is updated after every change.
///
/// ```swift
/// final class ChatFeed {
///     private let messages = PushLoadable<[Message]>()
///     var loadable: any ContentsLoadable<[Message]> { messages }
///
///     func socketDidConnect() { messages.setSyncing() }
///     func socketDidReceive(_ all: [Message]) { messages.setDidSyncSuccessfully(all) }
///     func socketDidFail(_ error: any Error) { messages.setDidFailToSync(error) }
/// }
/// ```
///
/// Every setter notifies observers, even when the value does not change (a repeated
/// ``setDidSyncSuccessfully()`` announces changed contents).
@MainActor
open class PushLoadable<Contents>: ContentsLoadable, Observable, @MainActor CustomStringConvertible {
    // The core first, the generic contents (whose size only the runtime knows) last, so that the
    // core has a fixed offset.
    /// The state, error, observers and Observation registrar, shared by every loadable type.
    package final let core = LoadableCore()
    private var storedContents: Contents?

    /// The state without telling Observation: for internal paths that are not reads of the
    /// loadable (``Loadable/sync()``), so that they neither count as one nor create the registrar.
    final var storedState: LoadableState { core.state }

    /// Creates an idle loadable.
    ///
    /// - Parameter contents: Contents to start with (for example from a cache); the state is
    ///   ``LoadableState/idle`` either way.
    public init(contents: Contents? = nil) {
        storedContents = contents
        core.hasContents = contents != nil
    }

    // MARK: - Reading

    /// The stage the loadable is at. Changes only through the setters.
    public final var loadableState: LoadableState {
        core.trackAccess()
        return core.state
    }

    /// The contents, kept across re-syncs and failures. Changes only through the setters.
    public final var contents: Contents? {
        core.trackAccess()
        return storedContents
    }

    /// Why the last sync failed, if it failed and said why; `nil` in any other state.
    public final var error: (any Error)? {
        core.trackAccess()
        return core.error
    }

    /// Whether there are contents to show; by default `contents != nil`.
    ///
    /// Override it for loadables whose contents come in parts (a chunked download that can show
    /// something before it is complete). ``LoadableState/didSyncSuccessfully`` must imply `true`.
    open var isContentsAvailable: Bool {
        core.trackAccess()
        return core.hasContents
    }

    /// The error of the last failed sync, kept while the next sync runs (and while the state is
    /// anything else) until a sync succeeds.
    ///
    /// ``error`` is `nil` while a retry runs; this is not, so a view can keep showing "couldn't
    /// load, retrying" instead of flipping from the error to a spinner and back.
    public final var lastError: (any Error)? {
        core.trackAccess()
        return core.lastError
    }

    /// The number of failures (``setDidFailToSync(_:)`` calls) since the last successful sync.
    ///
    /// With ``lastError``, it tells "retrying after a failure" (syncing, `consecutiveFailures > 0`)
    /// from "refreshing" (syncing, `0`).
    public final var consecutiveFailures: Int {
        core.trackAccess()
        return core.consecutiveFailures
    }

    /// Whether at least one observer is registered through ``addObserver(_:)``.
    public final var hasObservers: Bool { core.hasObservers }

    /// `<TypeName: state, contents available: yes|no>`.
    open var description: String { loadableDescription() }

    // MARK: - Setters

    /// Moves to ``LoadableState/syncing`` and notifies. The error is cleared; contents stay.
    public final func setSyncing() {
        update(state: .syncing, error: nil)
    }

    /// Stores `contents`, moves to ``LoadableState/didSyncSuccessfully`` and notifies.
    ///
    /// - Parameter contents: The new contents.
    public final func setDidSyncSuccessfully(_ contents: Contents) {
        update(state: .didSyncSuccessfully, error: nil, contents: contents)
    }

    /// Moves to ``LoadableState/didSyncSuccessfully`` keeping the contents, and notifies.
    ///
    /// Use it after changing contents that ``isContentsAvailable`` accounts for. Calling it while
    /// no contents are available is a programmer error and stops the program.
    public final func setDidSyncSuccessfully() {
        guard isContentsAvailable else {
            // `fatalError` (unlike `precondition`) prints its message in release builds too.
            fatalError(
                "\(type(of: self)).setDidSyncSuccessfully() called while isContentsAvailable is false: "
                    + "a successful sync must leave contents available; pass them with setDidSyncSuccessfully(_:)"
            )
        }
        update(state: .didSyncSuccessfully, error: nil)
    }

    /// Stores `error`, moves to ``LoadableState/didFailToSync`` and notifies. Contents stay.
    ///
    /// A repeated failure replaces the error and notifies again.
    ///
    /// - Parameter error: Why the sync failed, or `nil` if unknown.
    public final func setDidFailToSync(_ error: (any Error)?) {
        update(state: .didFailToSync, error: error)
    }

    /// Moves to ``LoadableState/idle`` and notifies. The error is cleared; contents stay.
    public final func setIdle() {
        update(state: .idle, error: nil)
    }

    /// Writes new contents without a sync: what an app does after a "create" call answered with
    /// the new item.
    ///
    /// The state, the error and any running sync are left alone (a later sync result still
    /// lands); the contents count as just confirmed (the age restarts and an invalidation is
    /// forgotten). Notifies once.
    ///
    /// - Parameter contents: The new contents.
    public final func setContents(_ contents: Contents) {
        core.willChange()
        storedContents = contents
        core.hasContents = true
        core.confirmContents()
        finishChange(endingSync: false)
    }

    /// Changes the contents in place without a sync, as ``setContents(_:)`` does.
    ///
    /// Does nothing when there are no contents. While `body` runs, the contents are taken out of
    /// the loadable (so that changing them copies nothing): reading ``contents`` inside `body`
    /// gives `nil`.
    ///
    /// ```swift
    /// posts.updateContents { $0.insert(created, at: 0) }
    /// ```
    ///
    /// - Parameter body: Changes the contents.
    public final func updateContents(_ body: (inout Contents) -> Void) {
        guard var contents = storedContents else { return }
        storedContents = nil
        body(&contents)
        core.willChange()
        storedContents = contents
        core.hasContents = true
        core.confirmContents()
        finishChange(endingSync: false)
    }

    /// Sets contents restored from a cache, confirmed `age` ago, without changing the state or
    /// the error, and notifies once. Not a change of the base contents: nothing is saved.
    ///
    /// - Parameters:
    ///   - contents: The restored contents.
    ///   - age: How long ago they were confirmed; ``Loadable/age`` continues from it.
    package final func restoreContents(_ contents: Contents, age: Duration) {
        core.willChange()
        storedContents = contents
        core.hasContents = true
        core.confirmRestoredContents(age: age)
        finishChange(endingSync: false)
    }

    /// Notifies observers that the contents changed in place (the state stays as it is).
    public final func notifyDidChange() {
        core.willChange()
        core.didChange(NotificationSubject(self))
    }

    /// Stores a new state and error, contents untouched, with one Observation mutation, then
    /// notifies observers.
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    package final func update(state: LoadableState, error: (any Error)?) {
        core.willChange()
        let endsSync = core.state == .syncing && state != .syncing
        core.store(state: state, error: error)
        recordOutcome(state)
        finishChange(endingSync: endsSync)
    }

    /// Stores a new state, error and contents with one Observation mutation, then notifies
    /// observers.
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    ///   - contents: The new contents.
    package final func update(state: LoadableState, error: (any Error)?, contents: Contents) {
        core.willChange()
        let endsSync = core.state == .syncing && state != .syncing
        core.store(state: state, error: error)
        storedContents = contents
        core.hasContents = true
        recordOutcome(state)
        finishChange(endingSync: endsSync)
    }

    /// Counts a failure, or records a success (the contents are confirmed, the failures forgotten).
    @inline(__always)
    private func recordOutcome(_ state: LoadableState) {
        switch state {
        case .didSyncSuccessfully: core.recordSuccess()
        case .didFailToSync: core.recordFailure()
        case .idle, .syncing: break
        }
    }

    /// Ends a change: notifies, through ``notifyAfterFreshnessChange(endingSync:)`` when the
    /// loadable has freshness work to do (a sync pending after this one, a slow sync to clear,
    /// a deadline to set).
    @inline(__always)
    final func finishChange(endingSync: Bool) {
        if (endingSync && !core.freshness.isEmpty) || core.extras?.hasDeadlines == true {
            notifyAfterFreshnessChange(endingSync: endingSync)
        } else {
            core.didChange(NotificationSubject(self))
        }
    }

    /// Notifies observers of a change that has freshness work to do; ``Loadable`` does it.
    func notifyAfterFreshnessChange(endingSync: Bool) {
        core.didChange(NotificationSubject(self))
    }

    /// Called when the first observer arrived or the last one left, before the public hooks.
    func observersDidChange() {}

    /// Called when the first use began (see `SyncableLoadable.isInUse`): calls the core's
    /// ``LoadableCoreExtras/useDidChange``, through which a loadable made of others (a chain)
    /// passes "in use" on.
    package func didBeginUse() { core.extras?.useDidChange?(true) }

    /// Called when the last use ended: calls the core's ``LoadableCoreExtras/useDidChange``.
    package func didEndUse() { core.extras?.useDidChange?(false) }

    /// Goes back to the state and error the loadable had before the current sync began, with one
    /// Observation mutation, then notifies observers. Contents are untouched.
    final func restoreStateBeforeSyncing() {
        core.willChange()
        core.storeStateBeforeSyncing()
        core.freshness.subtract([.pendingSync, .slowSync])
        core.didChange(NotificationSubject(self))
    }

    /// Calls `handler` after every change until the returned token is cancelled or released.
    ///
    /// - Parameter handler: Called on the main actor with this loadable.
    /// - Returns: The token that keeps the observation alive.
    public final func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// Called after the first observer was added. Does nothing by default.
    ///
    /// Override it to start work only while someone watches (open a socket, start a timer).
    open func didAddFirstObserver() {}

    /// Called after the last observer was removed. Does nothing by default.
    open func didRemoveLastObserver() {}
}

extension PushLoadable: LoadableCoreOwner {
    package func observersDidBecomeNonEmpty() {
        observersDidChange()
        didAddFirstObserver()
    }

    package func observersDidBecomeEmpty() {
        observersDidChange()
        didRemoveLastObserver()
    }

    package var failureRecord: (lastError: (any Error)?, consecutiveFailures: Int)? {
        (core.lastError, core.consecutiveFailures)
    }

    package var untrackedIsStale: Bool {
        core.readUntracked { !isContentsAvailable || core.isStaleByInvalidationOrAge }
    }
}
