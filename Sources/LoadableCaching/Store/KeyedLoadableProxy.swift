public import Loadable
public import Observation

/// A loadable for "the selected item" screens: it stands for the entry of its ``key`` in a
/// ``LoadableStore``, holding a lease on it, and follows the key as it changes.
///
/// ```swift
/// let detail = KeyedLoadableProxy(store: posts, placeholder: .previousContents)
/// let token = detail.observe { render($0) }
///
/// detail.key = selectedPostID   // leases the new entry, releases the old one
/// detail.syncIfNeeded()
/// ```
///
/// With no key (`nil`, nothing selected) the proxy is ``LoadableState/idle``, with no contents and
/// no error. With a key, it shows the entry's state, contents and error, and forwards
/// ``sync()``, ``syncIfNeeded()``, ``invalidate()`` and ``cancelSync()`` to it (without a key they
/// do nothing).
///
/// **Placeholders.** While the new entry is idle or syncing without contents, and has not failed
/// since it was made, the proxy shows the ``Placeholder`` (``isPlaceholder`` is then `true`, and
/// the placeholder counts as contents). Once the entry fails or succeeds, only the entry's own
/// contents and error show: never the previous entry's.
///
/// The proxy keeps its entry in use (it holds a lease) for as long as it has a key, whether or not
/// anything observes it; set the key to `nil` when the screen goes. It follows its entry only
/// while it has observers of its own, so an unobserved proxy does not count as an observer of the
/// entry.
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
public final class KeyedLoadableProxy<Key: Hashable & Sendable, Value: SyncableLoadable & ContentsLoadable>:
    SyncableLoadable, ContentsLoadable, Observable, @MainActor CustomStringConvertible
{
    /// What a proxy shows while its new entry has nothing to show yet.
    public enum Placeholder {
        /// Nothing: no contents until the entry has some.
        case none
        /// What the proxy showed for the previous key (its contents, or its placeholder), if
        /// anything: the old item stays on screen, marked ``KeyedLoadableProxy/isPlaceholder``,
        /// while the new one loads.
        case previousContents
        /// The contents `make` gives for the new key (a summary already at hand, say), or nothing
        /// when it returns `nil`. Called once per key change.
        case contents(@MainActor (Key) -> Value.Contents?)
    }

    /// The observers and the Observation registrar of the proxy.
    package let core = LoadableCore()
    /// The store the proxy leases from.
    public let store: LoadableStore<Key, Value>
    /// What the proxy shows while a new entry has nothing to show yet.
    public let placeholder: Placeholder
    private var lease: LoadableLease<Value>?
    /// The placeholder for the current key, fixed when the key changed.
    private var placeholderContents: Value.Contents?
    /// The subscription to the entry, while the proxy has observers of its own.
    package var follower = LoadableFollower()

    /// The key whose entry the proxy stands for; `nil` when nothing is selected. Observed: a read
    /// is told of a change of the key (and, like every getter of a loadable, of any change the
    /// proxy shows).
    ///
    /// Setting a different key leases the new entry, then notifies once, then releases the old
    /// entry's lease (which retains it in the store for a while). Setting the same key does
    /// nothing. Setting a key does not sync: call ``syncIfNeeded()``.
    public var key: Key? {
        get {
            core.trackAccess()
            return storedKey
        }
        set {
            guard newValue != storedKey else { return }
            storedKey = newValue
            keyDidChange()
        }
    }
    /// ``key``, read without telling Observation.
    private var storedKey: Key?

    /// Creates a proxy over `store`.
    ///
    /// - Parameters:
    ///   - store: The store to lease entries from.
    ///   - key: The key to start with; `nil` (the default) for nothing selected.
    ///   - placeholder: What to show while a new entry has nothing to show yet.
    public init(store: LoadableStore<Key, Value>, key: Key? = nil, placeholder: Placeholder = .none) {
        self.store = store
        self.placeholder = placeholder
        storedKey = key
        if let key {
            lease = store.lease(key)
            placeholderContents = Self.placeholderContents(placeholder, for: key, previous: nil)
        }
    }

    /// The loadable of the current key's entry; `nil` without a key.
    public var loadable: Value? { lease?.loadable }

    private func keyDidChange() {
        let previous = currentContents
        let oldLease = lease
        announceChange {
            lease = storedKey.map { store.lease($0) }
            placeholderContents = storedKey.flatMap {
                Self.placeholderContents(placeholder, for: $0, previous: previous)
            }
            followedDidChange(from: oldLease?.loadable)
        }
        oldLease?.release()
    }

    private static func placeholderContents(
        _ placeholder: Placeholder, for key: Key, previous: Value.Contents?
    ) -> Value.Contents? {
        switch placeholder {
        case .none: nil
        case .previousContents: previous
        case .contents(let make): make(key)
        }
    }

    /// Whether the entry has nothing of its own to show yet: idle or syncing, without contents,
    /// and not failed since it was made (a failure shows, and a retry after it does not bring the
    /// placeholder back).
    private var entryHasNothingToShow: Bool {
        guard let loadable = lease?.loadable else { return false }
        let (state, isContentsAvailable) = loadable.statusUntrackedWherePossible
        guard !isContentsAvailable, state == .idle || state == .syncing else { return false }
        return loadable.failureRecordIfKnown?.lastError == nil
    }

    /// What the proxy shows now, read without telling Observation.
    private var currentContents: Value.Contents? {
        if isShowingPlaceholder { return placeholderContents }
        guard let lease, lease.loadable.statusUntrackedWherePossible.isContentsAvailable else { return nil }
        return LoadableCore.readUntracked { lease.loadable.contents }
    }

    private var isShowingPlaceholder: Bool {
        endPlaceholderIfEntrySettled()
        return placeholderContents != nil && entryHasNothingToShow
    }

    /// Drops the placeholder of the current key once its entry is seen failed or successful:
    /// from then on only the entry's own contents and error show, even for a loadable that keeps
    /// no failure record (`TestLoadable`, a combined loadable, a type of the app's own).
    private func endPlaceholderIfEntrySettled() {
        guard placeholderContents != nil, let loadable = lease?.loadable else { return }
        let state = loadable.statusUntrackedWherePossible.state
        guard state == .didFailToSync || state == .didSyncSuccessfully else { return }
        placeholderContents = nil
    }

    /// Whether the proxy shows its ``Placeholder`` rather than the entry's own contents.
    public var isPlaceholder: Bool {
        core.trackAccess()
        guard placeholderContents != nil, let lease else { return false }
        _ = lease.loadableState  // tracked: the placeholder goes when the entry changes
        return isShowingPlaceholder
    }

    /// The entry's state; ``LoadableState/idle`` without a key.
    public var loadableState: LoadableState {
        core.trackAccess()
        return lease?.loadableState ?? .idle
    }

    /// The entry's error; `nil` without a key.
    public var error: (any Error)? {
        core.trackAccess()
        return lease?.error
    }

    /// Whether there are contents to show: the entry's, or the placeholder.
    public var isContentsAvailable: Bool {
        core.trackAccess()
        guard let lease else { return false }
        return lease.isContentsAvailable || isShowingPlaceholder
    }

    /// The entry's contents, or the placeholder while the entry has nothing to show (see
    /// ``isPlaceholder``); `nil` without a key.
    public var contents: Value.Contents? {
        core.trackAccess()
        guard let lease else { return nil }
        if isShowingPlaceholder {
            _ = lease.loadableState  // tracked: the placeholder goes when the entry changes
            return placeholderContents
        }
        return lease.isContentsAvailable ? lease.contents : nil
    }

    /// The entry's `needsSync`; `false` without a key.
    public var needsSync: Bool { lease?.needsSync ?? false }

    /// Syncs the entry; does nothing without a key.
    public func sync() { forwardSync() }

    /// Syncs the entry if it needs it; does nothing without a key.
    public func syncIfNeeded() { forwardSyncIfNeeded() }

    /// Invalidates the entry; does nothing without a key.
    public func invalidate() { forwardInvalidate() }

    /// Cancels the entry's sync; does nothing without a key.
    public func cancelSync() { forwardCancelSync() }

    /// Calls the entry's ``PushLoadable/mutate(optimistic:commit:reconcile:)``: shows a change at
    /// once, commits it, and keeps it or takes it back.
    ///
    /// The change belongs to the entry it began on: setting another key while the commit runs
    /// does not move it. Without a key there is nothing to change: it throws `CancellationError`
    /// and commits nothing.
    ///
    /// - Parameters:
    ///   - optimistic: The change, applied to the entry's contents.
    ///   - commit: The call that makes the change on the server, in the calling task.
    ///   - reconcile: Writes the commit's answer into the entry's base contents; `nil` applies
    ///     `optimistic` to them.
    /// - Returns: The commit's answer.
    @discardableResult
    public func mutate<Contents, R: Sendable>(
        optimistic: @escaping @MainActor (inout Contents) -> Void,
        commit: @MainActor () async throws -> R,
        reconcile: (@MainActor (inout Contents, R) -> Void)? = nil
    ) async throws -> R where Value: PushLoadable<Contents> {
        try await forwardMutate(optimistic: optimistic, commit: commit, reconcile: reconcile)
    }

    /// Calls `handler` after every change of the proxy (its key) or of its entry, until the
    /// returned token is cancelled or released.
    ///
    /// - Parameter handler: Called on the main actor with the proxy.
    /// - Returns: The token that keeps the observation alive.
    public func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// `<KeyedLoadableProxy<Key, Value>: state, contents available: yes|no, key: …>`.
    public var description: String {
        loadableDescription(details: ", key: \(storedKey.map { String(describing: $0) } ?? "none")")
    }
}

extension KeyedLoadableProxy {
    /// One of the package's syncable loadables, with its core.
    public var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: self)
    }
}

extension KeyedLoadableProxy: LoadableFollowing {
    /// The current key's entry.
    package var followed: Value? { lease?.loadable }

    /// An unobserved proxy must not count as an observer of its entry.
    package static var followsOnlyWhileObserved: Bool { true }

    /// Drops the placeholder once the entry settled, then notifies.
    package func followedDidNotify() {
        endPlaceholderIfEntrySettled()
        announceChange()
    }

    /// The entry's state, and its availability or the placeholder's.
    package var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        guard let lease else { return (.idle, false) }
        let status = lease.loadable.statusUntrackedWherePossible
        return (status.state, status.isContentsAvailable || isShowingPlaceholder)
    }
}
