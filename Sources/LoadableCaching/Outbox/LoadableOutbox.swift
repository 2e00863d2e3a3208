public import Foundation
internal import Loadable
import LoadableSupport
public import LoadableSyncer
public import Observation

/// Changes the user made, kept on disk until the server has them, and sent in order when the app
/// is active and online: a change made on a train is not lost, and reaches the server once.
///
/// ```swift
/// let outbox = LoadableOutbox<PostEdit>(cache: cache.scoped("outbox/")) { edit, idempotencyKey in
///     try await service.send(.patch, "posts/\(edit.postID)", json: edit, idempotencyKey: idempotencyKey)
/// }
/// outbox.show(on: post) { post, edit in
///     guard edit.postID == post.id else { return false }
///     post.title = edit.title
///     return true
/// }
/// outbox.enqueue(PostEdit(postID: 7, title: "On the train"))  // shown at once, sent when it can be
/// ```
///
/// **Saved first.** ``enqueue(_:scope:)`` saves the item to the cache (off the main actor) before
/// its first send; ``saved()`` waits for that. Every change of the queue is saved the same way:
/// each save appends what changed since the last one to the outbox's journal (one entry), and now
/// and then a snapshot of the whole queue replaces the entries it covers, so a save costs the same
/// however long the queue is, and a crash at any moment leaves the queue as it was before or after
/// a save. An outbox made on the same cache and key after a relaunch restores every item whose
/// enqueue was saved, in order (an item that was sending is pending again), and sends it again
/// with the same ``OutboxItem/idempotencyKey``: a server that honours the `Idempotency-Key`
/// header applies each change once, even when the app died between the server's answer and the
/// save of the removal.
///
/// **Sending.** Items of one scope are sent in order, one at a time; scopes in parallel, at most
/// ``maxConcurrentSends`` at once (the scope whose next item is oldest first), while the
/// ``activity`` monitor says the app is active and not offline (``isPaused`` otherwise; a send
/// running when it pauses goes on). What the server did is the ``OutboxOutcome`` `send` returns:
/// ``OutboxOutcome/applied`` and ``OutboxOutcome/appliedAs(_:)`` remove the item (its layers join),
/// ``OutboxOutcome/dropped`` removes it (its layers leave), ``OutboxOutcome/conflict(remote:)``
/// keeps it as a ``OutboxItem/State/conflict`` for ``resolve(_:with:)`` or ``discard(_:)``.
/// - A retryable failure (``shouldRetry``): the item stays first in its scope and is sent again
///   after the retry policy's delay, or after the error's `RetryAfterProviding.retryAfter` when
///   that is longer (up to one hour); the other scopes go on. Nothing is retried while paused;
///   coming back active and online starts the backoff over and retries at once, but never before
///   the server's `Retry-After`. The deadline is kept with the item: a relaunch does not send
///   before it. Once a policy with `maxRetries` has none left, the scope waits for the next return
///   to active and online, or the next ``enqueue(_:scope:)`` into it, or ``retry(_:)``.
/// - Any other failure: the item is ``OutboxItem/State/failed`` and stays, for the app to show,
///   ``retry(_:)``, ``resolve(_:with:)`` or ``discard(_:)``; the items after it go on.
///
/// **Two processes.** On a cache that locks across processes (the file and SQLite caches), an app
/// and its extension may share one outbox: one of them sends at a time (the one holding the
/// cache's lock), the other reads the queue every 5 seconds while active, shows every item, and
/// takes over when the lock frees. See `Docs/Offline.md`.
///
/// **Shown before sent.** ``show(on:_:)`` shows every item that is not sent yet as an optimistic
/// layer on a loadable, above every refresh, as ``PushLoadable/mutate(optimistic:commit:reconcile:)``
/// does; a sent item joins the loadable's base contents, a discarded one leaves.
///
/// **Errors.** Cache failures, and stored items whose change no longer decodes (a new version of
/// the app changed `Change`), are told to ``onError``. Such an item is set aside: kept in the
/// cache, never sent, not in ``items``, and reported once; a later version that decodes it again
/// brings it back as failed. A change that cannot be encoded is reported and sent, but does not
/// survive a relaunch. A save that fails is reported, and the items it carried are sent all the
/// same (the disk may be full; the server should still get them). A stored queue that could not
/// be read for another reason than its bytes (permissions, too many open files) is reported and
/// kept: each save adds to it, and the first read that succeeds puts its items back first.
///
/// **Observation.** ``items``, ``pendingCount``, ``isPaused`` and ``isSending`` are observable.
///
/// **Inspector.** While a `LoadableInspector` is attached, the outbox records each enqueue, each
/// send and how it ended, under its ``inspectorLabel`` (which lists the events and their
/// outcomes), and an inspector's snapshot shows its items.
///
/// Isolated to the main actor. Give the outbox a key that no store's `removeAll()` clears: its
/// own cache, or a scope of its own (`cache.scoped("outbox/")`). Two live outboxes of one process
/// on one key, or an outbox on an entry of a cache a live store owns, stop the program with a
/// message.
@MainActor
public final class LoadableOutbox<Change: Codable & Sendable>: Observable {
    /// The items not sent yet, oldest first: pending, sending, failed and conflicted.
    public var items: [OutboxItem<Change>] {
        access(OutboxObservationKey.items)
        return storedItems
    }

    /// How many items are still to be sent: those pending or sending (failed and conflicted items
    /// wait for the app). Observed through ``items``.
    public var pendingCount: Int {
        access(OutboxObservationKey.items)
        return storedItems.count { $0.state == .pending || $0.state == .sending }
    }

    /// Whether sending is paused: the ``activity`` monitor says the app is inactive or offline.
    public var isPaused: Bool {
        access(OutboxObservationKey.isPaused)
        return storedIsPaused
    }

    /// Whether a send is running (a send of an item discarded meanwhile included, until it ends).
    public var isSending: Bool {
        access(OutboxObservationKey.isSending)
        return !sends.isEmpty || !discardedSends.isEmpty
    }

    /// The cache the items are kept in.
    public let cache: any LoadableCache
    /// The items' key in ``cache``.
    public let key: String
    /// The monitor whose activity and connectivity pause and resume sending.
    public let activity: ActivityMonitor
    /// The most sends that run at once, one per scope.
    public let maxConcurrentSends: Int
    /// Told of each failure to restore or save the items, of each change that cannot be encoded,
    /// and of each stored item set aside because its change no longer decodes (once per item),
    /// with a ``LoadableCacheError`` that names ``key``. Set it right after making the outbox:
    /// the restore reports when it finishes.
    public var onError: (@MainActor (any Error) -> Void)?
    /// Whether an error a `send` threw may be fixed by sending the item again later: the item then
    /// stays pending and its scope retries after the policy's backoff (honouring `Retry-After`);
    /// otherwise it is ``OutboxItem/State/failed``. ``retriesByDefault(_:)`` unless the init was
    /// given another rule.
    public var shouldRetry: @MainActor (any Error) -> Bool

    let send: @MainActor (Change, _ idempotencyKey: String) async throws -> OutboxOutcome<Change>
    let rebase: (@MainActor (_ later: inout Change, _ applied: Change) -> Void)?
    let coalesce: (@MainActor (_ earlier: Change, _ later: Change) -> Change?)?
    /// The wall-clock time, for `enqueuedAt`, the retry deadlines kept and the saved entry's
    /// `savedAt`.
    let now: @Sendable () -> Date
    let encoder = JSONEncoder()
    var storedItems: [OutboxItem<Change>] = []
    /// Each item as it is saved, in the order of ``storedItems`` (kept in step with it), the items
    /// set aside and the changes sent that no loadable showed: behind a lock, so that a save
    /// copies them when it runs, off the main actor. A save that held the array instead would make
    /// the main actor's next change of it copy the whole queue. The records change only together
    /// with a save asked for (or in ways a save merges the same whatever it reads, while
    /// restoring), so that after the saves asked for, the cache holds the same bytes however the
    /// saves ran.
    let stored = Locked(OutboxRecords())
    /// The changes sent that no loadable showed yet, by the id of their record: shown on the
    /// loadables of later ``show(on:_:)`` calls until they sync.
    var sentChanges: [(id: String, change: Change)] = []
    /// Send counts not in the records yet, by item id: written into them when the next save is
    /// asked for.
    var unsavedAttempts: [String: Int] = [:]
    var storedIsPaused: Bool
    /// The running sends, by item id.
    var sends: [String: OutboxSending] = [:]
    /// The sends of discarded items that still run, by send number, with their scopes.
    var discardedSends: [Int: String?] = [:]
    /// Counts sends, so that a send cancelled meanwhile is told apart from the next one.
    var sendCount = 0

    var saveWaiters: [(sequence: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    /// The callers of ``restored()`` waiting for the restore.
    let restore = RestoreWaiter()
    /// ``removeAll()`` was called while restoring: what the restore finds is dropped.
    var dropsRestored = false
    /// The stored queue could not be read (for another reason than its bytes): saves add to it.
    var storedIsUnread = false

    /// The decisions: what to send, when to retry (the syncer's rules, per scope).
    var machine: OutboxStateMachine
    /// Actions decided while others are being carried out: a handler told of a change (which may
    /// enqueue or discard) runs inside them.
    var pendingActions: [OutboxStateMachine.Action] = []
    var isPerforming = false
    let clock: ElapsedClock
    var timer = ClockTimer()

    // Two processes: one sends, holding the cache's lock; each reads the other's changes.
    /// Whether another process may share the queue (the cache locks across processes).
    let sharesQueue: Bool
    /// The sender's lock and the reads of the queue.
    var shared = OutboxSharedQueue()
    /// How often an outbox whose queue another process may share reads it: what the other
    /// enqueued shows within this time, and a sender that went is taken over within it.
    static var sharedReadInterval: Duration { .seconds(5) }

    /// The loadables the items show on, by identity.
    var displays: [ObjectIdentifier: OutboxDisplay<Change>] = [:]
    var displaySweepThreshold = 16
    var storedItemsDidChange: (@MainActor () -> Void)?
    /// Made by the first tracked read, so that an outbox nobody observes pays nothing for it.
    var observation: ObservationState?
    /// The label set through ``inspectorLabel``; `nil` for the default, built only when read.
    var storedInspectorLabel: String?

    /// How long a change sent while no loadable showed it is kept to be shown: a day.
    static var sentChangeLifetime: TimeInterval { 86_400 }
    /// How many such changes are kept, the newest.
    static var maxSentChanges: Int { 64 }

    /// Creates an outbox whose `send` says what the server did with each change, and starts
    /// reading the items kept under `key` in `cache` (off the main actor); items enqueued before
    /// the read finishes go after the ones it finds.
    ///
    /// - Parameters:
    ///   - cache: Where the items are kept.
    ///   - rebase: After a send answered ``OutboxOutcome/appliedAs(_:)``, called for each later
    ///     item of the same scope with the server's version, so that a queued edit carries what
    ///     the server just gave (a new record version). The rebased items are saved.
    ///   - coalesce: Called when a change is enqueued into a scope whose last item was never sent
    ///     (pending, no attempt yet): a merged change takes that item's place (and keeps its
    ///     idempotency key); `nil` enqueues the change as an item of its own.
    ///   - maxConcurrentSends: The most sends that run at once (one per scope); 1 or more, 4 by
    ///     default.
    ///   - shouldRetry: Whether a thrown error may be retried; ``retriesByDefault(_:)`` when `nil`.
    ///   - key: The items' key in `cache`; one outbox per key.
    ///   - activity: Pauses sending while the app is inactive or offline; `ActivityMonitor.system`
    ///     by default.
    ///   - retryPolicy: The delays between retries of a retryable failure, per scope; its refresh
    ///     period is not used.
    ///   - clock: The clock retries wait on; tests pass a `ManualClock`.
    ///   - now: The wall-clock time, for ``OutboxItem/enqueuedAt``, the retry deadlines kept
    ///     across launches and the saved entry's ``CachedEntry/savedAt``; by default the
    ///     system's. Tests pass a fixed date.
    ///   - send: Sends one change and says what the server did with it (``OutboxOutcome``);
    ///     throws when it did not reach the server, or the server failed. Pass the idempotency key
    ///     along (as the `Idempotency-Key` header), so that the server applies a change sent twice
    ///     once.
    public init(
        cache: any LoadableCache,
        rebase: (@MainActor (_ later: inout Change, _ applied: Change) -> Void)? = nil,
        coalesce: (@MainActor (_ earlier: Change, _ later: Change) -> Change?)? = nil,
        maxConcurrentSends: Int = 4,
        shouldRetry: (@MainActor (any Error) -> Bool)? = nil,
        key: String = "outbox",
        activity: ActivityMonitor = .system,
        retryPolicy: any TimeoutPolicy = BackoffTimeoutPolicy(),
        clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date.now },
        send: @escaping @MainActor (Change, _ idempotencyKey: String) async throws -> OutboxOutcome<Change>
    ) {
        // `requireValid`, not `precondition`: a release build prints the message too.
        requireValid(
            maxConcurrentSends >= 1,
            "LoadableOutbox: maxConcurrentSends must be 1 or more (got \(maxConcurrentSends))")
        self.cache = cache
        self.key = key
        self.activity = activity
        self.maxConcurrentSends = maxConcurrentSends
        self.send = send
        self.rebase = rebase
        self.coalesce = coalesce
        self.shouldRetry = shouldRetry ?? { Self.retriesByDefault($0) }
        self.now = now
        self.clock = ElapsedClock(clock)
        storedIsPaused = !activity.allowsSyncing
        sharesQueue = cache.locksAcrossProcesses
        machine = OutboxStateMachine(
            policy: retryPolicy, maxConcurrentSends: maxConcurrentSends, isPaused: !activity.allowsSyncing,
            isOffline: activity.isOffline, isSender: !cache.locksAcrossProcesses)
        CacheClaims.claim(cache, key: key, for: self)
        activity.addFollower(self)
        // One weak registration per outbox: an inspector's snapshot reads the items when asked.
        LoadableInspection.register(self)
        let stored = stored
        stored.withLock {
            $0.tracksChanges = sharesQueue
            $0.writesSnapshots = !sharesQueue
        }
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            let claimed = await OutboxStorage.claimSlot(in: cache, key: key)
            stored.withLock {
                $0.slot = claimed?.slot
                $0.slotLock = claimed?.lock
            }
            let outcome = await OutboxStorage.restore(Change.self, from: cache, key: key)
            // Before any save: the next entry goes after those read.
            stored.withLock { $0.didRead(outcome.journal) }
            return { [weak self] in self?.restoreDidFinish(outcome) }
        }
    }

    /// Creates an outbox whose `send` returns once the server has the change
    /// (``OutboxOutcome/applied``), and starts reading the items kept under `key` in `cache` (off
    /// the main actor); items enqueued before the read finishes go after the ones it finds.
    ///
    /// - Parameters:
    ///   - cache: Where the items are kept.
    ///   - key: The items' key in `cache`; one outbox per key.
    ///   - activity: Pauses sending while the app is inactive or offline; `ActivityMonitor.system`
    ///     by default.
    ///   - retryPolicy: The delays between retries of a retryable failure; its refresh period is
    ///     not used.
    ///   - clock: The clock retries wait on; tests pass a `ManualClock`.
    ///   - now: The wall-clock time, for ``OutboxItem/enqueuedAt`` and the saved entry's
    ///     ``CachedEntry/savedAt``; by default the system's. Tests pass a fixed date.
    ///   - send: Sends one change; throws when it did not reach the server. Pass the idempotency
    ///     key along (as the `Idempotency-Key` header), so that the server applies a change sent
    ///     twice once.
    public convenience init(
        cache: any LoadableCache,
        key: String = "outbox",
        activity: ActivityMonitor = .system,
        retryPolicy: any TimeoutPolicy = BackoffTimeoutPolicy(),
        clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date.now },
        send: @escaping @MainActor (Change, _ idempotencyKey: String) async throws -> Void
    ) {
        self.init(
            cache: cache, key: key, activity: activity, retryPolicy: retryPolicy, clock: clock, now: now
        ) { change, idempotencyKey in
            try await send(change, idempotencyKey)
            return .applied
        }
    }

    deinit {
        timer.cancelTask()
        shared.timer.cancelTask()
        for sending in sends.values { sending.task.cancel() }
    }

    /// The outbox's default retry rule: an error that says `RetryAfterProviding.isRetryableWithIdempotencyKey`
    /// (which is `RetryAfterProviding.isRetryable` unless the error says otherwise; an HTTP `409`
    /// to a request that carried an `Idempotency-Key` is retried), and any `URLError`. Anything
    /// else marks the item failed: a write is not repeated unless an error says it may be, where
    /// `LoadableSyncer` repeats a read unless an error says it may not.
    ///
    /// - Parameter error: What a `send` threw.
    /// - Returns: Whether the item is sent again later.
    public static func retriesByDefault(_ error: any Error) -> Bool {
        if let error = error as? any RetryAfterProviding { return error.isRetryableWithIdempotencyKey }
        return error is URLError
    }

    // MARK: - Changes

    /// Adds `change` at the end of `scope`'s items, shows it on the loadables of ``show(on:_:)``,
    /// saves it, and sends it once it is saved and its turn in the scope comes.
    ///
    /// With a `coalesce` closure, a change enqueued while the last item of its scope was never
    /// sent may be merged into that item instead (which keeps its place and its key).
    ///
    /// - Parameters:
    ///   - change: The change.
    ///   - scope: The scope: items of one scope are sent in order, one at a time (the edits of one
    ///     record); scopes are sent in parallel, up to ``maxConcurrentSends``. Items without one
    ///     share a scope.
    /// - Returns: The new item's ``OutboxItem/id``, or the id of the item it was merged into.
    @discardableResult
    public func enqueue(_ change: Change, scope: String? = nil) -> OutboxItem<Change>.ID {
        if let coalesce, let id = machine.lastPendingItem(in: scope),
            let earlier = storedItems.first(where: { $0.id == id }), earlier.attempts == 0,
            let merged = coalesce(earlier.change, change)
        {
            // The closure may have changed the queue: the item must still be the scope's last.
            if machine.lastPendingItem(in: scope) == id, setChange(of: id, to: merged) {
                if let inspector = LoadableInspection.inspector { recordEnqueued(id, in: inspector) }
                perform(machine.changed(id, now: clock.elapsed))
                return id
            }
        }
        let (id, idempotencyKey) = OutboxIdentifiers.pair()
        let item = OutboxItem(
            id: id, change: change, idempotencyKey: idempotencyKey, scope: scope, enqueuedAt: now(), attempts: 0,
            lastError: nil, state: .pending)
        let encoded = encode(change)
        var record = OutboxRecord(
            id: id, idempotencyKey: idempotencyKey, enqueuedAt: item.enqueuedAt.timeIntervalSinceReferenceDate,
            attempts: 0, isFailed: false, isSetAside: false, lastError: "", change: encoded ?? Data(),
            isUnsaved: encoded == nil)
        record.scope = scope
        let actions = machine.enqueue(id, scope: scope, now: clock.elapsed)
        mutateItems { items, records in
            items.append(item)
            records.append(record)
        }
        forEachDisplay { addLayer(item.id, change, on: $0) }
        if let inspector = LoadableInspection.inspector { recordEnqueued(id, in: inspector) }
        perform(actions)
        return item.id
    }

    /// Sends the failed item `id` again, in its place in its scope (items before it that are not
    /// sent yet go first). Does nothing for an item that is not failed, or not in the outbox.
    ///
    /// - Parameter id: The item's ``OutboxItem/id``.
    public func retry(_ id: OutboxItem<Change>.ID) {
        guard storedItems.contains(where: { $0.id == id && $0.state == .failed }) else { return }
        updateItem(id) { item, record in
            item.state = .pending
            record.isFailed = false
        }
        if let actions = machine.retry(id, now: clock.elapsed) { perform(actions) }
    }

    /// Settles the conflicted or failed item `id` with `change`: the item takes it (and a new
    /// idempotency key, since its content changed), keeps its place, shows it, is saved, and is
    /// sent in turn. Does nothing for an item that is neither conflicted nor failed, or not in the
    /// outbox.
    ///
    /// ```swift
    /// for item in outbox.items where item.state == .conflict {
    ///     let merged = merge(mine: item.change, theirs: item.remote)  // or ask the user
    ///     outbox.resolve(item.id, with: merged)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - id: The item's ``OutboxItem/id``.
    ///   - change: The change to send instead (typically built on ``OutboxItem/remote``).
    public func resolve(_ id: OutboxItem<Change>.ID, with change: Change) {
        guard storedItems.contains(where: { $0.id == id && ($0.state == .conflict || $0.state == .failed) }) else {
            return
        }
        let (_, idempotencyKey) = OutboxIdentifiers.pair()
        let encoded = encode(change)
        let updated = updateItem(id) { item, record in
            item.change = change
            item.idempotencyKey = idempotencyKey
            item.remote = nil
            item.state = .pending
            record.change = encoded ?? Data()
            record.isUnsaved = encoded == nil
            record.idempotencyKey = idempotencyKey
            record.remote = nil
            record.isConflict = false
            record.isFailed = false
        }
        guard updated != nil else { return }
        forEachDisplay { $0.replace(id, change) }
        if let actions = machine.retry(id, now: clock.elapsed) { perform(actions) }
    }

    /// Removes the item `id`, and its layer from the loadables it shows on. A send of it that is
    /// running is cancelled (the server may have it already), and the next item of its scope waits
    /// for that send to end. Does nothing for an item not in the outbox.
    ///
    /// - Parameter id: The item's ``OutboxItem/id``.
    public func discard(_ id: OutboxItem<Change>.ID) {
        guard storedItems.contains(where: { $0.id == id }) else { return }
        let scope = storedItems.first { $0.id == id }?.scope
        var (wasSending, actions) = machine.discard(id, now: clock.elapsed)
        if wasSending {
            if let sending = sends.removeValue(forKey: id) {
                setAside(sending)
                if let inspector = LoadableInspection.inspector { recordOutcome(id, .discarded, in: inspector) }
            } else {
                // Discarded by a handler told that its send begins: no send runs.
                actions += machine.discardedSendEnded(scope: scope, now: clock.elapsed)
            }
        }
        removeItem(id)
        forEachDisplay { $0.drop(id) }
        perform(actions)
    }

    /// Removes every item, those of earlier launches and those set aside included, and their
    /// layers; cancels the running sends. For logout: the next user must not send the last user's
    /// changes.
    public func removeAll() {
        var (running, actions) = machine.removeAll(now: clock.elapsed)
        for (id, scope) in running {
            if let sending = sends.removeValue(forKey: id) {
                setAside(sending)
                if let inspector = LoadableInspection.inspector { recordOutcome(id, .discarded, in: inspector) }
            } else {
                actions += machine.discardedSendEnded(scope: scope, now: clock.elapsed)
            }
        }
        let ids = storedItems.map(\.id)
        mutateItems { items, records in
            items.removeAll()
            records.removeAll()
        }
        unsavedAttempts.removeAll()
        sentChanges.removeAll()
        storedIsUnread = false
        for id in ids { forEachDisplay { $0.drop(id) } }
        if machine.isRestoring { dropsRestored = true }
        // Not a save of the empty queue: the entries go, those of earlier launches with them.
        var removal: UInt64?
        actions.removeAll { action in
            guard case .save(let sequence) = action else { return false }
            removal = sequence
            return true
        }
        if let removal { removeEntries(covering: removal) }
        perform(actions)
    }

    /// Returns once the queue as it is now is in the cache: every item enqueued before the call,
    /// and every removal and change of state (or the save failed, which ``onError`` is told of).
    /// Returns at once when it is already.
    public func saved() async {
        let sequence = machine.requestedSave
        guard machine.savedSequence < sequence else { return }
        await withCheckedContinuation { saveWaiters.append((sequence, $0)) }
    }

    /// Returns once the items of earlier launches have been read (or found missing, or failed to
    /// read) and put before the ones enqueued since; at once when they have.
    public func restored() async {
        await restore.restored()
    }

    /// Whether the items of earlier launches are still being read (``restored()`` waits for them):
    /// for a synced collection, which tells its own items apart from restored ones once it is not.
    package var isRestoring: Bool { machine.isRestoring }

    /// Holds the pending, failed or conflicted item `id` as a conflict with `remote` (the server's side):
    /// for a synced collection, which finds conflicts on pulls too. The item keeps its place and
    /// its layer, is saved, and is not sent until ``retry(_:)`` or ``resolve(_:with:)``. Does
    /// nothing for an item that is sending, or not in the outbox.
    package func holdAsConflict(_ id: OutboxItem<Change>.ID, remote: Change?) {
        guard let state = storedItems.first(where: { $0.id == id })?.state else { return }
        let actions: [OutboxStateMachine.Action]
        switch state {
        case .pending, .failed:
            guard let held = machine.holdAsConflict(id, now: clock.elapsed) else { return }
            actions = held
        case .conflict: actions = machine.changed(id, now: clock.elapsed)
        case .sending: return
        }
        markConflict(id, remote: remote)
        perform(actions)
    }

    /// Item `id` becomes a conflict with `remote`, in its record too. A retry deadline kept from an
    /// earlier failure no longer holds the scope, after a relaunch either.
    func markConflict(_ id: OutboxItem<Change>.ID, remote: Change?) {
        let encoded = remote.flatMap { encode($0) }
        updateItem(id) { item, record in
            item.state = .conflict
            item.remote = remote
            record.isConflict = true
            record.isFailed = false
            record.remote = encoded
            record.notBefore = nil
        }
    }

    /// Told after every change of ``items`` or ``isSending``, once the change is made: for a synced
    /// collection, which shows what its outbox holds. It must not change the outbox at once (it
    /// runs inside the outbox's own changes): schedule that work.
    package var itemsDidChange: (@MainActor () -> Void)? {
        get { storedItemsDidChange }
        set { storedItemsDidChange = newValue }
    }

    /// The change's JSON, or `nil` (reported) when it cannot be encoded.
    func encode(_ change: Change) -> Data? {
        do {
            return try encoder.encode(change)
        } catch {
            report(LoadableCacheError.encodingFailed(key: key, underlying: error))
            return nil
        }
    }

    /// Gives item `id` a new change (a synced collection's local edit of a held conflict: same
    /// key), on the loadables too, and saves it; a pending item is sent once that save finished.
    /// Returns whether the item is there.
    @discardableResult
    package func replaceChange(of id: String, with change: Change) -> Bool {
        guard setChange(of: id, to: change) else { return false }
        perform(machine.changed(id, now: clock.elapsed))
        return true
    }

    /// Gives item `id` a new change (merged or rebased: same key), on the loadables too; the
    /// caller asks for the save. Returns whether the item is there.
    @discardableResult
    func setChange(of id: String, to change: Change) -> Bool {
        let encoded = encode(change)
        let updated = updateItem(id) { item, record in
            item.change = change
            record.change = encoded ?? Data()
            record.isUnsaved = encoded == nil
        }
        guard updated != nil else { return false }
        forEachDisplay { $0.replace(id, change) }
        return true
    }

    // MARK: - Sending

    /// Carries out the machine's actions, and those decided meanwhile, in order.
    func perform(_ actions: [OutboxStateMachine.Action]) {
        pendingActions += actions
        guard !isPerforming else { return }
        isPerforming = true
        defer { isPerforming = false }
        while !pendingActions.isEmpty {
            let action = pendingActions.removeFirst()
            switch action {
            case .send(let id): beginSend(id)
            case .save(let sequence): save(covering: sequence)
            case .armTimer(let delay):
                timer.arm(after: delay, on: clock) { [weak self] generation in
                    self?.timerDidFire(generation)
                }
            case .cancelTimer: timer.cancel()
            }
        }
        if sharesQueue { updateSharing() }
    }

    func beginSend(_ id: String) {
        let wasSending = !sends.isEmpty || !discardedSends.isEmpty
        sendCount += 1
        let count = sendCount
        let updated = updateItem(id) { item, _ in
            item.state = .sending
            item.attempts += 1
        }
        guard let item = updated, machine.state(of: id) == .sending else {
            // Discarded by a handler told of the change: the machine has let it go.
            return
        }
        // Its record takes the count with the next save asked for: records change only with one,
        // so that what a save writes does not depend on when it runs.
        unsavedAttempts[item.id] = item.attempts
        if let inspector = LoadableInspection.inspector {
            inspector.record(.outboxSent(label: inspectorLabel, time: inspector.now, item: id))
        }
        let send = self.send
        let task = Task { [weak self] in
            let result: Result<OutboxOutcome<Change>, any Error>
            do {
                result = .success(try await send(item.change, item.idempotencyKey))
            } catch {
                result = .failure(error)
            }
            self?.sendDidFinish(id, count: count, result: result)
        }
        if wasSending {
            sends[id] = OutboxSending(scope: item.scope, count: count, task: task)
        } else {
            mutateIsSending { sends[id] = OutboxSending(scope: item.scope, count: count, task: task) }
        }
    }

    func sendDidFinish(_ id: String, count: Int, result: Result<OutboxOutcome<Change>, any Error>) {
        guard let sending = sends[id], sending.count == count else {
            // A discarded item's send: its scope may go on.
            guard let scope = discardedSends.removeValue(forKey: count) else { return }
            if sends.isEmpty, discardedSends.isEmpty {
                mutateIsSending {}
            }
            perform(machine.discardedSendEnded(scope: scope, now: clock.elapsed))
            return
        }
        endSend(id)
        let actions: [OutboxStateMachine.Action]
        switch result {
        case .success(.applied):
            if let inspector = LoadableInspection.inspector { recordOutcome(id, .delivered, in: inspector) }
            let change = storedItems.first { $0.id == id }?.change
            removeItem(id)
            actions = machine.sendEnded(id, result: .removed, now: clock.elapsed)
            if let change { join(id, as: change, replacing: false) }
        case .success(.appliedAs(let applied)):
            if let inspector = LoadableInspection.inspector { recordOutcome(id, .delivered, in: inspector) }
            let later = machine.laterItems(inScopeOf: id)
            removeItem(id)
            // The rebased items are sent once the save that carries their new changes finished.
            let rebased = rebase == nil ? [] : later.flatMap { machine.changed($0, now: clock.elapsed) }
            actions = rebased + machine.sendEnded(id, result: .removed, now: clock.elapsed)
            join(id, as: applied, replacing: true)
            if let rebase {
                for laterID in later {
                    guard var change = storedItems.first(where: { $0.id == laterID })?.change else { continue }
                    rebase(&change, applied)
                    setChange(of: laterID, to: change)
                }
            }
        case .success(.dropped):
            if let inspector = LoadableInspection.inspector { recordOutcome(id, .discarded, in: inspector) }
            removeItem(id)
            actions = machine.sendEnded(id, result: .removed, now: clock.elapsed)
            forEachDisplay { $0.drop(id) }
        case .success(.conflict(let remote)):
            if let inspector = LoadableInspection.inspector { recordOutcome(id, .conflict, in: inspector) }
            markConflict(id, remote: remote)
            actions = machine.sendEnded(id, result: .conflict, now: clock.elapsed)
        case .failure(let error):
            let retryable = shouldRetry(error)
            if let inspector = LoadableInspection.inspector {
                recordOutcome(id, retryable ? .retrying : .failed, in: inspector)
            }
            updateItem(id) { item, record in
                item.state = retryable ? .pending : .failed
                item.lastError = error
                record.isFailed = !retryable
                record.lastError = "\(error)"
                record.errorType = String(reflecting: type(of: error))
            }
            let hint = retryable ? (error as? any RetryAfterProviding)?.retryAfter : nil
            actions = machine.sendEnded(
                id, result: retryable ? .retry(hint: hint) : .failed, now: clock.elapsed)
            keepRetryDeadline(of: id)
        }
        perform(actions)
    }

    /// Writes the moment item `id`'s scope may send again into its record (wall-clock time), so
    /// that a relaunch keeps the backoff and the server's `Retry-After`.
    func keepRetryDeadline(of id: String) {
        let deadline = machine.holdDeadline(ofScopeOf: id)
        let notBefore = deadline.map { now().timeIntervalSinceReferenceDate + Self.seconds($0 - clock.elapsed) }
        stored.withLock { _ = $0.update(id) { $0.notBefore = notBefore } }
    }

    /// The send of `id` is over: Observation is told when it was the last one running.
    func endSend(_ id: String) {
        if sends.count == 1, discardedSends.isEmpty {
            mutateIsSending { sends[id] = nil }
        } else {
            sends[id] = nil
        }
    }

    /// A running send of a discarded item: its scope waits for it to end.
    func setAside(_ sending: OutboxSending) {
        sending.task.cancel()
        discardedSends[sending.count] = sending.scope
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    func timerDidFire(_ generation: Int) {
        guard timer.fired(generation) else { return }
        perform(machine.timerFired(now: clock.elapsed))
    }

}

extension LoadableOutbox: ActivityMonitorFollower {
    package func activityDidChange() {
        let paused = !activity.allowsSyncing
        if paused != storedIsPaused { mutateIsPaused { storedIsPaused = paused } }
        if paused { shared.timer.cancel() }
        perform(machine.activityChanged(paused: paused, offline: activity.isOffline, now: clock.elapsed))
    }
}

/// A send that runs.
struct OutboxSending {
    let scope: String?
    /// The send's number.
    let count: Int
    let task: Task<Void, Never>
}

/// The properties Observation tracks for every outbox, as key paths rooted at a non-generic type
/// and built once. Observation never uses the subject instance, only the registrar (each outbox
/// has its own) and the key path.
struct OutboxObservationKey: Observable {
    var items: Void { () }
    var isPaused: Void { () }
    var isSending: Void { () }

    /// `\.items`, built once; ``LoadableOutbox/pendingCount`` is read through it too.
    @MainActor static let items: KeyPath<OutboxObservationKey, Void> = \.items
    /// `\.isPaused`, built once.
    @MainActor static let isPaused: KeyPath<OutboxObservationKey, Void> = \.isPaused
    /// `\.isSending`, built once.
    @MainActor static let isSending: KeyPath<OutboxObservationKey, Void> = \.isSending
}
