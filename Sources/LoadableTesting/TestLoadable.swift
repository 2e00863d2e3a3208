public import Observation

/// A loadable for tests whose every property a test sets by hand, and which counts how it is used.
///
/// Setting ``loadableState`` notifies observers (even to the same value); setting ``contents``,
/// ``error``, ``isContentsAvailable`` or ``needsSync`` does not, so a test can prepare a change and
/// then announce it. ``sync()`` moves to ``LoadableState/syncing`` and never finishes by itself:
/// the test finishes it.
///
/// Isolated to the main actor; observers are called on the main actor. It is `Observable` like
/// every loadable: each notification is an Observation change of ``loadableState``, ``contents``,
/// ``error`` and ``isContentsAvailable``.
///
/// ```swift
/// @Test @MainActor func groupFollowsItsMembers() {
///     let a = TestLoadable<Int>(), b = TestLoadable<Int>()
///     let group = LoadableGroup([a, b])
///     group.sync()
///     #expect(a.syncCount == 1)
///     a.contents = 1; a.setDidSyncSuccessfully()
///     b.setDidFailToSync(nil)
///     #expect(group.loadableState == .didFailToSync)
/// }
/// ```
@MainActor
public final class TestLoadable<Contents>: SyncableLoadable, ContentsLoadable, Observable {
    /// The state, observers and Observation registrar.
    package let core = LoadableCore()
    private var storedError: (any Error)?
    /// The error when ``sync()`` began, restored by ``cancelSync()``.
    private var errorBeforeSync: (any Error)?
    private var storedIsContentsAvailable: Bool
    private var storedNeedsSync: Bool?
    private var storedContents: Contents?

    /// Creates an idle test loadable.
    ///
    /// - Parameter contents: Contents to start with; ``isContentsAvailable`` starts as
    ///   `contents != nil`.
    public init(contents: Contents? = nil) {
        storedContents = contents
        storedIsContentsAvailable = contents != nil
    }

    private var storedState: LoadableState { core.state }

    /// `value`, read as a getter reads it: counted in `readCount` and told to Observation.
    private func counted<Value>(_ readCount: inout Int, _ value: Value) -> Value {
        readCount += 1
        core.trackAccess()
        return value
    }

    /// The state; setting it notifies observers, even when the value does not change.
    public var loadableState: LoadableState {
        get { counted(&loadableStateReadCount, storedState) }
        set {
            core.willChange()
            core.store(state: newValue, error: nil)
            core.didChange(NotificationSubject(self))
        }
    }

    /// The contents; setting them does not notify.
    public var contents: Contents? {
        get {
            core.trackAccess()
            return storedContents
        }
        set { storedContents = newValue }
    }

    /// The error; setting it does not notify.
    public var error: (any Error)? {
        get { counted(&errorReadCount, storedError) }
        set { storedError = newValue }
    }

    /// Whether contents are available; setting it does not notify. Starts as `contents != nil`.
    public var isContentsAvailable: Bool {
        get { counted(&isContentsAvailableReadCount, storedIsContentsAvailable) }
        set { storedIsContentsAvailable = newValue }
    }

    /// Whether a sync is needed; setting it does not notify.
    ///
    /// Until a test sets it, it follows ``Loadable``'s formula: contents not available, or the
    /// state is idle or failed. Set it to `nil` to return to the formula.
    public var needsSync: Bool {
        get {
            if let storedNeedsSync { return storedNeedsSync }
            switch storedState {
            case .idle, .didFailToSync: return true
            case .syncing, .didSyncSuccessfully: return !storedIsContentsAvailable
            }
        }
        set { storedNeedsSync = newValue }
    }

    /// Clears a value set through ``needsSync`` so that the default formula applies again.
    public func resetNeedsSync() { storedNeedsSync = nil }

    /// How many times ``sync()`` was called (including calls made by ``syncIfNeeded()``).
    public private(set) var syncCount = 0
    /// How many times ``syncIfNeeded()`` was called.
    public private(set) var syncIfNeededCount = 0
    /// How many times ``invalidate()`` was called.
    public private(set) var invalidateCount = 0
    /// How many times ``cancelSync()`` was called.
    public private(set) var cancelSyncCount = 0
    /// How many observers were added.
    public private(set) var addObserverCount = 0
    /// How many observers were removed (cancelled or released).
    public private(set) var removeObserverCount = 0
    /// How many times ``loadableState`` was read.
    public private(set) var loadableStateReadCount = 0
    /// How many times ``isContentsAvailable`` was read.
    public private(set) var isContentsAvailableReadCount = 0
    /// How many times ``error`` was read.
    public private(set) var errorReadCount = 0

    /// Sets every counter back to zero.
    public func resetCounters() {
        syncCount = 0
        syncIfNeededCount = 0
        invalidateCount = 0
        cancelSyncCount = 0
        addObserverCount = 0
        removeObserverCount = 0
        resetReadCounts()
    }

    /// Sets the property read counters (``loadableStateReadCount``,
    /// ``isContentsAvailableReadCount``, ``errorReadCount``) back to zero.
    public func resetReadCounts() {
        loadableStateReadCount = 0
        isContentsAvailableReadCount = 0
        errorReadCount = 0
    }

    /// Whether at least one observer is registered.
    public var hasObservers: Bool { core.hasObservers }

    /// Counts the call; if not syncing, clears the error and moves to ``LoadableState/syncing``
    /// (notifies). Never finishes by itself.
    public func sync() {
        syncCount += 1
        guard storedState != .syncing else { return }
        errorBeforeSync = storedError
        storedError = nil
        loadableState = .syncing
    }

    /// Counts the call and calls ``sync()`` if ``needsSync`` is `true`.
    public func syncIfNeeded() {
        syncIfNeededCount += 1
        if needsSync { sync() }
    }

    /// Counts the call; nothing else (the test decides what an invalidation does).
    public func invalidate() {
        invalidateCount += 1
    }

    /// Counts the call; while syncing, goes back to the state and error from before the sync
    /// (notifies). Does nothing else when not syncing.
    public func cancelSync() {
        cancelSyncCount += 1
        guard storedState == .syncing else { return }
        storedError = errorBeforeSync
        core.willChange()
        core.storeStateBeforeSyncing()
        core.didChange(NotificationSubject(self))
    }

    /// Moves to ``LoadableState/idle`` (notifies).
    public func setIdle() { loadableState = .idle }

    /// Moves to ``LoadableState/syncing`` (notifies) without counting a sync.
    public func setSyncing() { loadableState = .syncing }

    /// Makes contents available, clears the error and moves to
    /// ``LoadableState/didSyncSuccessfully`` (notifies).
    public func setDidSyncSuccessfully() {
        storedIsContentsAvailable = true
        storedError = nil
        loadableState = .didSyncSuccessfully
    }

    /// Stores the contents and succeeds, as ``setDidSyncSuccessfully()`` does.
    ///
    /// - Parameter contents: The new contents.
    public func setDidSyncSuccessfully(_ contents: Contents) {
        storedContents = contents
        setDidSyncSuccessfully()
    }

    /// Stores `error` and moves to ``LoadableState/didFailToSync`` (notifies). Contents stay.
    ///
    /// - Parameter error: Why the sync failed, or `nil`.
    public func setDidFailToSync(_ error: (any Error)?) {
        storedError = error
        loadableState = .didFailToSync
    }

    /// Notifies observers without changing anything.
    public func notifyDidChange() {
        core.willChange()
        core.didChange(NotificationSubject(self))
    }

    /// Calls `handler` after every notification until the returned token goes away.
    ///
    /// - Parameter handler: Called on the main actor with this loadable.
    /// - Returns: The token that keeps the observation alive.
    public func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        addObserverCount += 1
        return registerObserver(handler)
    }
}

extension TestLoadable {
    /// One of the package's syncable loadables, with its core.
    public var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: self)
    }
}

extension TestLoadable: LoadableCoreOwner {
    /// Counted in ``addObserverCount`` like any observer (a group's, a proxy's).
    package func registerImmediateObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        addObserverCount += 1
        let (id, _) = core.addObserver(handler, isImmediate: true)
        return LoadableObservation(owner: self, id: id)
    }

    package func unregisterObserver(_ id: Int) {
        if core.removeObserver(id) { removeObserverCount += 1 }
    }

    /// The state and availability, without telling Observation; counted as one read of each
    /// (a group's bookkeeping reads its members this way, and tests count those reads).
    package var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        loadableStateReadCount += 1
        isContentsAvailableReadCount += 1
        return (storedState, storedIsContentsAvailable)
    }
}

extension TestLoadable: @MainActor CustomStringConvertible {
    /// `<TestLoadable<Contents>: state, contents available: yes|no>`.
    public var description: String { loadableDescription() }
}
