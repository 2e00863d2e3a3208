public import Foundation
public import Loadable
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

    private let send: @MainActor (Change, _ idempotencyKey: String) async throws -> OutboxOutcome<Change>
    private let rebase: (@MainActor (_ later: inout Change, _ applied: Change) -> Void)?
    private let coalesce: (@MainActor (_ earlier: Change, _ later: Change) -> Change?)?
    /// The wall-clock time, for `enqueuedAt`, the retry deadlines kept and the saved entry's
    /// `savedAt`.
    private let now: @Sendable () -> Date
    private let encoder = JSONEncoder()
    private var storedItems: [OutboxItem<Change>] = []
    /// Each item as it is saved, in the order of ``storedItems`` (kept in step with it), the items
    /// set aside and the changes sent that no loadable showed: behind a lock, so that a save
    /// copies them when it runs, off the main actor. A save that held the array instead would make
    /// the main actor's next change of it copy the whole queue. The records change only together
    /// with a save asked for (or in ways a save merges the same whatever it reads, while
    /// restoring), so that after the saves asked for, the cache holds the same bytes however the
    /// saves ran.
    private let stored = Locked(OutboxRecords())
    /// The changes sent that no loadable showed yet, by the id of their record: shown on the
    /// loadables of later ``show(on:_:)`` calls until they sync.
    private var sentChanges: [(id: String, change: Change)] = []
    /// Send counts not in the records yet, by item id: written into them when the next save is
    /// asked for.
    private var unsavedAttempts: [String: Int] = [:]
    private var storedIsPaused: Bool
    /// The running sends, by item id.
    private var sends: [String: Sending] = [:]
    /// The sends of discarded items that still run, by send number, with their scopes.
    private var discardedSends: [Int: String?] = [:]
    /// Counts sends, so that a send cancelled meanwhile is told apart from the next one.
    private var sendCount = 0

    private var savedSequence: UInt64 = 0
    private var saveWaiters: [(sequence: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    private var restoreWaiters: [CheckedContinuation<Void, Never>] = []
    /// ``removeAll()`` was called while restoring: what the restore finds is dropped.
    private var dropsRestored = false
    /// The stored queue could not be read (for another reason than its bytes): saves add to it.
    private var storedIsUnread = false

    /// The decisions: what to send, when to retry (the syncer's rules, per scope).
    private var machine: OutboxStateMachine
    /// Actions decided while others are being carried out: a handler told of a change (which may
    /// enqueue or discard) runs inside them.
    private var pendingActions: [OutboxStateMachine.Action] = []
    private var isPerforming = false
    private let clock: ElapsedClock
    private var timer = ClockTimer()

    // Two processes: one sends, holding the cache's lock; each reads the other's changes.
    /// Whether another process may share the queue (the cache locks across processes).
    private let sharesQueue: Bool
    /// The sender's lock, while this outbox holds it.
    private var senderLock: LoadableCacheLock?
    /// A read of the queue (which may take the lock) is on its way.
    private var isReadingShared = false
    /// The last read found the lock held by another process: the next try waits for the timer.
    private var isLockRefused = false
    /// Reads the queue every ``sharedReadInterval`` while the app is active.
    private var sharedReadTimer = ClockTimer()
    /// How often an outbox whose queue another process may share reads it: what the other
    /// enqueued shows within this time, and a sender that went is taken over within it.
    static var sharedReadInterval: Duration { .seconds(5) }

    /// The loadables the items show on, by identity.
    private var displays: [ObjectIdentifier: OutboxDisplay<Change>] = [:]
    private var displaySweepThreshold = 16
    /// Made by the first tracked read, so that an outbox nobody observes pays nothing for it.
    private var observation: ObservationState?

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
        sharedReadTimer.cancelTask()
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
            if machine.lastPendingItem(in: scope) == id, replaceChange(of: id, with: merged) {
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
        guard savedSequence < sequence else { return }
        await withCheckedContinuation { saveWaiters.append((sequence, $0)) }
    }

    /// Returns once the items of earlier launches have been read (or found missing, or failed to
    /// read) and put before the ones enqueued since; at once when they have.
    public func restored() async {
        guard machine.isRestoring else { return }
        await withCheckedContinuation { restoreWaiters.append($0) }
    }

    /// The change's JSON, or `nil` (reported) when it cannot be encoded.
    private func encode(_ change: Change) -> Data? {
        do {
            return try encoder.encode(change)
        } catch {
            report(LoadableCacheError.encodingFailed(key: key, underlying: error))
            return nil
        }
    }

    /// Gives item `id` a new change (merged or rebased: same key), on the loadables too.
    @discardableResult
    private func replaceChange(of id: String, with change: Change) -> Bool {
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

    // MARK: - Showing

    /// Shows every item not sent yet (pending, sending, failed or conflicted) as an optimistic
    /// layer on `loadable`, now and for each item enqueued later, until it is sent (its change, or
    /// the server's version of it, then joins the base contents, as a committed `mutate` does:
    /// they count as written, and a persisted loadable saves them) or discarded or dropped (its
    /// layer goes).
    ///
    /// The layers sit above every refresh, in the order of the items, and wait for the loadable's
    /// first contents when it has none: a loadable restored from its cache after a relaunch shows
    /// the pending changes at once. Call it from a store's `make` for each new entry:
    ///
    /// ```swift
    /// let posts = LoadableStore<Int, HTTPLoadable<Post>>(cache: cache.scoped("posts/"), cacheKey: { "\($0)" }) { id in
    ///     let post = service.loadable(Post.self, "posts/\(id)")
    ///     outbox.show(on: post) { post, edit in
    ///         guard edit.postID == id else { return false }
    ///         post.title = edit.title
    ///         return true
    ///     }
    ///     return post
    /// }
    /// ```
    ///
    /// **An edit never goes backwards.** A change that reached the server while no loadable it
    /// concerns was shown (sent right after a relaunch, before the screen made its loadable) is
    /// kept, with the queue, for a day (the 64 newest): each loadable given later shows it above
    /// its contents, restored ones included, until that loadable's next successful sync brings the
    /// server's contents, which include it; the change is then forgotten. Likewise a change sent
    /// while its loadable waits for its restore stays above the restored contents until the next
    /// sync.
    ///
    /// The loadable is held weakly. Calling it again for the same loadable replaces the earlier
    /// `apply`.
    ///
    /// - Parameters:
    ///   - loadable: Where to show the changes.
    ///   - apply: Applies a change to the loadable's contents and returns `true`, or returns `false`
    ///     (changing nothing) for a change that does not concern them: such a change notifies
    ///     nothing, and when it is sent, the loadable is not written.
    public func show<Contents>(
        on loadable: PushLoadable<Contents>,
        _ apply: @escaping @MainActor (inout Contents, Change) -> Bool
    ) {
        let identity = ObjectIdentifier(loadable)
        if let earlier = displays[identity], earlier.shows(on: loadable) {
            for item in storedItems { earlier.drop(item.id) }
        }
        if displays.count >= displaySweepThreshold {
            displays = displays.filter { !$0.value.isGone }
            displaySweepThreshold = Swift.max(16, displays.count * 2)
        }
        let display = OutboxLoadableDisplay(loadable: loadable, apply: apply)
        displays[identity] = display
        forgetExpiredSentChanges()
        for (id, change) in sentChanges {
            display.addSent(change) { [weak self] in self?.sentChangeDidSettle(id) }
        }
        for item in storedItems { addLayer(item.id, item.change, on: display) }
    }

    /// Shows item `id` on `display`, unless it went meanwhile: a loadable's observer, told of a
    /// layer, may discard the item (before or while this layer is added).
    private func addLayer(_ id: String, _ change: Change, on display: OutboxDisplay<Change>) {
        guard machine.state(of: id) != nil else { return }
        display.add(id, change)
        if machine.state(of: id) == nil { display.drop(id) }
    }

    private func forEachDisplay(_ body: (OutboxDisplay<Change>) -> Void) {
        for display in displays.values { body(display) }
    }

    /// Item `id` reached the server as `change`: it joins the loadables' base contents; if no
    /// loadable showed it, it is kept to be shown on later ones.
    private func join(_ id: String, as change: Change, replacing: Bool) {
        var shown = false
        forEachDisplay { display in
            if replacing { display.replace(id, change) }
            if display.join(id) { shown = true }
        }
        guard !shown else { return }
        let (recordID, _) = OutboxIdentifiers.pair()
        guard let data = encode(change) else { return }
        var record = OutboxRecord(
            id: recordID, idempotencyKey: "", enqueuedAt: 0, attempts: 0, isFailed: false, isSetAside: false,
            lastError: "", change: data)
        record.isSent = true
        record.sentAt = now().timeIntervalSinceReferenceDate
        sentChanges.append((recordID, change))
        stored.withLock { $0.addSent(record) }
        if sentChanges.count > Self.maxSentChanges {
            let dropped = sentChanges.removeFirst().id
            stored.withLock { $0.removeSent { $0.id == dropped } }
        }
    }

    /// A sent change left a loadable because its sync brought the server's contents: forgotten.
    private func sentChangeDidSettle(_ id: String) {
        guard sentChanges.contains(where: { $0.id == id }) else { return }
        sentChanges.removeAll { $0.id == id }
        stored.withLock { $0.removeSent { $0.id == id } }
        perform([machine.requestSave()])
    }

    /// Forgets the sent changes older than ``sentChangeLifetime``.
    private func forgetExpiredSentChanges() {
        guard !sentChanges.isEmpty else { return }
        let oldest = now().timeIntervalSinceReferenceDate - Self.sentChangeLifetime
        let expired = stored.withLock { stored in
            let expired = Set(stored.sent.filter { $0.sentAt < oldest }.map(\.id))
            stored.removeSent { expired.contains($0.id) }
            return expired
        }
        guard !expired.isEmpty else { return }
        sentChanges.removeAll { expired.contains($0.id) }
        perform([machine.requestSave()])
    }

    // MARK: - Sending

    /// Carries out the machine's actions, and those decided meanwhile, in order.
    private func perform(_ actions: [OutboxStateMachine.Action]) {
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

    // MARK: - Two processes

    /// Takes the sender's lock when there is something to send and the app is active, lets it go
    /// when there is not (once no send runs), and keeps reading the queue while active.
    private func updateSharing() {
        guard !machine.isRestoring else { return }
        let wantsLock = !storedIsPaused && !machine.isIdle
        if wantsLock, senderLock == nil, !isReadingShared, !isLockRefused {
            readShared()
        } else if !wantsLock, let lock = senderLock, sends.isEmpty, discardedSends.isEmpty {
            senderLock = nil
            stored.withLock { $0.writesSnapshots = false }
            perform(machine.senderChanged(false, now: clock.elapsed))
            // After the saves asked for so far: the next sender reads them.
            CacheQueue.enqueue(in: cache, key: key) {
                lock.release()
                return nil
            }
        }
        if !storedIsPaused, !sharedReadTimer.isArmed {
            sharedReadTimer.arm(after: Self.sharedReadInterval, on: clock) { [weak self] generation in
                guard let self, self.sharedReadTimer.fired(generation) else { return }
                self.isLockRefused = false
                self.readShared()
            }
        }
    }

    /// Reads the queue as the cache holds it (taking the sender's lock first, if this outbox has
    /// something to send and no other process holds it), and takes in what other processes did.
    private func readShared() {
        guard !isReadingShared else { return }
        isReadingShared = true
        let tryLock = senderLock == nil && !storedIsPaused && !machine.isIdle
        let stored = stored
        let cache = cache
        let key = key
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            var lock: LoadableCacheLock?
            if tryLock { lock = try? await cache.tryLock(key: key + "#sender") }
            let before = stored.withLock { $0.savedOperationNumber }
            let outcome = await OutboxStorage.restore(Change.self, from: cache, key: key)
            return { [weak self] in
                self?.sharedReadDidFinish(outcome, changedAfter: before, lock: lock, triedLock: tryLock)
            }
        }
    }

    private func sharedReadDidFinish(
        _ outcome: OutboxRestoreOutcome<Change>, changedAfter number: UInt64, lock: LoadableCacheLock?,
        triedLock: Bool
    ) {
        isReadingShared = false
        isLockRefused = triedLock && lock == nil
        var actions: [OutboxStateMachine.Action] = []
        if let error = outcome.error {
            report(error)
        } else {
            actions = takeIn(outcome, keeping: stored.withLock { $0.changed(after: number) })
            // After the records: a snapshot must never cover entries whose records it lacks.
            stored.withLock { $0.didRead(outcome.journal) }
        }
        if let lock {
            senderLock = lock
            stored.withLock { $0.writesSnapshots = true }
            actions += machine.senderChanged(true, now: clock.elapsed)
        }
        perform(actions)
    }

    /// Takes in the queue another process left: its items, in the cache's order, except those
    /// changed here since the read began (`keeping`) and those sending here.
    private func takeIn(_ outcome: OutboxRestoreOutcome<Change>, keeping: Set<String>) -> [OutboxStateMachine.Action] {
        let sendingHere = Set(sends.keys)
        let kept = keeping.union(sendingHere)
        let mine = Dictionary(storedItems.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var newItems: [OutboxItem<Change>] = []
        var newRecords: [OutboxRecord] = []
        var listed = Set<String>()
        let myRecords = stored.withLock { stored in
            Dictionary(stored.records.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        }
        for (item, record) in outcome.items {
            listed.insert(item.id)
            if kept.contains(item.id) {
                // Changed here since: this outbox's version (none when it removed the item).
                guard let own = mine[item.id], let ownRecord = myRecords[item.id] else { continue }
                newItems.append(own)
                newRecords.append(ownRecord)
            } else {
                var item = item
                if let own = mine[item.id], own.lastError != nil, item.lastError is OutboxRestoredError,
                    own.state == item.state
                {
                    item.lastError = own.lastError  // the error itself, not its description
                }
                newItems.append(item)
                newRecords.append(record)
            }
        }
        for item in storedItems where !listed.contains(item.id) && kept.contains(item.id) {
            guard let record = myRecords[item.id] else { continue }
            newItems.append(item)
            newRecords.append(record)
        }
        let newIDs = Set(newItems.map(\.id))
        let gone = storedItems.filter { !newIDs.contains($0.id) }
        let added = newItems.filter { mine[$0.id] == nil }
        // Changed by the other process (resolved, or rebased there): shown so here.
        let changed = zip(newItems, newRecords).filter { item, record in
            guard mine[item.id] != nil else { return false }
            return myRecords[item.id]?.change != record.change
        }.map(\.0)
        stored.withLock { stored in
            let knownSetAside = Set(stored.setAside.map(\.id))
            stored.setAside += outcome.setAside.filter { !knownSetAside.contains($0.id) }
        }
        let knownSent = Set(sentChanges.map(\.id))
        for (change, record) in outcome.sent where !knownSent.contains(record.id) {
            sentChanges.append((record.id, change))
            stored.withLock { $0.sent.append(record) }
        }
        mutateItems { items, records in
            items = newItems
            records.records = newRecords
        }
        let queue = newItems.map { item -> (id: String, scope: String?, state: OutboxStateMachine.SlotState) in
            let state: OutboxStateMachine.SlotState =
                switch item.state {
                case .pending: .pending
                case .sending: .sending
                case .failed: .failed
                case .conflict: .conflict
                }
            return (item.id, item.scope, state)
        }
        let actions = machine.replaceQueue(queue, keeping: kept, now: clock.elapsed)
        // Sent or discarded by the other process: sent, most likely, so the change joins.
        for item in gone { forEachDisplay { _ = $0.join(item.id) } }
        for item in changed { forEachDisplay { $0.replace(item.id, item.change) } }
        for item in added { forEachDisplay { addLayer(item.id, item.change, on: $0) } }
        return actions
    }

    private func beginSend(_ id: String) {
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
            sends[id] = Sending(scope: item.scope, count: count, task: task)
        } else {
            mutateIsSending { sends[id] = Sending(scope: item.scope, count: count, task: task) }
        }
    }

    private func sendDidFinish(_ id: String, count: Int, result: Result<OutboxOutcome<Change>, any Error>) {
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
            let change = storedItems.first { $0.id == id }?.change
            removeItem(id)
            actions = machine.sendEnded(id, result: .removed, now: clock.elapsed)
            if let change { join(id, as: change, replacing: false) }
        case .success(.appliedAs(let applied)):
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
                    replaceChange(of: laterID, with: change)
                }
            }
        case .success(.dropped):
            removeItem(id)
            actions = machine.sendEnded(id, result: .removed, now: clock.elapsed)
            forEachDisplay { $0.drop(id) }
        case .success(.conflict(let remote)):
            let encoded = remote.flatMap { encode($0) }
            updateItem(id) { item, record in
                item.state = .conflict
                item.remote = remote
                record.isConflict = true
                record.remote = encoded
                // The server answered: a retry deadline kept from an earlier failure no longer holds
                // the scope, after a relaunch either.
                record.notBefore = nil
            }
            actions = machine.sendEnded(id, result: .conflict, now: clock.elapsed)
        case .failure(let error):
            let retryable = shouldRetry(error)
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
    private func keepRetryDeadline(of id: String) {
        let deadline = machine.holdDeadline(ofScopeOf: id)
        let notBefore = deadline.map { now().timeIntervalSinceReferenceDate + Self.seconds($0 - clock.elapsed) }
        stored.withLock { _ = $0.update(id) { $0.notBefore = notBefore } }
    }

    /// The send of `id` is over: Observation is told when it was the last one running.
    private func endSend(_ id: String) {
        if sends.count == 1, discardedSends.isEmpty {
            mutateIsSending { sends[id] = nil }
        } else {
            sends[id] = nil
        }
    }

    /// A running send of a discarded item: its scope waits for it to end.
    private func setAside(_ sending: Sending) {
        sending.task.cancel()
        discardedSends[sending.count] = sending.scope
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private func timerDidFire(_ generation: Int) {
        guard timer.fired(generation) else { return }
        perform(machine.timerFired(now: clock.elapsed))
    }

    // MARK: - Saving and restoring

    /// Queues a save of the changes made so far (replacing a save that waits for its turn): one
    /// entry of the outbox's journal, and now and then a snapshot of the whole queue instead.
    private func save(covering covered: UInt64) {
        let stored = stored
        if !unsavedAttempts.isEmpty {
            stored.withLock { stored in
                for (id, attempts) in unsavedAttempts { stored.update(id) { $0.attempts = attempts } }
            }
            unsavedAttempts.removeAll(keepingCapacity: true)
        }
        let cache = cache
        let key = key
        // After a read of the stored queue failed, each save tries to read it again, and hands
        // over its items once it can.
        let readsStored = storedIsUnread
        let savedAt = now()
        CacheQueue.enqueueSave(in: cache, key: key) { [weak self] in
            var errors: [LoadableCacheError] = []
            var adopted: OutboxRestoreOutcome<Change>?
            if readsStored {
                // Until the stored queue is read, this outbox does not know where its journal
                // ends: nothing is written.
                let outcome = await OutboxStorage.restore(Change.self, from: cache, key: key)
                if let error = outcome.error {
                    return { [weak self] in self?.saveDidFinish(covering: covered, errors: [error]) }
                }
                stored.withLock { $0.didRead(outcome.journal) }
                adopted = outcome
            }
            // The changes as they are when the save runs (this save's, and any made since).
            if let save = stored.withLock({ $0.takeOperations() }) {
                let error: LoadableCacheError?
                if let slot = save.slot {
                    error = await OutboxStorage.append(
                        save.operations, slot: slot, number: save.number, savedAt: savedAt, in: cache, key: key)
                } else {
                    error = .saveFailed(key: key, underlying: OutboxWithoutWriterSlot())
                }
                stored.withLock { $0.didAppend(save, error: error) }
                if let error { errors.append(error) }
            }
            if let snapshot = stored.withLock({ $0.snapshotIfDue() }) {
                let error = await OutboxStorage.writeSnapshot(
                    snapshot.records, journal: snapshot.journal, savedAt: savedAt, in: cache, key: key)
                stored.withLock { $0.didWriteSnapshot(covering: snapshot.journal, error: error) }
                if let error { errors.append(error) }
            }
            return { [weak self] in self?.saveDidFinish(covering: covered, errors: errors, adopted: adopted) }
        }
    }

    private func saveDidFinish(
        covering sequence: UInt64, errors: [LoadableCacheError], adopted: OutboxRestoreOutcome<Change>? = nil
    ) {
        if let adopted, storedIsUnread {
            storedIsUnread = false
            perform(putFirst(adopted))
            stored.withLock { $0.hasStoredItems = true }
            for error in adopted.newlySetAside { report(error) }
        }
        for error in errors { report(error) }
        guard sequence > savedSequence else { return }
        savedSequence = sequence
        if !saveWaiters.isEmpty {
            let done = saveWaiters.filter { $0.sequence <= sequence }
            saveWaiters.removeAll { $0.sequence <= sequence }
            for waiter in done { waiter.continuation.resume() }
        }
        perform(machine.saveFinished(sequence, now: clock.elapsed))
    }

    /// Removes every entry of the queue (logout); a writer of another process that is still alive
    /// finds a snapshot that covers what it wrote so far.
    private func removeEntries(covering covered: UInt64) {
        let stored = stored
        let cache = cache
        let key = key
        let savedAt = now()
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            let (journal, slot) = stored.withLock { ($0.journal, $0.slot) }
            let othersWrote = (0..<OutboxJournal.slots).contains { $0 != slot && journal.read[$0] > 0 }
            var error = await OutboxStorage.removeAll(journal: journal, in: cache, key: key)
            var kept = OutboxJournal()
            if othersWrote {
                // Their next entries must still be found after this snapshot; this outbox starts
                // its journal over.
                kept.read = journal.read
                if let slot { kept.read[slot] = 0 }
                kept.folded = kept.read
                error =
                    await OutboxStorage.writeSnapshot([], journal: kept, savedAt: savedAt, in: cache, key: key)
                    ?? error
            }
            stored.withLock {
                $0.journal = kept
                $0.entriesSinceSnapshot = 0
            }
            let errors = error.map { [$0] } ?? []
            return { [weak self] in self?.saveDidFinish(covering: covered, errors: errors) }
        }
    }

    private func restoreDidFinish(_ outcome: OutboxRestoreOutcome<Change>) {
        machine.finishRestoring()
        var actions: [OutboxStateMachine.Action] = []
        if !dropsRestored {
            actions = putFirst(outcome)
            // Not read for another reason than its bytes: the stored queue may be good. Saves add
            // to it (the journal keeps it) until a read succeeds.
            if case .loadFailed? = outcome.error { storedIsUnread = true }
        } else {
            actions = machine.adopt([], now: clock.elapsed)
        }
        // An entry that is not an outbox's is replaced by the next save's snapshot.
        let isDamaged = outcome.error != nil && !storedIsUnread
        stored.withLock { stored in
            stored.hasStoredItems = !storedIsUnread
            if isDamaged { stored.snapshotFailed = true }
        }
        if let error = outcome.error { report(error) }
        if !dropsRestored {
            for error in outcome.newlySetAside { report(error) }
        }
        dropsRestored = false
        // Changes this restore made to records (items set aside or back) are saved, by the save
        // already asked for if one waits.
        if machine.requestedSave == savedSequence, stored.withLock({ !$0.operations.isEmpty }) {
            actions.insert(machine.requestSave(), at: 0)
        }
        let waiters = restoreWaiters
        restoreWaiters = []
        for waiter in waiters { waiter.resume() }
        perform(actions)
    }

    /// Puts the items of earlier launches (older than those enqueued since) before the others,
    /// on the loadables too, and keeps those set aside and the sent changes; returns what the
    /// machine decided.
    private func putFirst(_ outcome: OutboxRestoreOutcome<Change>) -> [OutboxStateMachine.Action] {
        let wallNow = now().timeIntervalSinceReferenceDate
        let elapsed = clock.elapsed
        let knownSent = Set(sentChanges.map(\.id))
        let sent = outcome.sent.filter { !knownSent.contains($0.record.id) }
        let found = outcome.items.filter { machine.state(of: $0.item.id) == nil }
        // Records this read changed (set aside now, or back from being set aside) are saved so.
        let changesRecords = !outcome.newlySetAside.isEmpty || outcome.hasRestoredSetAside
        stored.withLock { stored in
            let knownSetAside = Set(stored.setAside.map(\.id))
            let setAside = outcome.setAside.filter { !knownSetAside.contains($0.id) }
            stored.setAside.append(contentsOf: setAside)
            stored.sent.insert(contentsOf: sent.map(\.record), at: 0)
            if changesRecords {
                for record in setAside { stored.record(.put(record)) }
                for (_, record) in found { stored.record(.put(record)) }
            }
        }
        sentChanges.insert(contentsOf: sent.map { ($0.record.id, $0.change) }, at: 0)
        let restored = found.map { item, record in
            let state: OutboxStateMachine.SlotState =
                switch item.state {
                case .pending, .sending: .pending
                case .failed: .failed
                case .conflict: .conflict
                }
            let notBefore = record.notBefore.map { elapsed + .seconds($0 - wallNow) }
            return (id: item.id, scope: item.scope, state: state, notBefore: notBefore)
        }
        guard !found.isEmpty else { return machine.adopt([], now: elapsed) }
        let newer = storedItems
        for item in newer { forEachDisplay { $0.drop(item.id) } }
        mutateItems { items, records in
            items.insert(contentsOf: found.map { $0.item }, at: 0)
            records.records.insert(contentsOf: found.map { $0.record }, at: 0)
        }
        // Known to the machine first (layers are shown for known items), sent only once the
        // layers are back.
        let actions = machine.adopt(restored, now: elapsed)
        for item in storedItems { forEachDisplay { addLayer(item.id, item.change, on: $0) } }
        return actions
    }

    private func report(_ error: any Error) {
        onError?(error)
    }

    // MARK: - Observation

    // The key paths are rooted at a non-generic type (``OutboxObservationKey``) and built once:
    // a key path literal rooted at this generic class would be built again at every read and
    // change.

    private func access<Value>(_ keyPath: KeyPath<OutboxObservationKey, Value>) {
        ObservationState.made(in: &observation).registrar.access(OutboxObservationKey(), keyPath: keyPath)
    }

    private func mutateIsPaused(_ body: () -> Void) {
        mutate(OutboxObservationKey.isPaused, body)
    }

    private func mutateIsSending(_ body: () -> Void) {
        mutate(OutboxObservationKey.isSending, body)
    }

    /// Changes the items and their records together.
    private func mutateItems(_ body: (inout [OutboxItem<Change>], inout OutboxRecords) -> Void) {
        mutate(OutboxObservationKey.items) {
            stored.withLock { body(&storedItems, &$0) }
        }
    }

    private func mutate<Value>(_ keyPath: KeyPath<OutboxObservationKey, Value>, _ body: () -> Void) {
        guard let registrar = observation?.registrar else { return body() }
        registrar.willSet(OutboxObservationKey(), keyPath: keyPath)
        body()
        registrar.didSet(OutboxObservationKey(), keyPath: keyPath)
    }

    /// Changes the item `id` and its record, and returns the item as changed; `nil` when it is
    /// not in the outbox (it is looked up inside the mutation: Observation's handlers, told before
    /// it, may change the items).
    @discardableResult
    private func updateItem(
        _ id: String, _ body: (inout OutboxItem<Change>, inout OutboxRecord) -> Void
    ) -> OutboxItem<Change>? {
        var updated: OutboxItem<Change>?
        mutateItems { items, records in
            guard let index = items.firstIndex(where: { $0.id == id }) else { return }
            var item = items[index]
            records.update(id) { body(&item, &$0) }
            items[index] = item
            updated = item
        }
        return updated
    }

    /// Removes the item `id`; returns whether it was there (looked up inside the mutation).
    @discardableResult
    private func removeItem(_ id: String) -> Bool {
        var removed = false
        mutateItems { items, records in
            guard let index = items.firstIndex(where: { $0.id == id }) else { return }
            items.remove(at: index)
            records.remove(at: index)
            removed = true
        }
        return removed
    }
}

extension LoadableOutbox: ActivityMonitorFollower {
    package func activityDidChange() {
        let paused = !activity.allowsSyncing
        if paused != storedIsPaused { mutateIsPaused { storedIsPaused = paused } }
        if paused { sharedReadTimer.cancel() }
        perform(machine.activityChanged(paused: paused, offline: activity.isOffline, now: clock.elapsed))
    }
}

/// A send that runs.
private struct Sending {
    let scope: String?
    /// The send's number.
    let count: Int
    let task: Task<Void, Never>
}

/// The properties Observation tracks for every outbox, as key paths rooted at a non-generic type
/// and built once. Observation never uses the subject instance, only the registrar (each outbox
/// has its own) and the key path.
private struct OutboxObservationKey: Observable {
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
