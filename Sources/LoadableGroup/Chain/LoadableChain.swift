/// A loadable that syncs other loadables one after another, each when the one before it is done.
///
/// Where a ``LoadableGroup`` syncs its members together, a chain syncs its ``items`` in order:
/// it calls `syncIfNeeded()` on the current item, waits until the item is no longer syncing,
/// and then:
/// - if the item's sync did not fail and it has contents available, asks the item's `whenContentsAvailable` callback what
///   to do next (``NextAction/proceed`` when there is no callback): go on with the next item,
///   fail the chain with an error, or complete the chain successfully at once;
/// - if the item has no contents, or its sync failed (even with contents from earlier), fails
///   the chain with a ``LoadableChainError`` carrying the item's index and error.
///
/// The chain succeeds after its last item proceeds; an empty chain succeeds as soon as it syncs.
/// A new sync starts again from the first item, but items that do not need to sync are passed
/// through at once, so in effect it resumes from the first item that needs it. Steps happen
/// synchronously inside the items' notifications, and items that finish synchronously are
/// stepped through in a loop, never by recursion. Only the current item is observed.
///
/// ``isContentsAvailable`` is `true` exactly while the chain is
/// `LoadableState.didSyncSuccessfully`: a chain has no contents of its own. ``needsSync`` is
/// `true` while the chain is idle or failed, or while any item needs to sync.
/// `cancelSync()` stops observing the current item, and cancels the item's sync only if the chain
/// started it.
///
/// Isolated to the main actor; observers are called on the main actor. It does not notify
/// while moving from one item to the next, only when it starts syncing and when it ends.
///
/// ```swift
/// let signIn = LoadableChain([
///     .init(accessToken),
///     .init(profile) {
///         profile.contents!.isBanned ? .fail(SignInError.banned) : .proceed
///     },
///     .init(settings),
/// ])
/// try await signIn.syncedContents()  // throws the first failure
/// ```
///
/// - Complexity: O(1) work per item, plus the items' own syncs; ``needsSync`` is O(n).
@MainActor
public final class LoadableChain: Loadable<Void> {
    /// What the chain does after an item ended its sync with contents available.
    ///
    /// ```swift
    /// LoadableChain.Item(cache) { cache.contents!.isFresh ? .completeSuccessfully : .proceed }
    /// ```
    public enum NextAction: Sendable {
        /// Go on with the next item, or succeed if this was the last one.
        case proceed
        /// Fail the chain with this error (reported verbatim as the chain's `error`).
        case fail(any Error)
        /// Succeed now, skipping the remaining items.
        case completeSuccessfully
    }

    /// One step of a chain: a loadable and what to do once it has contents.
    ///
    /// ```swift
    /// let step = LoadableChain.Item(profile) {
    ///     profile.contents!.isComplete ? .proceed : .fail(ProfileError.incomplete)
    /// }
    /// ```
    public struct Item {
        /// The loadable synced at this step (held strongly by the chain).
        public let loadable: any SyncableLoadable
        /// Decides what happens after ``loadable`` ended its sync with contents available;
        /// `nil` means ``NextAction/proceed``. Called on the main actor.
        public let whenContentsAvailable: (@MainActor () -> NextAction)?

        /// Creates a step.
        ///
        /// - Parameters:
        ///   - loadable: The loadable to sync at this step.
        ///   - whenContentsAvailable: What to do once `loadable` has contents; by default,
        ///     proceed.
        public init(
            _ loadable: any SyncableLoadable,
            whenContentsAvailable: (@MainActor () -> NextAction)? = nil
        ) {
            self.loadable = loadable
            self.whenContentsAvailable = whenContentsAvailable
        }
    }

    /// The steps, in order; held strongly.
    ///
    /// Setting them while the chain syncs stops observing the current item and starts again
    /// from the first new item; otherwise the new items are used by the next sync.
    public var items: [Item] {
        didSet {
            if core.isInUse {
                // The new items first, so that an item in both lists stays in use throughout.
                for item in items { item.loadable.beginUseIfCounted() }
                for item in oldValue { item.loadable.endUseIfCounted() }
            }
            guard core.state == .syncing else { return }
            endRun()
            run(from: 0)
        }
    }

    /// The index of the item being synced; `nil` while the chain is not syncing.
    ///
    /// Changes to it are not notified.
    public private(set) var currentIndex: Int?

    /// Grows whenever the chain moves on; callbacks and observers of older steps compare it.
    private var step = 0
    private var itemObservation: LoadableObservation?
    /// Whether the chain started the current item's sync (the item was not syncing before the
    /// chain asked it): only then does ``cancelSync()`` cancel it.
    private var startedCurrentItemSync = false
    private var isComputingNeedsSync = false

    /// Creates an idle chain.
    ///
    /// - Parameters:
    ///   - items: The steps, in order; may be empty (the chain then succeeds as soon as it syncs).
    ///   - clock: The clock of the chain's freshness and watchdog (see `Loadable`).
    public init(_ items: [Item], clock: any Clock<Duration> = ContinuousClock()) {
        self.items = items
        super.init(clock: clock)
        core.subscribe(ItemUse(self))
    }

    /// `true` exactly while the chain is `LoadableState.didSyncSuccessfully`.
    public override var isContentsAvailable: Bool { loadableState == .didSyncSuccessfully }

    /// `true` while the chain is idle or failed, or while any item needs to sync.
    ///
    /// - Complexity: O(n) in the number of items.
    public override var needsSync: Bool {
        switch loadableState {
        case .idle, .didFailToSync:
            return true
        case .syncing, .didSyncSuccessfully:
            // A chain that is (directly or not) one of its own items must not recurse forever.
            guard !isComputingNeedsSync else { return false }
            isComputingNeedsSync = true
            defer { isComputingNeedsSync = false }
            return items.contains { $0.loadable.needsSync }
        }
    }

    /// Starts from the first item. Called by `sync()`; do not call it yourself.
    public override func doSync() {
        endRun()
        run(from: 0)
    }

    /// Stops observing the current item, and cancels its sync if the chain started it. Called by
    /// `cancelSync()` (and by the watchdog).
    public override func doCancelSync() {
        let item = currentIndex.map { items[$0].loadable }
        let startedByChain = startedCurrentItemSync
        endRun()
        if startedByChain, let item, item.statusUntrackedWherePossible.state == .syncing { item.cancelSync() }
    }

    /// Marks every item stale without syncing them one by one, then applies the rule of every
    /// loadable to the chain: while it syncs, it runs once more when it ends; otherwise, in use,
    /// it runs again now, in order (so a token item refreshes before the items that need it);
    /// not in use, it is only marked stale.
    public override func invalidate() {
        Invalidation.deferringSyncs {
            for item in items { item.loadable.invalidate() }
        }
        super.invalidate()
    }

    /// Passes "in use" on to the items, or ends their use through this chain.
    fileprivate func useDidChange(_ isInUse: Bool) {
        for item in items {
            if isInUse { item.loadable.beginUseIfCounted() } else { item.loadable.endUseIfCounted() }
        }
    }

    // MARK: - Steps

    /// Forgets the current step: its observer and callbacks are ignored from now on.
    private func endRun() {
        step += 1
        currentIndex = nil
        startedCurrentItemSync = false
        itemObservation?.cancel()
        itemObservation = nil
    }

    /// Syncs items from `start` on, looping through those that finish synchronously, until one
    /// keeps syncing (then observes it) or the chain ends.
    ///
    /// The chain and its items are read untracked: running the chain is not a read by a view.
    private func run(from start: Int) {
        var index = start
        while core.state == .syncing {
            step += 1
            let step = step
            guard index < items.count else {
                endRun()
                setDidSyncSuccessfully(())
                return
            }
            currentIndex = index
            let item = items[index].loadable
            let wasSyncing = item.statusUntrackedWherePossible.state == .syncing
            item.syncIfNeeded()
            startedCurrentItemSync = !wasSyncing && item.statusUntrackedWherePossible.state == .syncing
            // The item's observers may have cancelled, restarted or reconfigured the chain.
            guard step == self.step, core.state == .syncing else { return }
            if item.statusUntrackedWherePossible.state == .syncing {
                let observation = item.addObserver { [weak self] item in
                    guard let self, step == self.step, self.core.state == .syncing,
                        item.statusUntrackedWherePossible.state != .syncing
                    else { return }
                    self.itemObservation?.cancel()
                    self.itemObservation = nil
                    if let next = self.evaluate(at: index, step: step) { self.run(from: next) }
                }
                if step == self.step {
                    itemObservation = observation
                } else {
                    observation.cancel()
                }
                return
            }
            guard let next = evaluate(at: index, step: step) else { return }
            index = next
        }
    }

    /// Decides what follows the item at `index`, which is done syncing. Returns the next index
    /// to sync, or `nil` if the chain ended (or was changed by the item's callback).
    private func evaluate(at index: Int, step: Int) -> Int? {
        let item = items[index]
        // A failed item fails the chain even with stale contents: proceeding on them would hide
        // the failure (MMMLoadable's chain did that).
        let (state, isContentsAvailable) = item.loadable.statusUntrackedWherePossible
        guard isContentsAvailable, state != .didFailToSync else {
            let error = LoadableChainError(index: index, underlying: LoadableCore.readUntracked { item.loadable.error })
            endRun()
            setDidFailToSync(error)
            return nil
        }
        let action = item.whenContentsAvailable?() ?? .proceed
        guard step == self.step, core.state == .syncing else { return nil }
        switch action {
        case .proceed:
            return index + 1
        case .fail(let error):
            endRun()
            setDidFailToSync(error)
            return nil
        case .completeSuccessfully:
            endRun()
            setDidSyncSuccessfully(())
            return nil
        }
    }
}

/// Passes a chain's "in use" on to its items: subscribed to the chain's own core, so it holds the
/// chain weakly.
@MainActor
private final class ItemUse: LoadableCoreSubscriber {
    private weak var chain: LoadableChain?

    init(_ chain: LoadableChain) { self.chain = chain }

    var coreEvents: LoadableCoreEvent.Kinds { .useChanged }

    func loadableCoreDidEmit(_ event: LoadableCoreEvent) {
        guard case .useChanged(let isInUse) = event else { return }
        chain?.useDidChange(isInUse)
    }
}
