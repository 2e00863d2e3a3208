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
/// **Saved first.** ``enqueue(_:)`` saves the item to the cache (off the main actor) before its
/// first send; ``saved()`` waits for that. Every change of the queue is saved the same way (the
/// whole queue in one entry under ``key``, replaced at each save), so a crash at any moment leaves
/// the queue as it was before or after a save. An outbox made on the same cache and key after a
/// relaunch restores every item whose enqueue was saved, in order (an item that was sending is
/// pending again), and sends it again with the same ``OutboxItem/idempotencyKey``: a server that
/// honours the `Idempotency-Key` header applies each change once, even when the app died between
/// the server's answer and the save of the removal.
///
/// **Sending.** One item at a time, oldest first, through `send`, while the ``activity`` monitor
/// says the app is active and not offline (``isPaused`` otherwise; a send running when it pauses
/// goes on).
/// - Success: the item goes (and its removal is saved); the next one follows at once.
/// - A retryable failure (`RetryAfterProviding.isRetryable`, or a `URLError`): the item stays
///   first and is sent again after the retry policy's delay, or after the error's
///   `RetryAfterProviding.retryAfter` when that is longer (up to one hour). Nothing is retried
///   while paused; coming back active and online starts the backoff over and retries at once,
///   but never before the server's `Retry-After`. Once a policy with `maxRetries` has none
///   left, the item waits for the next return to active and online, or the next ``enqueue(_:)``
///   or ``retry(_:)``.
/// - Any other failure: the item is ``OutboxItem/State/failed`` and stays, for the app to show,
///   ``retry(_:)`` or ``discard(_:)``; the items after it go on.
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
/// own cache, or a scope of its own (`cache.scoped("outbox/")`). Two live outboxes on one entry,
/// or an outbox on an entry of a cache a live store owns, stop the program with a message.
@MainActor
public final class LoadableOutbox<Change: Codable & Sendable>: Observable {
    /// The items not sent yet, oldest first: pending, sending and failed.
    public var items: [OutboxItem<Change>] {
        access(OutboxObservationKey.items)
        return storedItems
    }

    /// How many items are still to be sent: those pending or sending (failed items wait for the
    /// app). Observed through ``items``.
    public var pendingCount: Int {
        access(OutboxObservationKey.items)
        return storedItems.count { $0.state != .failed }
    }

    /// Whether sending is paused: the ``activity`` monitor says the app is inactive or offline.
    public var isPaused: Bool {
        access(OutboxObservationKey.isPaused)
        return storedIsPaused
    }

    /// Whether a send is running.
    public var isSending: Bool {
        access(OutboxObservationKey.isSending)
        return sending != nil
    }

    /// The cache the items are kept in.
    public let cache: any LoadableCache
    /// The items' key in ``cache``.
    public let key: String
    /// The monitor whose activity and connectivity pause and resume sending.
    public let activity: ActivityMonitor
    /// Told of each failure to restore or save the items, of each change that cannot be encoded,
    /// and of each stored item set aside because its change no longer decodes (once per item),
    /// with a ``LoadableCacheError`` that names ``key``. Set it right after making the outbox:
    /// the restore reports when it finishes.
    public var onError: (@MainActor (any Error) -> Void)?

    private let send: @MainActor (Change, _ idempotencyKey: String) async throws -> Void
    /// The wall-clock time, for `enqueuedAt` and the saved entry's `savedAt`.
    private let now: @Sendable () -> Date
    private let encoder = JSONEncoder()
    private var storedItems: [OutboxItem<Change>] = []
    /// Each item as it is saved, in the order of ``storedItems`` (kept in step with it), and the
    /// items set aside: behind a lock, so that a save copies them when it runs, off the main
    /// actor. A save that held the array instead would make the main actor's next change of it
    /// copy the whole queue: an enqueue would cost O(n). The records change only together with a
    /// save asked for (or in ways a save merges the same whatever it reads, while restoring), so
    /// that after the saves asked for, the cache holds the same bytes however the saves ran.
    private let stored = Locked(StoredRecords())
    /// Send counts not in the records yet, by item id: written into them when the next save is
    /// asked for.
    private var unsavedAttempts: [String: Int] = [:]
    /// The number of the save that first carries each item, by id (0 for items of earlier
    /// launches): an item is sent once a save of that number or a later one has finished.
    private var sequences: [String: UInt64] = [:]
    private var storedIsPaused: Bool
    /// The running send.
    private var sending: Sending?
    /// Counts sends, so that a send cancelled meanwhile is told apart from the next one.
    private var sendCount = 0
    /// The item whose retryable failure the retry machinery waits to retry.
    private var retryingID: String?
    /// Set while a send begins.
    private var isBeginningSend = false

    // Saving: every save asked for gets the next number; an item gets the number of the save
    // that first carries it, and is sent once a save of that number or a later one has finished.
    private var requestedSave: UInt64 = 0
    private var savedSequence: UInt64 = 0
    private var saveWaiters: [(sequence: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    private var isRestoring = true
    private var restoreWaiters: [CheckedContinuation<Void, Never>] = []
    /// An item was discarded while restoring: the queue is saved whole when the restore finishes.
    private var savesAfterRestore = false
    /// ``removeAll()`` was called while restoring: what the restore finds is dropped.
    private var dropsRestored = false
    /// The stored queue could not be read (for another reason than its bytes): saves add to it.
    private var storedIsUnread = false

    // Retrying: the syncer's rules (backoff, `Retry-After`, pausing and catching up).
    private var machine: SyncerStateMachine
    private let clock: ElapsedClock
    private var timer = ClockTimer()

    /// The loadables the items show on, by identity.
    private var displays: [ObjectIdentifier: OutboxDisplay<Change>] = [:]
    private var displaySweepThreshold = 16
    /// Made by the first tracked read, so that an outbox nobody observes pays nothing for it.
    private var observation: ObservationState?

    /// Creates an outbox and starts reading the items kept under `key` in `cache` (off the main
    /// actor); items enqueued before the read finishes go after the ones it finds.
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
    public init(
        cache: any LoadableCache,
        key: String = "outbox",
        activity: ActivityMonitor = .system,
        retryPolicy: any TimeoutPolicy = BackoffTimeoutPolicy(),
        clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date.now },
        send: @escaping @MainActor (Change, _ idempotencyKey: String) async throws -> Void
    ) {
        self.cache = cache
        self.key = key
        self.activity = activity
        self.send = send
        self.now = now
        self.clock = ElapsedClock(clock)
        storedIsPaused = !activity.allowsSyncing
        machine = SyncerStateMachine(
            policy: retryPolicy, syncPolicy: .sync, isPaused: !activity.allowsSyncing,
            isOffline: activity.isOffline)
        CacheClaims.claim(cache, key: key, for: self)
        activity.addFollower(self)
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            let outcome = await OutboxStorage.restore(Change.self, from: cache, key: key)
            return { [weak self] in self?.restoreDidFinish(outcome) }
        }
    }

    deinit {
        timer.cancelTask()
        sending?.task.cancel()
    }

    // MARK: - Changes

    /// Adds `change` at the end of the queue, shows it on the loadables of ``show(on:_:)``, saves
    /// it, and sends it once it is saved and its turn comes.
    ///
    /// - Parameter change: The change.
    /// - Returns: The new item's ``OutboxItem/id``.
    @discardableResult
    public func enqueue(_ change: Change) -> OutboxItem<Change>.ID {
        let (id, idempotencyKey) = OutboxIdentifiers.pair()
        let item = OutboxItem(
            id: id, change: change, idempotencyKey: idempotencyKey, enqueuedAt: now(), attempts: 0, lastError: nil,
            state: .pending)
        var encoded: Data?
        do {
            encoded = try encoder.encode(change)
        } catch {
            report(LoadableCacheError.encodingFailed(key: key, underlying: error))
        }
        let record = OutboxRecord(
            id: id, idempotencyKey: idempotencyKey, enqueuedAt: item.enqueuedAt.timeIntervalSinceReferenceDate,
            attempts: 0, isFailed: false, isSetAside: false, lastError: "", change: encoded ?? Data(),
            isUnsaved: encoded == nil)
        sequences[id] = requestedSave + 1
        mutateItems { items, records in
            items.append(item)
            records.append(record)
        }
        forEachDisplay { addLayer(item.id, change, on: $0) }
        save()
        startSending(explicitly: true)
        return item.id
    }

    /// Sends the failed item `id` again, in its place in the queue (items before it that are not
    /// sent yet go first). Does nothing for an item that is not failed, or not in the outbox.
    ///
    /// - Parameter id: The item's ``OutboxItem/id``.
    public func retry(_ id: OutboxItem<Change>.ID) {
        guard storedItems.contains(where: { $0.id == id && $0.state == .failed }) else { return }
        updateItem(id) { item, record in
            item.state = .pending
            record.isFailed = false
        }
        save()
        startSending(explicitly: true)
    }

    /// Removes the item `id`, and its layer from the loadables it shows on. A send of it that is
    /// running is cancelled (the server may have it already). Does nothing for an item not in the
    /// outbox.
    ///
    /// - Parameter id: The item's ``OutboxItem/id``.
    public func discard(_ id: OutboxItem<Change>.ID) {
        guard storedItems.contains(where: { $0.id == id }) else { return }
        if sending?.id == id { cancelSending() }
        if retryingID == id { stopRetrying() }
        removeItem(id)
        sequences[id] = nil
        // A save that adds to the stored items cannot remove one: a whole save follows the restore.
        if isRestoring { savesAfterRestore = true }
        forEachDisplay { $0.drop(id) }
        save()
        continueSending()
    }

    /// Removes every item, those of earlier launches and those set aside included, and their
    /// layers; cancels a running send. For logout: the next user must not send the last user's
    /// changes.
    public func removeAll() {
        cancelSending()
        stopRetrying()
        let ids = storedItems.map(\.id)
        mutateItems { items, records in
            items.removeAll()
            records.removeAll()
        }
        sequences.removeAll()
        unsavedAttempts.removeAll()
        stored.withLock { $0.setAside.removeAll() }
        storedIsUnread = false
        for id in ids { forEachDisplay { $0.drop(id) } }
        if isRestoring {
            dropsRestored = true
            savesAfterRestore = false
        }
        requestedSave += 1
        let covered = requestedSave
        let cache = cache
        let key = key
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            var failure: LoadableCacheError?
            do {
                try await cache.remove(key: key)
            } catch {
                failure = error as? LoadableCacheError ?? .removeFailed(key: key, underlying: error)
            }
            return { [weak self] in self?.saveDidFinish(covering: covered, error: failure) }
        }
        continueSending()
    }

    /// Returns once the queue as it is now is in the cache: every item enqueued before the call,
    /// and every removal and change of state (or the save failed, which ``onError`` is told of).
    /// Returns at once when it is already.
    public func saved() async {
        let sequence = requestedSave + (savesAfterRestore ? 1 : 0)
        guard savedSequence < sequence else { return }
        await withCheckedContinuation { saveWaiters.append((sequence, $0)) }
    }

    /// Returns once the items of earlier launches have been read (or found missing, or failed to
    /// read) and put before the ones enqueued since; at once when they have.
    public func restored() async {
        guard isRestoring else { return }
        await withCheckedContinuation { restoreWaiters.append($0) }
    }

    // MARK: - Showing

    /// Shows every item not sent yet (pending, sending or failed) as an optimistic layer on
    /// `loadable`, now and for each item enqueued later, until it is sent (its change then joins
    /// the base contents, as a committed `mutate` does: they count as written, and a persisted
    /// loadable saves them) or discarded (its layer goes).
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
        for item in storedItems { addLayer(item.id, item.change, on: display) }
    }

    /// Shows item `id` on `display`, unless it went meanwhile: a loadable's observer, told of a
    /// layer, may discard the item (before or while this layer is added).
    private func addLayer(_ id: String, _ change: Change, on display: OutboxDisplay<Change>) {
        guard sequences[id] != nil else { return }
        display.add(id, change)
        if sequences[id] == nil { display.drop(id) }
    }

    private func forEachDisplay(_ body: (OutboxDisplay<Change>) -> Void) {
        for display in displays.values { body(display) }
    }

    // MARK: - Sending

    /// Starts sending the first pending item if it is saved and nothing holds it back (a send
    /// running, a pause, the restore, a retry that waits for its time). `explicitly`: asked for by
    /// the app (an enqueue, a retry), which may try again once the retries are used up.
    private func startSending(explicitly: Bool) {
        guard !isRestoring, !storedIsPaused, sending == nil, !isBeginningSend, machine.purpose != .retry else {
            return
        }
        // A retryable failure waits for its retry (or, once they are used up, for the app).
        if machine.observedState == .didFailToSync, !explicitly { return }
        guard let index = storedItems.firstIndex(where: { $0.state == .pending }) else {
            becomeIdle()
            return
        }
        let id = storedItems[index].id
        guard let sequence = sequences[id], sequence <= savedSequence else { return }
        beginSend(id)
    }

    private func beginSend(_ id: String) {
        // Observation's handlers run before the change: one that enqueues must not start a send.
        isBeginningSend = true
        let updated = updateItem(id) { item, _ in
            item.state = .sending
            item.attempts += 1
        }
        isBeginningSend = false
        guard let item = updated else { return }
        // Its record takes the count with the next save asked for: records change only with one,
        // so that what a save writes does not depend on when it runs.
        unsavedAttempts[item.id] = item.attempts
        retryingID = nil
        sendCount += 1
        let count = sendCount
        let send = self.send
        mutateIsSending {
            sending = Sending(
                id: item.id,
                task: Task { [weak self] in
                    do {
                        try await send(item.change, item.idempotencyKey)
                        self?.sendDidFinish(count, error: nil)
                    } catch {
                        self?.sendDidFinish(count, error: error)
                    }
                })
        }
        perform { machine.stateChanged(to: .syncing, retryAllowed: true, now: clock.elapsed) }
    }

    private func sendDidFinish(_ count: Int, error: (any Error)?) {
        guard let id = sending?.id, sendCount == count else { return }
        // The item changes while the send still counts as running, so that a handler told of the
        // change (which may enqueue) starts nothing; a handler may also discard the item.
        guard let error else {
            let removed = removeItem(id)
            endSend(count)
            if removed {
                sequences[id] = nil
                forEachDisplay { $0.join(id) }
                save()
                perform { machine.stateChanged(to: .didSyncSuccessfully, retryAllowed: true, now: clock.elapsed) }
            }
            continueSending()
            return
        }
        let retryable = Self.isRetryable(error)
        let updated = updateItem(id) { item, record in
            item.state = retryable ? .pending : .failed
            item.lastError = error
            record.isFailed = !retryable
            record.lastError = "\(error)"
        }
        if updated != nil, retryable {
            // Before the send ends: a retry waits for its time from now on.
            retryingID = id
            perform {
                machine.stateChanged(
                    to: .didFailToSync, retryAllowed: true, retryAfter: (error as? any RetryAfterProviding)?.retryAfter,
                    now: clock.elapsed)
            }
        }
        endSend(count)
        guard updated != nil else {
            continueSending()
            return
        }
        save()
        if !retryable { continueSending() }
    }

    /// The send `count` is over (unless a newer one began meanwhile).
    private func endSend(_ count: Int) {
        guard sending != nil, sendCount == count else { return }
        mutateIsSending { sending = nil }
    }

    /// Sends the next item after one went (sent, failed for good, discarded), or rests.
    private func continueSending() {
        startSending(explicitly: false)
        if sending == nil, machine.observedState == .syncing || machine.observedState == .didSyncSuccessfully {
            becomeIdle()
        }
    }

    /// Nothing to send: the retry machinery rests (a refresh timer of the policy is not wanted).
    private func becomeIdle() {
        guard sending == nil, machine.observedState != .didFailToSync else { return }
        perform { machine.stateChanged(to: .idle, retryAllowed: true, now: clock.elapsed) }
    }

    /// The item a retry waits for went: no retry.
    private func stopRetrying() {
        retryingID = nil
        guard machine.observedState == .didFailToSync else { return }
        perform { machine.stateChanged(to: .idle, retryAllowed: true, now: clock.elapsed) }
    }

    private func cancelSending() {
        guard let sending else { return }
        sending.task.cancel()
        mutateIsSending { self.sending = nil }
        updateItem(sending.id) { item, _ in item.state = .pending }
    }

    /// Retryable: what `RetryAfterProviding.isRetryable` says, or any `URLError`.
    static func isRetryable(_ error: any Error) -> Bool {
        if let error = error as? any RetryAfterProviding { return error.isRetryable }
        return error is URLError
    }

    private func perform(_ decide: () -> [SyncerStateMachine.Action]) {
        for action in decide() {
            switch action {
            case .cancelTimer:
                timer.cancel()
            case .schedule(let delay):
                timer.arm(after: delay, on: clock) { [weak self] generation in
                    self?.timerDidFire(generation)
                }
            case .sync, .syncIfNeeded:
                startSending(explicitly: true)
                let state: LoadableState = sending == nil ? .idle : .syncing
                perform { machine.syncRequestHandled(state: state, retryAllowed: true, now: clock.elapsed) }
            }
        }
    }

    private func timerDidFire(_ generation: Int) {
        guard timer.fired(generation) else { return }
        perform { machine.timerFired(now: clock.elapsed) }
    }

    // MARK: - Saving and restoring

    /// Queues a save of the whole queue as it is now (replacing a save that waits for its turn).
    private func save() {
        let stored = stored
        if !unsavedAttempts.isEmpty {
            stored.withLock { stored in
                for (id, attempts) in unsavedAttempts {
                    if let index = stored.records.firstIndex(where: { $0.id == id }) {
                        stored.records[index].attempts = attempts
                    }
                }
            }
            unsavedAttempts.removeAll(keepingCapacity: true)
        }
        requestedSave += 1
        let covered = requestedSave
        let cache = cache
        let key = key
        // While the restore runs, the items of earlier launches are not known here: the save adds
        // the items to those in the cache (so that an item enqueued now is kept even if the
        // outbox goes before its restore finishes). After a read of them failed, each save adds
        // to them too, and hands them over once it can read them.
        let mode: OutboxSaveMode = isRestoring ? .addingToStored : storedIsUnread ? .adoptingStored : .whole
        let savedAt = now()
        CacheQueue.enqueueSave(in: cache, key: key) { [weak self] in
            // The queue as it is when the save runs (this save's items, and any enqueued since).
            let records = stored.withLock { $0.records.filter { !$0.isUnsaved } + $0.setAside }
            let outcome = await OutboxStorage.save(
                records, savedAt: savedAt, in: cache, key: key, mode: mode, as: Change.self)
            return { [weak self] in self?.saveDidFinish(covering: covered, outcome: outcome) }
        }
    }

    private func saveDidFinish(covering sequence: UInt64, outcome: OutboxSaveOutcome<Change>) {
        if let adopted = outcome.adopted, storedIsUnread {
            storedIsUnread = false
            putFirst(adopted)
            for error in adopted.newlySetAside { report(error) }
        }
        saveDidFinish(covering: sequence, error: outcome.error)
    }

    private func saveDidFinish(covering sequence: UInt64, error: LoadableCacheError?) {
        if let error { report(error) }
        guard sequence > savedSequence else { return }
        savedSequence = sequence
        if !saveWaiters.isEmpty {
            let done = saveWaiters.filter { $0.sequence <= sequence }
            saveWaiters.removeAll { $0.sequence <= sequence }
            for waiter in done { waiter.continuation.resume() }
        }
        startSending(explicitly: false)
    }

    private func restoreDidFinish(_ outcome: OutboxRestoreOutcome<Change>) {
        isRestoring = false
        if !dropsRestored {
            putFirst(outcome)
            // Not read for another reason than its bytes: the stored queue may be good. Saves add
            // to it until a read succeeds.
            if case .loadFailed? = outcome.error { storedIsUnread = true }
        }
        if let error = outcome.error { report(error) }
        if !dropsRestored {
            for error in outcome.newlySetAside { report(error) }
            if !outcome.newlySetAside.isEmpty || outcome.hasRestoredSetAside { savesAfterRestore = true }
        }
        dropsRestored = false
        if savesAfterRestore {
            savesAfterRestore = false
            save()
        }
        let waiters = restoreWaiters
        restoreWaiters = []
        for waiter in waiters { waiter.resume() }
        startSending(explicitly: false)
    }

    /// Puts the items of earlier launches (older than those enqueued since) before the others,
    /// on the loadables too, and keeps those set aside.
    private func putFirst(_ outcome: OutboxRestoreOutcome<Change>) {
        stored.withLock { $0.setAside.append(contentsOf: outcome.setAside) }
        let found = outcome.items.filter { sequences[$0.item.id] == nil }
        guard !found.isEmpty else { return }
        let newer = storedItems
        for item in newer { forEachDisplay { $0.drop(item.id) } }
        for (item, _) in found { sequences[item.id] = 0 }
        mutateItems { items, records in
            items.insert(contentsOf: found.map { $0.item }, at: 0)
            records.insert(contentsOf: found.map { $0.record }, at: 0)
        }
        for item in storedItems { forEachDisplay { addLayer(item.id, item.change, on: $0) } }
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
    private func mutateItems(_ body: (inout [OutboxItem<Change>], inout [OutboxRecord]) -> Void) {
        mutate(OutboxObservationKey.items) {
            stored.withLock { body(&storedItems, &$0.records) }
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
            guard let index = records.firstIndex(where: { $0.id == id }) else { return }
            body(&items[index], &records[index])
            updated = items[index]
        }
        return updated
    }

    /// Removes the item `id`; returns whether it was there (looked up inside the mutation).
    @discardableResult
    private func removeItem(_ id: String) -> Bool {
        var removed = false
        mutateItems { items, records in
            guard let index = records.firstIndex(where: { $0.id == id }) else { return }
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
        let resumes = !paused && machine.isPaused
        perform {
            machine.activityChanged(
                paused: paused, offline: activity.isOffline, retryAllowed: true,
                needsSync: storedItems.contains { $0.state == .pending }, now: clock.elapsed)
        }
        if resumes { startSending(explicitly: false) }
    }
}

/// The records of an outbox's items, in order, and of the items set aside.
private struct StoredRecords {
    var records: [OutboxRecord] = []
    var setAside: [OutboxRecord] = []
}

/// The send that runs.
private struct Sending {
    let id: String
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
