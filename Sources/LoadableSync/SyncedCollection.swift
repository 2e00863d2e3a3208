public import Foundation
internal import Loadable
public import LoadableCaching
public import LoadableSyncer

/// A collection of records kept in step with a server and edited locally, offline too: a loadable
/// of a ``RecordSet``.
///
/// ```swift
/// let tasks = SyncedCollection(remote: KintoRemote<Task>(service: service, bucket: "app", collection: "tasks"),
///                              cache: cache.scoped("tasks/"), conflicts: .fieldwise)
/// let syncer = LoadableSyncer(tasks, timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60)))
/// tasks.sync()
/// tasks.insert(Task(id: UUID().uuidString, title: "Buy milk"))   // shown at once, pushed when it can be
/// tasks.update(id) { $0.done = true }
/// ```
///
/// **Pulls.** `sync()` pulls every page of the records changed since the saved cursor
/// (``SyncRemote/pull(since:)``) and applies each: changed records replace theirs, tombstones remove
/// theirs. Each page is saved with its cursor, after its records, so a crash repeats at most a
/// page. ``SyncRemoteError/cursorExpired`` makes the same sync pull every record again (records the
/// full pull lacks go; pending changes stay). The collection is a `Loadable`: its state, `error`
/// (records kept), `invalidate()` (one more pull after the running one), and
/// `LoadableSyncer` for periodic pulls with backoff and `Retry-After` work as for any loadable.
///
/// **Local changes.** ``insert(_:)``, ``update(_:_:)`` and ``delete(_:)`` show at once, before the
/// first sync, offline, with no contents yet. They are pushed by an outbox of the collection's own
/// (a `LoadableOutbox` in `cache`), saved before they are sent, one scope per record: records in
/// parallel, the changes of one record in order, each made on the version the server gave the one
/// before, each sent with one idempotency key however often it is retried. Unsent changes of one
/// record merge (an insert then an edit is one create).
///
/// **Conflicts.** A pulled record with a pending local change made on an older version, and a push
/// the server refused (``PushResult/conflict(remote:)``), are settled by the ``ConflictPolicy``;
/// ``ConflictPolicy/manual`` keeps a ``SyncConflict`` in ``conflicts`` until
/// ``resolve(_:with:)``. The app's own write coming back on a pull while its push runs is not a
/// conflict, and a change made while a pull or a push runs is never lost.
///
/// **Persistence.** Records, versions, cursor, pending changes and conflicts are kept in `cache`
/// (entries pinned: a bounded cache does not evict them) and restored before the first pull
/// (``restored()``); ``removeAll()`` forgets them (logout).
///
/// **Inspector.** With a `LoadableInspector` attached, the collection records each pull that
/// succeeds (`LoadableEvent.collectionPulled`, with the records and tombstones that changed
/// something), each push the server answered (`collectionPushed`: `1` record accepted, `0` when it
/// ended in a conflict), and each conflict met on a pull or a push, before it is settled
/// (`collectionConflict`, with the record's id). Its snapshot entry
/// (`LoadableInspectorSnapshot.Collection`) counts the records shown, the pending changes, the
/// conflicts waiting and the live views and records (its leases); the page's actions reach the
/// collection itself (a sync is a pull). Its `inspectorLabel` defaults to the type and the key
/// (`SyncedCollection<KintoRemote<Task>>[tasks]`); set it to name it yourself.
///
/// Isolated to the main actor.
@MainActor
public final class SyncedCollection<Remote: SyncRemote>: Loadable<RecordSet<Remote.Record>> {
    /// The record type.
    public typealias Record = Remote.Record

    /// The server.
    public let remote: Remote
    /// Where records, cursor and pending changes are kept.
    public let cache: any LoadableCache
    /// The collection's key in ``cache``: its records go under `<key>/records`, its outbox under
    /// `<key>/outbox`.
    public let key: String
    /// How conflicts are settled.
    public let conflictPolicy: ConflictPolicy<Record>
    /// Told of cache failures (a save, a restore, records that no longer decode) and of local
    /// changes the server refused for good (they stay, failed, until ``resolve(_:with:)``).
    public var onError: (@MainActor (any Error) -> Void)?

    /// The collection's outbox: its items are the pending local changes.
    let outbox: LoadableOutbox<RecordChange<Record>>
    let now: @Sendable () -> Date

    // The server's side.
    var server: [Record.ID: RemoteRecord<Record>] = [:]
    var cursor: String?
    var storedHasSynced = false
    var storedLastSyncedAt: Date?
    /// The records at the base version of pending changes whose server record moved on.
    var conflictBases: [Record.ID: Record] = [:]

    // Showing.
    /// The records whose shown version comes from the outbox (a superset: refreshed lazily).
    var idsWithItems: Set<Record.ID> = []
    var isRefreshScheduled = false
    /// Whether ``idsWithItems`` holds every record with items: once the outbox's restore was seen
    /// (after it, items come only from this collection's own writes).
    var knowsEveryItem = false
    /// The status counts last told to observers.
    var toldCounts: StatusCounts? = StatusCounts()

    // Pulls.
    var pullTask: Task<Void, Never>?
    var pullGeneration = 0
    /// The base versions of pushes answered while the pull runs, by record: a page fetched before
    /// the answer may bring them, and must not take the record back.
    var pushedDuringPull: [Record.ID: Set<String>] = [:]
    /// Whether a page of this pull brought the tombstone of a record a push of the pull's time
    /// wrote: the pull then goes again.
    var tombstoneSkippedDuringPull = false

    // Persistence.
    /// The restore of the records, and the callers of ``restored()`` waiting for it.
    let recordsRestore = RestoreWaiter()
    var journalPage = 0
    var journalPageRecords = 0

    // Live views and records.
    var live: LiveRecords<Record>?
    var liveObservation: LoadableObservation?

    /// Creates a collection and starts restoring what `cache` keeps under `key` (off the main
    /// actor).
    ///
    /// - Parameters:
    ///   - remote: The server.
    ///   - cache: Where records, cursor, pending changes and conflicts are kept. Give it a scope of
    ///     its own (`cache.scoped("tasks/")`) that no store's `removeAll()` clears.
    ///   - key: The collection's key in `cache`; one live collection per key.
    ///   - conflicts: How conflicts are settled; ``ConflictPolicy/manual`` by default.
    ///   - activity: Pauses pushes while the app is inactive or offline; `ActivityMonitor.system`
    ///     by default. (Pulls follow whoever calls `sync()`: a `LoadableSyncer` has its own.)
    ///   - retryPolicy: The delays between retries of a push that failed and may be retried.
    ///   - clock: The clock of the loadable (`age`) and of push retries; a `ManualClock` in tests.
    ///   - now: The wall-clock time, for ``SyncStatus/lastSyncedAt`` and the entries saved.
    public init(
        remote: Remote,
        cache: any LoadableCache,
        key: String = "collection",
        conflicts: ConflictPolicy<Record> = .manual,
        activity: ActivityMonitor = .system,
        retryPolicy: any TimeoutPolicy = BackoffTimeoutPolicy(),
        clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { .now }
    ) {
        self.remote = remote
        self.cache = cache
        self.key = key
        self.conflictPolicy = conflicts
        self.now = now
        weak var weakSelf: SyncedCollection?
        outbox = LoadableOutbox(
            cache: cache,
            rebase: { later, applied in Self.rebase(&later, on: applied) },
            coalesce: { earlier, later in Self.coalesce(earlier, later) },
            key: "\(key)/outbox", activity: activity, retryPolicy: retryPolicy, clock: clock, now: now
        ) { change, idempotencyKey in
            guard let collection = weakSelf else { throw CancellationError() }
            return try await collection.push(change, idempotencyKey: idempotencyKey)
        }
        super.init(clock: clock)
        weakSelf = self
        outbox.onError = { [weak self] in self?.report($0) }
        outbox.itemsDidChange = { [weak self] in self?.scheduleRefresh() }
        registerForInspection()
        startRestore()
    }

    deinit {
        pullTask?.cancel()
    }

    // MARK: - Pulls

    /// Pulls every page since the saved cursor and applies each (`sync()` calls it).
    override public func doSync() {
        pullGeneration += 1
        let generation = pullGeneration
        pushedDuringPull.removeAll()
        pullTask = Task { [weak self] in await self?.pull(generation: generation) }
    }

    /// Cancels the running pull: pages applied stay (each with its cursor), the rest is not asked.
    override public func doCancelSync() {
        pullGeneration += 1
        pullTask?.cancel()
        pullTask = nil
    }

    // MARK: - Reading

    /// Where the collection stands: pulled yet, pulling, pushing, pending changes, conflicts.
    /// Observable.
    public var status: SyncStatus {
        core.trackAccess()
        let items = outbox.items
        return SyncStatus(
            hasSynced: storedHasSynced, lastSyncedAt: storedLastSyncedAt, isPulling: core.state == .syncing,
            isPushing: outbox.isSending, pendingCount: outbox.pendingCount,
            conflictCount: items.count { $0.state == .conflict || $0.state == .failed })
    }

    /// What waits for the app's decision, oldest first: the conflicts held by
    /// ``ConflictPolicy/manual``, and the local changes the server refused for good
    /// (``SyncConflict/isRefused``, whose error ``onError`` was told; their `remote` is the
    /// server's record as last pulled). Each is settled by ``resolve(_:with:)``. Observable.
    public var conflicts: [SyncConflict<Record>] {
        core.trackAccess()
        return outbox.items.filter { $0.state == .conflict || $0.state == .failed }.map { item in
            let id = item.change.id
            let isRefused = item.state == .failed
            return SyncConflict(
                id: id, base: conflictBase(of: id, version: item.change.base), local: item.change.record,
                remote: isRefused ? server[id]?.record : item.remote?.record, isRefused: isRefused)
        }
    }

    // MARK: - Local changes

    /// Adds `record`, or replaces the record with its id: shown at once, pushed when it can be.
    ///
    /// - Parameter record: The record.
    public func insert(_ record: Record) {
        write(record.id, record)
    }

    /// Changes the record `id` as shown: shown at once, pushed when it can be. Does nothing when
    /// no record has `id`, when `body` changes nothing, or when it changes the record's id.
    ///
    /// - Parameters:
    ///   - id: The record's id.
    ///   - body: Changes the record.
    public func update(_ id: Record.ID, _ body: (inout Record) -> Void) {
        guard var record = shownRecord(id) else { return }
        body(&record)
        guard record.id == id else { return }
        write(id, record)
    }

    /// Deletes the record `id`: gone at once, pushed when it can be. Does nothing when no record
    /// has `id`.
    ///
    /// - Parameter id: The record's id.
    public func delete(_ id: Record.ID) {
        write(id, nil)
    }

    /// Settles the conflict of record `id` (or a change of it the server refused for good) with
    /// `record` (`nil`: delete): pushed on the server's version it conflicted with, with a new
    /// idempotency key. A record equal to the server's is taken as it is, with no push. Does
    /// nothing when record `id` has no conflict or failed change.
    ///
    /// ```swift
    /// for conflict in tasks.conflicts {
    ///     tasks.resolve(conflict.id, with: conflict.local ?? conflict.remote)  // or ask the user
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - id: The record's id.
    ///   - record: The record to keep.
    public func resolve(_ id: Record.ID, with record: Record?) {
        let items = items(of: id)
        guard let target = items.last(where: { $0.state == .conflict || $0.state == .failed }) else { return }
        let settlement = ConflictSettlement.change(id: id, to: record, on: server[id])
        for item in items where item.id != target.id && item.state != .sending { outbox.discard(item.id) }
        switch settlement {
        case .push(let change): outbox.resolve(target.id, with: change)
        case .acceptServer, .hold: outbox.discard(target.id)
        }
        conflictBases[id] = nil
        refresh([id])
    }

    /// Forgets everything: records, cursor, pending changes and conflicts, here and in the cache
    /// (logout). A running pull is cancelled; the contents become `nil`.
    public func removeAll() {
        if core.state == .syncing { cancelSync() }
        pullGeneration += 1
        pullTask?.cancel()
        pullTask = nil
        outbox.removeAll()
        server.removeAll()
        cursor = nil
        storedHasSynced = false
        storedLastSyncedAt = nil
        conflictBases.removeAll()
        idsWithItems.removeAll()
        journalPage = 0
        journalPageRecords = 0
        let cache = cache
        let key = key
        CacheQueue.enqueue(in: cache, key: SyncJournal.snapshotKey(key)) { [weak self] in
            var errors: [any Error] = []
            await SyncJournal.removeAll(from: cache, key: key, errors: &errors)
            guard !errors.isEmpty else { return nil }
            return { [weak self] in
                for error in errors { self?.report(error) }
            }
        }
        changeRecords { contents, log in
            guard contents != nil else { return false }
            contents = nil
            log.replaceAll()
            return true
        }
    }

    /// Returns once the records and the pending changes of earlier launches are read (or found
    /// missing, or failed to read) and shown; at once when they are.
    public func restored() async {
        await recordsRestore.restored()
        await outbox.restored()
        refreshPending()
    }

    /// Returns once what the collection holds now is in the cache: the records and cursor pulled,
    /// the pending changes and conflicts.
    public func saved() async {
        await outbox.saved()
        await withCheckedContinuation { continuation in
            CacheQueue.enqueue(in: cache, key: SyncJournal.snapshotKey(key)) { { continuation.resume() } }
        }
    }

    // MARK: - Showing

    /// The record `id` as shown: the last pending change's, else the server's.
    func shownRecord(_ id: Record.ID) -> Record? {
        if idsWithItems.contains(id) || !knowsEveryItem, let last = items(of: id).last {
            return last.change.record
        }
        return server[id]?.record
    }

    /// The outbox's items of record `id`, in order.
    func items(of id: Record.ID) -> [OutboxItem<RecordChange<Record>>] {
        outbox.items.filter { $0.change.id == id }
    }

    /// The outbox's scope of record `id`.
    func scope(of id: Record.ID) -> String {
        if let string = id as? String { return "s:" + string }
        if let number = id as? Int { return "i:\(number)" }
        if let uuid = id as? UUID { return "u:" + uuid.uuidString }
        let data = (try? JSONEncoder().encode([id])) ?? Data()
        return "j:" + String(decoding: data, as: UTF8.self)
    }

    func write(_ id: Record.ID, _ record: Record?) {
        // Until the outbox's restore is seen, `idsWithItems` may lack restored items: the outbox
        // itself is asked.
        let items = idsWithItems.contains(id) || !knowsEveryItem ? items(of: id) : []
        let shown = items.last.map { $0.change.record } ?? server[id]?.record
        guard record != shown else { return }
        if let last = items.last, last.state == .conflict || last.state == .failed {
            // A conflict stays one, with the new local side; a failed change takes it.
            outbox.replaceChange(of: last.id, with: Self.change(id, record, replacing: last.change))
            refresh([id])
            return
        }
        let change: RecordChange<Record>
        if let last = items.last {
            if record == nil, case .create = last.change, last.state == .pending, last.attempts == 0 {
                // Created and deleted before it was sent: nothing goes.
                outbox.discard(last.id)
                refresh([id])
                return
            }
            change = Self.change(id, record, after: last.change)
        } else if let record {
            change = server[id].map { .update(record, base: $0.version) } ?? .create(record)
        } else if let base = server[id] {
            change = .delete(id, base: base.version)
        } else {
            return
        }
        idsWithItems.insert(id)
        outbox.enqueue(change, scope: scope(of: id))
        show(id, record)
    }

    /// Shows `record` (`nil`: none) as record `id`: a local write's one step, with no look at the
    /// outbox's other items.
    func show(_ id: Record.ID, _ record: Record?) {
        let changed = changeRecords { contents, log in
            if let record {
                if contents == nil { contents = RecordSet() }
                return log.upsert(record, in: &contents!)
            }
            guard contents != nil else { return false }
            return log.remove(id, in: &contents!)
        }
        tellStatusIfChanged(contentsTold: changed)
    }

    /// The change that follows `earlier` (queued, or being sent) to leave the record as `record`:
    /// made on `earlier`'s base; the rebase after `earlier`'s answer moves it to the new version.
    static func change(_ id: Record.ID, _ record: Record?, after earlier: RecordChange<Record>) -> RecordChange<Record>
    {
        switch (earlier, record) {
        case (.create, let record?): .update(record, base: "")
        case (.create, nil): .delete(id, base: "")
        case (.update(_, let base), let record?), (.delete(_, let base), let record?): .update(record, base: base)
        case (.update(_, let base), nil), (.delete(_, let base), nil): .delete(id, base: base)
        }
    }

    /// `earlier` (conflicted or failed) with the record left as `record`, on the same base.
    static func change(
        _ id: Record.ID, _ record: Record?, replacing earlier: RecordChange<Record>
    ) -> RecordChange<Record> {
        switch (earlier, record) {
        case (.create, let record?): .create(record)
        case (.create, nil): .delete(id, base: "")
        case (.update(_, let base), let record?), (.delete(_, let base), let record?): .update(record, base: base)
        case (.update(_, let base), nil), (.delete(_, let base), nil): .delete(id, base: base)
        }
    }

    /// The outbox's coalescing: an unsent change and a later one of the same record as one change.
    static func coalesce(_ earlier: RecordChange<Record>, _ later: RecordChange<Record>) -> RecordChange<Record>? {
        switch (earlier, later) {
        case (.create, .update(let record, _)), (.create, .create(let record)): .create(record)
        case (.update(_, let base), .update(let record, _)), (.update(_, let base), .create(let record)),
            (.delete(_, let base), .update(let record, _)), (.delete(_, let base), .create(let record)):
            .update(record, base: base)
        case (.update(let record, let base), .delete):
            .delete(record.id, base: base)
        case (.create, .delete), (.delete, .delete):
            nil
        }
    }

    /// The outbox's rebase: a later change of a record whose earlier change the server applied as
    /// `applied` (an update: the new version; a delete: gone).
    static func rebase(_ later: inout RecordChange<Record>, on applied: RecordChange<Record>) {
        switch (applied, later) {
        case (.update(_, let version), .update(let record, _)), (.update(_, let version), .create(let record)):
            later = .update(record, base: version)
        case (.update(_, let version), .delete(let id, _)):
            later = .delete(id, base: version)
        case (.delete, .update(let record, _)):
            later = .create(record)
        case (.delete, .delete), (.delete, .create), (.create, _):
            break
        }
    }

    /// Shows what the outbox holds, on the next turn of the main actor: the outbox tells of its
    /// changes from inside them.
    func scheduleRefresh() {
        guard !isRefreshScheduled else { return }
        isRefreshScheduled = true
        Task { [weak self] in
            if self?.isRefreshScheduled == true { self?.refreshPending() }
        }
    }

    /// Shows every record with pending changes (and those that had some) as it now stands.
    func refreshPending() {
        isRefreshScheduled = false
        let items = outbox.items
        // In the outbox's order (the order the changes were made), then those that left it: new
        // records take their places at the end in that order, after a relaunch too.
        var now: Set<Record.ID> = []
        var ids: [Record.ID] = []
        for item in items where now.insert(item.change.id).inserted { ids.append(item.change.id) }
        for id in idsWithItems where !now.contains(id) { ids.append(id) }
        idsWithItems = now
        // Once the outbox's restore ended, its items are all here: later ones are this collection's.
        if !outbox.isRestoring { knowsEveryItem = true }
        for id in conflictBases.keys where !now.contains(id) { conflictBases[id] = nil }
        refresh(ids, items: items)
    }

    /// Shows records `ids` as they now stand, in one change.
    func refresh(_ ids: some Collection<Record.ID>, items: [OutboxItem<RecordChange<Record>>]? = nil) {
        var lastChange: [Record.ID: RecordChange<Record>] = [:]
        var wanted = Set<Record.ID>()
        let ordered = ids.filter { wanted.insert($0).inserted }
        for item in items ?? outbox.items where wanted.contains(item.change.id) {
            lastChange[item.change.id] = item.change
        }
        let changed = changeRecords { contents, log in
            // Taken out, so that the set is changed in place (a second reference would copy it).
            let wasEmpty = contents == nil
            var set = contents.take() ?? RecordSet()
            var changed = false
            for id in ordered {
                let record = lastChange[id].map { $0.record } ?? server[id]?.record
                if let record {
                    changed = log.upsert(record, in: &set) || changed
                } else {
                    changed = log.remove(id, in: &set) || changed
                }
            }
            // A collection with no contents gets some (maybe empty) once it shows a record's state.
            if wasEmpty, !wanted.isEmpty { changed = true }
            if !wasEmpty || changed { contents = set }
            return changed
        }
        tellStatusIfChanged(contentsTold: changed)
    }

    /// Tells observers when the counts of ``status`` changed and no notification told them. When
    /// one did (`contentsTold`), the counts are not even looked at (a local write's hot path): the
    /// next look compares against unknown counts, and tells.
    func tellStatusIfChanged(contentsTold: Bool) {
        guard !contentsTold else {
            toldCounts = nil
            return
        }
        var counts = StatusCounts(isSending: outbox.isSending)
        for item in outbox.items {
            switch item.state {
            case .pending, .sending: counts.pending += 1
            case .conflict, .failed: counts.conflicts += 1
            }
        }
        guard counts != toldCounts else { return }
        toldCounts = counts
        notifyDidChange()
    }

    /// The record at `version` of record `id`, if known.
    func conflictBase(of id: Record.ID, version: String?) -> Record? {
        if let base = conflictBases[id] { return base }
        guard let version, let record = server[id], record.version == version else { return nil }
        return record.record
    }

    /// Keeps the server's record `id` (`nil`: gone), remembering the base of pending changes made
    /// on the one it replaces.
    func setServer(_ id: Record.ID, _ record: RemoteRecord<Record>?) {
        if let old = server[id], conflictBases[id] == nil, idsWithItems.contains(id),
            items(of: id).first?.change.base == old.version
        {
            conflictBases[id] = old.record
        }
        server[id] = record
    }

    func report(_ error: any Error) {
        onError?(error)
    }
}

/// The counts of ``SyncStatus`` that observers were last told of.
struct StatusCounts: Equatable {
    var pending = 0
    var conflicts = 0
    var isSending = false
}

/// A push whose conflicts kept coming back (the record changed on the server between each
/// attempt): retried later.
struct SyncPushConflictsRepeated: Error, RetryAfterProviding, CustomStringConvertible {
    var isRetryable: Bool { true }
    var retryAfter: Duration? { nil }
    var description: String { "the record kept changing on the server while its conflict was settled" }
}
