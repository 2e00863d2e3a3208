public import Foundation
public import Loadable
import LoadableSupport
public import Observation

/// One shared loadable per key, made on first use, kept while leased, and released after its last
/// user.
///
/// Screens that show the same thing (a profile in a list, on its detail page and in a header) ask
/// the store for a lease of its key instead of making a loadable of their own, so they share one
/// object, one request and one answer:
///
/// ```swift
/// let posts = LoadableStore<Post.ID, PostLoadable>(retention: .seconds(300)) { id in
///     PostLoadable(id: id, api: api)
/// }
///
/// // In each screen:
/// let post = posts.lease(id)    // the same object for every screen of this `id`
/// post.syncIfNeeded()           // one sync, however many screens ask
///
/// // After a change on the server:
/// posts.invalidate { $0 == id }  // leased entries sync again; retained ones only turn stale
/// ```
///
/// **Entries.** `make` runs once per entry; every lease of a live entry stands for the same
/// loadable (`lease.loadable ===`). An entry owns its loadable: `make` must return a new one for
/// every key (it stops the program otherwise).
///
/// **Retention.** Live leases keep an entry in use. When the last one ends, the entry is
/// *retained* for ``retention``, then dropped (a syncing entry is cancelled first); a lease taken
/// meanwhile reuses it, contents and all, without a sync. With ``maxRetained``, the least recently
/// released retained entries are dropped first. One timer on the store's clock serves all retained
/// entries, however many.
///
/// **Time.** Retention runs on the clock given at init, so tests drive it with a manual clock.
///
/// Isolated to the main actor. Observable: ``count`` and ``syncingCount``.
@MainActor
public final class LoadableStore<Key: Hashable & Sendable, Value: SyncableLoadable>: Observable {
    @usableFromInline typealias Entry = StoreEntry<Key, Value>

    // The mutable stored properties skip dynamic exclusivity checks (they cost a lease a fifth of
    // its time): they are used on the main actor only, and no access to one of them spans a call
    // of code that could reach it again (`make`, observers and predicates run outside them).

    /// How long an entry without leases is kept before it is dropped.
    public let retention: Duration
    /// How many entries without leases are kept at most; `nil`: no limit.
    public let maxRetained: Int?

    /// ``retention``, at most `Int64.max` nanoseconds (292 years: "never"), so that an expiry
    /// time cannot overflow.
    private let retentionBound: Duration
    private let clock: ElapsedClock
    @usableFromInline let make: @MainActor (Key) -> Value
    // Inlinable (with `lease(_:)`), so that the lookup of a live key is specialized for the app's
    // key type: unspecialized, a dictionary lookup and the lease's type cost several times the
    // lookup itself.
    @exclusivity(unchecked) @usableFromInline var entries: [Key: Entry] = [:]
    /// Every entry, in the order they were made.
    @exclusivity(unchecked) private var ordered = EntryList(retained: false)
    /// The entries without leases, least recently released first.
    @exclusivity(unchecked) private var retained = EntryList(retained: true)
    /// The one timer of the store: armed for the expiry of the head of ``retained``.
    private var timer = ClockTimer()
    /// When the armed timer fires, on the store's clock; `nil` when not armed.
    @exclusivity(unchecked) private var timerDeadline: Duration?
    /// The keys whose `make` is running, innermost last.
    @exclusivity(unchecked) @usableFromInline var keysBeingMade: [Key] = []
    /// Removes a key from ``entries``; see ``makeEntry(for:)``.
    @exclusivity(unchecked) @usableFromInline var removeFromDictionary: (@MainActor (LoadableStore, Key) -> Void)?
    /// Loadables of the app's own types held by entries (the package's types are marked in their
    /// core instead), for the check that an entry owns its loadable.
    @exclusivity(unchecked) private var ownTypeValues: Set<ObjectIdentifier> = []
    @exclusivity(unchecked) private var storedSyncingCount = 0
    /// Made by the first tracked read, so that a store nobody observes pays nothing for it.
    @exclusivity(unchecked) private var observation: ObservationState?
    /// How entries are persisted, for a store made with a cache.
    @exclusivity(unchecked) private var persistence: StorePersistence<Key, Value>?

    /// Creates an empty store.
    ///
    /// - Parameters:
    ///   - retention: How long an entry is kept after its last lease ended; `.zero` drops it at
    ///     once, and any length up to `.seconds(Int64.max)` is valid. Negative stops the program.
    ///   - maxRetained: How many entries without leases are kept at most, least recently released
    ///     dropped first; `nil` (the default) for no limit. Negative stops the program.
    ///   - clock: The clock retention runs on.
    ///   - make: Makes the loadable of a key; called once per entry, on the main actor. It must
    ///     return a new loadable every time, and must not lease the key it is making.
    public init(
        retention: Duration = .seconds(300),
        maxRetained: Int? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        make: @escaping @MainActor (Key) -> Value
    ) {
        requireValid(
            retention >= .zero,
            "LoadableStore: retention must be zero or more (.zero drops an entry as soon as its last lease ends), got \(retention)"
        )
        requireValid(
            (maxRetained ?? 0) >= 0,
            "LoadableStore: maxRetained must be nil (no limit) or 0 or more, got \(maxRetained ?? 0)"
        )
        self.retention = retention
        self.maxRetained = maxRetained
        retentionBound = LoadableTime.duration(LoadableTime.nanoseconds(retention))
        self.clock = ElapsedClock(clock)
        self.make = make
        // One registration per store, held weakly: a snapshot walks the entries when asked.
        LoadableInspection.register(self)
    }

    deinit {
        timer.cancelTask()
        // Each entry's loadable holds its entry (a subscriber of its core), and the entry holds
        // the loadable: unhook the entries still here, or they would keep each other alive. A
        // store is let go on the main actor but for rare cases, which unhook a moment later.
        let entries = Array(entries.values)
        guard !entries.isEmpty else { return }
        runOnMainActor { Self.unsubscribe(entries) }
    }

    /// Unsubscribes each entry from its loadable's core (the store let go of them).
    private static func unsubscribe(_ entries: [Entry]) {
        for entry in entries {
            entry.core?.unsubscribe(entry as StoreEntryNode)
        }
    }

    // MARK: - Leases

    /// Takes a lease on the entry of `key`, making the entry if there is none.
    ///
    /// The lease is a loadable that stands for the entry's loadable, and keeps the entry in use
    /// until it is released (``LoadableLease/release()``) or goes away. Taking a lease does not
    /// sync: call `syncIfNeeded()` on it.
    ///
    /// - Parameter key: The key of the entry.
    /// - Returns: A new lease; every lease of one live entry stands for the same loadable.
    @inlinable
    public func lease(_ key: Key) -> LoadableLease<Value> {
        let entry = entries[key] ?? makeEntry(for: key)
        return LoadableLease(entry.value, tracker: entry)
    }

    /// The loadable of `key` if the store has an entry for it, leased or retained; never makes
    /// one, and takes no lease (a retained entry still expires).
    ///
    /// - Parameter key: The key of the entry.
    /// - Returns: The entry's loadable, or `nil`.
    public func peek(_ key: Key) -> Value? {
        entries[key]?.value
    }

    /// The number of entries, leased or retained.
    public var count: Int {
        access(StoreObservationKey.count)
        return entries.count
    }

    /// The number of entries syncing now.
    ///
    /// Counts loadables of the package's types (`Loadable` and its subclasses, groups, chains,
    /// `TestLoadable`); a type of your own that conforms to `SyncableLoadable` directly is not
    /// counted.
    public var syncingCount: Int {
        access(StoreObservationKey.syncingCount)
        return storedSyncingCount
    }

    /// Leases `key`, syncs it if needed (joining a running sync), waits for the sync, and releases
    /// the lease: the entry is then retained with fresh contents, for a screen about to open.
    ///
    /// - Parameter key: The key of the entry.
    /// - Throws: The sync's error, or `CancellationError` if the waiting task is cancelled (the
    ///   sync goes on).
    public func prefetch(_ key: Key) async throws {
        let lease = lease(key)
        defer { lease.release() }
        try await lease.synced()
    }

    // MARK: - Invalidation and removal

    /// Invalidates the entries whose key matches: each one's `invalidate()`, in the order the
    /// entries were made. Leased entries then sync (or sync once more after a running sync);
    /// retained ones only turn stale, and sync when leased again and asked to `syncIfNeeded()`.
    ///
    /// - Parameter matches: Whether to invalidate the entry of a key. It must not use the store
    ///   (an entry it removes may end the walk early).
    public func invalidate(where matches: (Key) -> Bool) {
        // Collected first: an observer of an invalidated entry may lease, release or remove.
        invalidate(orderedEntries(where: matches))
    }

    /// Invalidates every entry (see ``invalidate(where:)``).
    public func invalidateAll() {
        invalidate(orderedEntries(where: { _ in true }))
    }

    /// The entries whose key matches, in the order they were made, held strongly: a caller may
    /// run code that changes the store while it goes through them. `matches` must not change the
    /// store.
    func orderedEntries(where matches: (Key) -> Bool) -> [Entry] {
        var found: [Entry] = []
        var node = ordered.head
        while let current = node {
            let entry = unsafeDowncast(current, to: Entry.self)
            if matches(entry.key) { found.append(entry) }
            node = ordered.newer(than: current)
        }
        return found
    }

    /// The retained entry released longest ago: the next to expire.
    private var retainedHead: Entry? {
        guard let head = retained.head else { return nil }
        return unsafeDowncast(head, to: Entry.self)
    }

    private func invalidate(_ matching: [Entry]) {
        for entry in matching where entry.isInStore {
            entry.value.invalidate()
            // The package's loadables sync themselves when invalidated in use; a type of the
            // app's own learns of its use only from here.
            if entry.owner == nil, entry.leaseCount > 0 { entry.value.syncIfNeeded() }
        }
    }

    /// Drops the entry of `key` now, cancelling its sync. Live leases keep their loadable, which
    /// is no longer the store's: the next lease of `key` makes a new entry.
    ///
    /// In a store with a cache, the key's cached entry is removed too (after any save of it asked
    /// for before), whether or not the store had an entry: the next entry of `key` starts
    /// without it.
    ///
    /// - Parameter key: The key of the entry; a key without one is ignored.
    public func remove(_ key: Key) {
        if let entry = entries[key] { drop(entry) }
        persistence?.removeCachedEntry(of: key)
    }

    /// Drops every entry, cancelling their syncs in the order the entries were made (logout).
    /// Live leases keep their loadables, which are no longer the store's.
    ///
    /// In a store with a cache, the cache is cleared too (`LoadableCache.removeAll()`), after
    /// every save asked for before: nothing of the last user is left in it. Await ``saved()`` to
    /// know when that is done.
    public func removeAll() {
        let all = orderedEntries(where: { _ in true })
        willChangeCount()
        ordered.removeAll()
        retained.removeAll()
        entries.removeAll()
        didChangeCount()
        for entry in all { detach(entry) }
        persistence?.removeAllCachedEntries()
        for entry in all where entry.isSyncing { entry.value.cancelSync() }
    }

    // MARK: - Entries

    /// Stops the program: `make` leased the key it is making. Not inlinable, and called only on
    /// that failure: ``makeEntry(for:)`` (inlined into the app) makes the check itself, so that
    /// the common path stays specialized and looks up no generic metadata.
    @usableFromInline
    func makeLeasedTheKeyItIsMaking(_ key: Key) {
        requireValid(
            false,
            "LoadableStore: make(\(key)) asked the store for \(key) itself; make must not lease the key it is making"
        )
    }

    /// Makes the entry of `key`, with `make`, and adds it to the store. Inlinable with
    /// ``lease(_:)``: the calls of `make` and the insert into the dictionary are then specialized
    /// for the app's types.
    @inlinable
    func makeEntry(for key: Key) -> Entry {
        if !keysBeingMade.isEmpty, keysBeingMade.contains(key) { makeLeasedTheKeyItIsMaking(key) }
        keysBeingMade.append(key)
        let value = make(key)
        keysBeingMade.removeLast()
        // A `make` may lease other keys, and they theirs, but none can have made this key.
        let entry = Entry(key: key, value: value, store: self)
        adopt(entry)
        willChangeCount()
        entries[key] = entry
        if removeFromDictionary == nil {
            // Made here, in code specialized for the app's key type, so that the removals made by
            // the store's own code (unspecialized: a release, the timer) are specialized too. The
            // store is passed, not captured: no context, and no retain of the store per call.
            removeFromDictionary = { store, key in store.entries[key] = nil }
        }
        didAddEntry(entry)
        return entry
    }

    /// Checks that `entry` owns its loadable and hooks the loadable's syncing reports.
    @usableFromInline
    func adopt(_ entry: Entry) {
        let key = entry.key
        if let core = entry.core {
            requireValid(
                !core.containsSubscriber(where: { $0 is StoreEntryNode }),
                "LoadableStore: make(\(key)) returned a loadable that is already an entry of a store; an entry must own its loadable, so make must return a new one for every key"
            )
            core.subscribe(entry as StoreEntryNode)
            persistence?.persist(entry.value, key: key)
        } else {
            requireValid(
                ownTypeValues.insert(ObjectIdentifier(entry.value)).inserted,
                "LoadableStore: make(\(key)) returned a loadable that is already an entry of this store; an entry must own its loadable, so make must return a new one for every key"
            )
        }
    }

    /// Ends the addition of `entry`, which is in the dictionary now.
    @usableFromInline
    func didAddEntry(_ entry: Entry) {
        ordered.append(entry)
        didChangeCount()
        // The core's state, which the syncing watcher follows (`isSyncing` may read another's).
        if let core = entry.core, core.state == .syncing { syncingCountDidChange(by: 1) }
    }

    /// The last lease of an attached entry ended: retain it, or drop it when nothing may be kept.
    func entryIsUnused(_ entry: Entry) {
        guard retentionBound > .zero, maxRetained != 0 else {
            drop(entry)
            return
        }
        entry.expiresAt = now + retentionBound
        retained.append(entry)
        if let maxRetained, retained.count > maxRetained, let head = retainedHead {
            drop(head)
        }
        armTimer()
    }

    /// A retained entry got a lease: it is no longer on its way out.
    func entryIsLeasedAgain(_ entry: Entry) {
        retained.remove(entry)
    }

    /// Takes `entry` out of the store, then cancels its sync (which notifies, and so may run code
    /// that uses the store: the entry is already gone by then).
    private func drop(_ entry: Entry) {
        retained.remove(entry)
        willChangeCount()
        ordered.remove(entry)
        removeFromEntries(entry.key)
        didChangeCount()
        detach(entry)
        if entry.isSyncing { entry.value.cancelSync() }
    }

    /// Removes `key` from ``entries``, through the specialized ``removeFromDictionary`` once
    /// ``makeEntry(for:)`` made it.
    private func removeFromEntries(_ key: Key) {
        if let removeFromDictionary { removeFromDictionary(self, key) } else { entries[key] = nil }
    }

    /// Unhooks an entry that left the dictionary: it no longer counts as syncing, and its loadable
    /// may be an entry elsewhere.
    private func detach(_ entry: Entry) {
        entry.store = nil
        if let core = entry.core {
            if core.state == .syncing { syncingCountDidChange(by: -1) }
            core.unsubscribe(entry as StoreEntryNode)
            // A loadable is persisted while it is an entry (saves asked for before still run).
            if persistence != nil { core.subscriber(LoadablePersistence.self)?.stop() }
        } else {
            ownTypeValues.remove(ObjectIdentifier(entry.value))
        }
    }

    /// An entry's loadable began (`1`) or stopped (`-1`) syncing.
    func syncingCountDidChange(by delta: Int) {
        observation?.registrar.willSet(StoreObservationKey(), keyPath: StoreObservationKey.syncingCount)
        storedSyncingCount += delta
        observation?.registrar.didSet(StoreObservationKey(), keyPath: StoreObservationKey.syncingCount)
    }

    // MARK: - Expiry

    /// The time on the store's clock, from the store's creation. (A `Duration`, not nanoseconds:
    /// the conversion would cost a release as much as its list work.)
    private var now: Duration { clock.elapsed }

    /// Arms the timer for the head of the retained list, unless it is armed for that time or
    /// earlier (an early wake drops nothing and arms again).
    private func armTimer() {
        guard let head = retained.head else { return }
        if let timerDeadline, timerDeadline <= head.expiresAt { return }
        timerDeadline = head.expiresAt
        let delay = head.expiresAt - now
        timer.arm(after: delay, on: clock) { [weak self] generation in
            self?.timerFired(generation)
        }
    }

    private func timerFired(_ generation: Int) {
        guard timer.fired(generation) else { return }
        timerDeadline = nil
        let now = now
        // Dropping a syncing entry runs code (its cancelled sync notifies) that may lease or
        // release entries: read the head again after each. The entries before the next syncing
        // one leave together.
        while let head = retainedHead, head.expiresAt <= now {
            if head.isSyncing {
                drop(head)
            } else {
                dropExpiredEntries(until: now)
            }
        }
        armTimer()
    }

    /// Drops the expired entries at the head of the retained list that are not syncing, up to
    /// the first one that is: nothing of the app's runs while they leave (no sync is cancelled),
    /// so they leave in one change of ``count``. Each leaves the lists, the dictionary and its
    /// loadable before the next is read, so that its memory is read once while it is in the cache.
    private func dropExpiredEntries(until now: Duration) {
        // Told first: an observer told at once may lease an entry, which then stays.
        willChangeCount()
        while let head = retainedHead, head.expiresAt <= now, !head.isSyncing {
            retained.remove(head)
            ordered.remove(head)
            removeFromEntries(head.key)
            detach(head)
        }
        didChangeCount()
    }

    // MARK: - Observation

    // Observation keeps tracked properties per registrar and key path, so the key paths are
    // rooted at a non-generic type (``StoreObservationKey``) and built once: a key path literal
    // rooted at this generic class would be built again at every read and change.

    private func access(_ keyPath: KeyPath<StoreObservationKey, Int>) {
        ObservationState.made(in: &observation).registrar.access(StoreObservationKey(), keyPath: keyPath)
    }

    @usableFromInline
    func willChangeCount() {
        observation?.registrar.willSet(StoreObservationKey(), keyPath: StoreObservationKey.count)
    }

    @usableFromInline
    func didChangeCount() {
        observation?.registrar.didSet(StoreObservationKey(), keyPath: StoreObservationKey.count)
    }
}

/// The properties Observation tracks for every store, ``LoadableStore/count`` and
/// ``LoadableStore/syncingCount``, as key paths rooted at a non-generic type and built once.
/// Observation never uses the subject instance, only the registrar (each store has its own) and
/// the key path.
private struct StoreObservationKey: Observable {
    var count: Int { 0 }
    var syncingCount: Int { 0 }

    /// `\.count`, built once.
    @MainActor static let count: KeyPath<StoreObservationKey, Int> = \.count
    /// `\.syncingCount`, built once.
    @MainActor static let syncingCount: KeyPath<StoreObservationKey, Int> = \.syncingCount
}

extension LoadableStore {
    /// Creates an empty store whose entries keep their contents in `cache`: each entry's loadable
    /// is persisted under `cacheKey(key)` when it is made, as by
    /// `Loadable.persist(in:key:version:maxRestoreAge:encoder:decoder:now:onError:)`, for as long
    /// as it is an entry. An entry made again for a key (after its expiry, or at the next launch)
    /// so starts with the contents its key had last.
    ///
    /// ``removeAll()`` clears the cache too (logout), and ``remove(_:)`` removes the key's cached
    /// entry.
    ///
    /// ```swift
    /// let posts = LoadableStore<Post.ID, PostLoadable>(
    ///     cache: FileLoadableCache(directory: postsDirectory), cacheKey: { "post-\($0)" }
    /// ) { id in PostLoadable(id: id, api: api) }
    /// ```
    ///
    /// - Parameters:
    ///   - retention: How long an entry is kept after its last lease ended.
    ///   - maxRetained: How many entries without leases are kept at most.
    ///   - clock: The clock retention (and the entries' ages) run on.
    ///   - cache: Where the entries' contents are kept. The store owns it: its ``removeAll()``
    ///     clears the whole cache, entries of earlier launches included. Stores that share one
    ///     cache each take a scope of it (`cache.scoped("posts/")`); giving a cache (or a scope)
    ///     that a live store already has, or a scope that overlaps another store's, stops the
    ///     program with a message naming `scoped(_:)`.
    ///   - cacheKey: The cache key of an entry's key. Different keys must give different cache
    ///     keys.
    ///   - version: The version of the contents' encoding.
    ///   - maxRestoreAge: Entries saved longer ago than this are not restored; `nil` restores any
    ///     age, and any length up to `.seconds(Int64.max)` is valid. Negative stops the program.
    ///   - encoder: Encodes the contents.
    ///   - decoder: Decodes the contents.
    ///   - now: The wall-clock time; by default the system's.
    ///   - onError: Told of each failure to restore, save or remove, with a `LoadableCacheError`
    ///     that names the cache key.
    ///   - make: Makes the loadable of a key (see ``init(retention:maxRetained:clock:make:)``).
    public convenience init<Contents: Codable & Sendable>(
        retention: Duration = .seconds(300),
        maxRetained: Int? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        cache: any LoadableCache,
        cacheKey: @escaping @MainActor (Key) -> String,
        version: Int = 1,
        maxRestoreAge: Duration? = nil,
        encoder: JSONEncoder = JSONEncoder(),
        decoder: JSONDecoder = JSONDecoder(),
        now: @escaping @Sendable () -> Date = { Date.now },
        onError: (@MainActor (any Error) -> Void)? = nil,
        make: @escaping @MainActor (Key) -> Value
    ) where Value: Loadable<Contents> {
        requireValidMaxRestoreAge(maxRestoreAge, in: "LoadableStore")
        self.init(retention: retention, maxRetained: maxRetained, clock: clock, make: make)
        CacheClaims.claim(cache, for: self)
        let persistence = StorePersistence<Key, Value>(cache: cache, cacheKey: cacheKey, onError: onError)
        persistence.persist = { [weak persistence] value, cacheKey in
            value.persist(
                in: cache, key: cacheKey, version: version, maxRestoreAge: maxRestoreAge, encoder: encoder,
                decoder: decoder, now: now, onError: { error in persistence?.onError?(error) })
        }
        persistence.restored = { value in
            await value.core.subscriber(LoadablePersistence.self)?.restored()
        }
        self.persistence = persistence
    }

    /// Told of each failure to restore, save or remove an entry of the store's cache, with a
    /// `LoadableCacheError` that names the cache key; the store and its entries carry on either
    /// way. Set at init (`onError:`) or later; setting it reaches the entries already made. A
    /// store without a cache ignores it (and reads `nil`).
    public var onError: (@MainActor (any Error) -> Void)? {
        get { persistence?.onError }
        set { persistence?.onError = newValue }
    }

    /// Told of each failure of the store's cache: ``onError``'s former name.
    @available(*, deprecated, renamed: "onError")
    public var onCacheError: (@MainActor (any Error) -> Void)? {
        get { onError }
        set { onError = newValue }
    }

    /// Waits until every read and write asked of the store's cache so far is done: the entries'
    /// restores and saves, a ``remove(_:)``'s or a ``removeAll()``'s (a failed one included,
    /// which ``onError`` was told of). Returns at once for a store without a cache.
    public func saved() async {
        guard let cache = persistence?.cache else { return }
        await CacheQueue.flush(cache)
    }

    /// Waits until every read and write asked of the store's cache so far is done: ``saved()``'s
    /// former name.
    @available(*, deprecated, renamed: "saved()")
    public func flush() async {
        await saved()
    }

    /// Waits until the restore of every entry the store has now has finished (see
    /// ``restored(_:)``). Returns at once for a store without a cache.
    public func restored() async {
        guard let persistence else { return }
        for entry in orderedEntries(where: { _ in true }) {
            await persistence.restored?(entry.value)
        }
    }

    /// Waits until the restore of `key`'s entry has finished: its cached contents are on the
    /// entry, or there were none to restore (see `LoadablePersistence.restored()`). Returns at
    /// once when the store has no entry for `key` (lease it first), or no cache.
    ///
    /// A screen leases its key, then awaits this before its first frame, so that it shows the
    /// contents of the last launch instead of a spinner:
    ///
    /// ```swift
    /// let post = posts.lease(id)
    /// await posts.restored(id)
    /// post.syncIfNeeded()
    /// ```
    ///
    /// - Parameter key: The key of the entry.
    public func restored(_ key: Key) async {
        guard let persistence, let entry = entries[key] else { return }
        await persistence.restored?(entry.value)
    }

    /// Writes the contents of `key`'s entry without a sync (see `PushLoadable.setContents(_:)`),
    /// making a retained entry when there is none: after an action whose answer is the new
    /// contents, the next screen shows them at once. (A new entry has never synced, so a screen's
    /// `syncIfNeeded()` still confirms it, with the contents on screen.)
    ///
    /// A store that keeps nothing unleased (``retention`` `.zero` or ``maxRetained`` 0) makes no
    /// entry for this: it would be dropped at once.
    ///
    /// - Parameters:
    ///   - contents: The new contents.
    ///   - key: The key of the entry.
    public func setContents<Contents>(_ contents: Contents, for key: Key) where Value: PushLoadable<Contents> {
        if let entry = entries[key] {
            entry.value.setContents(contents)
            return
        }
        guard retentionBound > .zero, maxRetained != 0 else { return }
        let entry = makeEntry(for: key)
        entry.value.setContents(contents)
        // `setContents` notifies: an observer may have leased the new entry meanwhile.
        if entry.isInStore, entry.leaseCount == 0, !entry.isRetained { entryIsUnused(entry) }
    }

    /// Changes the contents of `key`'s entry in place without a sync (see
    /// `PushLoadable.updateContents(_:)`); does nothing when there is no entry, or when it has no
    /// contents.
    ///
    /// - Parameters:
    ///   - key: The key of the entry.
    ///   - body: Changes the contents.
    public func updateContents<Contents>(for key: Key, _ body: (inout Contents) -> Void)
    where Value: PushLoadable<Contents> {
        entries[key]?.value.updateContents(body)
    }
}

/// How a store persists its entries: what its init with a cache was given.
@MainActor
final class StorePersistence<Key: Hashable & Sendable, Value: SyncableLoadable> {
    let cache: any LoadableCache
    let cacheKey: @MainActor (Key) -> String
    /// The store's `onError`; the entries' persistences call it through this object, so that
    /// setting it reaches them.
    var onError: (@MainActor (any Error) -> Void)?
    /// Persists a loadable under a cache key, as the store's init was told to.
    var persist: (@MainActor (Value, String) -> Void)?
    /// Waits for the restore of a loadable persisted by ``persist``.
    var restored: (@MainActor (Value) async -> Void)?

    init(
        cache: any LoadableCache, cacheKey: @escaping @MainActor (Key) -> String,
        onError: (@MainActor (any Error) -> Void)?
    ) {
        self.cache = cache
        self.cacheKey = cacheKey
        self.onError = onError
    }

    /// Persists a new entry's loadable.
    func persist(_ value: Value, key: Key) {
        persist?(value, cacheKey(key))
    }

    /// Queues the removal of `key`'s cached entry.
    func removeCachedEntry(of key: Key) {
        let cacheKey = cacheKey(key)
        let cache = cache
        CacheQueue.enqueue(in: cache, key: cacheKey) {
            do {
                try await cache.remove(key: cacheKey)
                return nil
            } catch {
                let failure = LoadableCacheError(error, in: .remove, key: cacheKey)
                return { self.onError?(failure) }
            }
        }
    }

    /// Queues the clearing of the cache.
    func removeAllCachedEntries() {
        let cache = cache
        CacheQueue.enqueue(in: cache, key: nil) {
            do {
                try await cache.removeAll()
                return nil
            } catch {
                let failure = LoadableCacheError(error, in: .removeAll, key: "")
                return { self.onError?(failure) }
            }
        }
    }
}
