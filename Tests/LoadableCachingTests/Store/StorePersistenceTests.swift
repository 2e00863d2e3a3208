import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableTestSupport
import LoadableTesting
import Testing

private typealias PersistedStore = LoadableStore<Int, PersistedLoadable<Int>>

/// A store of `PersistedLoadable<Int>` on `clock`, persisted in `cache` under `"post-<key>"`.
@MainActor
private func persistedStore(
    cache: any LoadableCache,
    clock: ManualClock = ManualClock(),
    wall: PersistenceWallClock = PersistenceWallClock(),
    retention: Duration = .seconds(10),
    version: Int = 1,
    maxRestoreAge: Duration? = nil,
    log: PersistenceErrorLog? = nil
) -> PersistedStore {
    LoadableStore(
        retention: retention, clock: clock, cache: cache, cacheKey: { "post-\($0)" }, version: version,
        maxRestoreAge: maxRestoreAge, now: wall.function, onError: log?.handler
    ) { _ in PersistedLoadable(clock: clock) }
}

/// The persistence of `loadable`, if it has one (its core owns it).
@MainActor
private func persistence(of loadable: PersistedLoadable<Int>) -> LoadablePersistence? {
    loadable.core.subscriber(LoadablePersistence.self)
}

/// How an entry leaves a store.
enum StoreDeparture: String, CaseIterable, Sendable {
    case expiry, remove, removeAll
}

/// A store made with a cache persists each entry under `cacheKey(key)` while it is an entry:
/// a new entry restores, its changes are saved, `remove` and `removeAll` clear the cache (after
/// the saves asked for before), and a loadable that left the store saves nothing more.
@Suite("LoadableStore with a cache")
@MainActor
struct StorePersistenceTests {
    @Test("a new entry restores its cached contents; it stays idle, so syncIfNeeded still syncs")
    func newEntryRestores() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["post-1": try persistedEntry(10, savedAt: wall.at(-20))])
        let store = persistedStore(cache: cache, wall: wall)
        let lease = store.lease(1)
        #expect(lease.contents == nil)
        await store.saved()
        #expect(lease.contents == 10)
        #expect(lease.loadableState == .idle)
        #expect(lease.loadable.age == .seconds(20))
        #expect(lease.needsSync)
        #expect(await cache.calls.map(\.description) == ["load(post-1)"])
        lease.syncIfNeeded()
        #expect(lease.loadable.doSyncCount == 1)
    }

    @Test("the store's version and maxRestoreAge apply to its entries")
    func versionAndMaxRestoreAge() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: [
            "post-1": try persistedEntry(1, savedAt: wall.at(-10), version: 2),
            "post-2": try persistedEntry(2, savedAt: wall.at(-100), version: 2),
            "post-3": try persistedEntry(3, savedAt: wall.at(-10), version: 1),
        ])
        let log = PersistenceErrorLog()
        let store = persistedStore(cache: cache, wall: wall, version: 2, maxRestoreAge: .seconds(60), log: log)
        let leases = [store.lease(1), store.lease(2), store.lease(3)]
        await store.saved()
        #expect(leases.map(\.contents) == [1, nil, nil])
        #expect(log.summaries == ["versionMismatch post-3"])
        #expect(await cache.keys == ["post-1", "post-2"])
    }

    @Test("an entry's sync is saved under cacheKey(key)")
    func syncSavesUnderCacheKey() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        let store = persistedStore(cache: cache, wall: wall)
        let lease = store.lease(2)
        lease.sync()
        lease.loadable.setDidSyncSuccessfully(20)
        await store.saved()
        #expect(await cache.keys == ["post-2"])
        let entry = try #require(await cache.entry("post-2"))
        #expect(persistedInt(entry) == 20)
        #expect(entry.savedAt == wall.now)
        #expect(await cache.calls.map(\.description).first == "load(post-2)")
    }

    @Test("an entry that expired and is leased again starts from its saved contents")
    func expiredEntryStartsFromSavedContents() async throws {
        let clock = ManualClock()
        let cache = InMemoryLoadableCache()
        let store = persistedStore(cache: cache, clock: clock, retention: .seconds(10))
        var lease: LoadableLease<PersistedLoadable<Int>>? = store.lease(3)
        weak let first = lease?.loadable
        lease?.sync()
        lease?.loadable.setDidSyncSuccessfully(30)
        lease?.release()
        lease = nil
        #expect(await settle { clock.pendingSleepCount >= 1 })
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(first == nil)

        let again = store.lease(3)
        #expect(again.contents == nil)
        await store.saved()
        #expect(again.contents == 30)
        #expect(again.loadableState == .idle)
    }

    @Test("remove(key) removes the cached entry, also when the store has no entry for the key")
    func removeWithoutEntry() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: [
            "post-1": try persistedEntry(1, savedAt: wall.now), "post-2": try persistedEntry(2, savedAt: wall.now),
        ])
        let store = persistedStore(cache: cache, wall: wall)
        store.remove(1)
        await store.saved()
        #expect(await cache.keys == ["post-2"])
        #expect(await cache.calls.map(\.description) == ["remove(post-1)"])
    }

    @Test(
        "remove(key) of an entry removes its cached entry after the save asked for before; the loadable saves no more")
    func removeWithEntry() async throws {
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let store = persistedStore(cache: cache)
        let lease = store.lease(1)
        lease.loadable.setContents(5)
        try #require(await waitUntilHeld(cache))
        store.remove(1)
        #expect(store.count == 0)
        await cache.releaseAll()
        await store.saved()
        #expect(await cache.keys.isEmpty)
        #expect(await cache.operations == [.load, .save, .remove])
        lease.loadable.setContents(6)
        await store.saved()
        #expect(await cache.operations == [.load, .save, .remove])
        #expect(await cache.keys.isEmpty)
    }

    @Test("removeAll() clears the cache after the saves asked for before; leases still alive save no more")
    func removeAllAfterPendingSaves() async throws {
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let store = persistedStore(cache: cache)
        let first = store.lease(1)
        let second = store.lease(2)
        first.loadable.setContents(1)
        try #require(await waitUntilHeld(cache))
        second.loadable.setContents(2)
        store.removeAll()
        await cache.releaseAll()
        await store.saved()
        #expect(await cache.keys.isEmpty)
        #expect(
            await cache.calls.map(\.description.prefixBeforeSpace) == [
                "load(post-1)", "load(post-2)", "save(post-1)", "save(post-2)", "removeAll()",
            ])

        first.loadable.setContents(3)
        second.sync()
        second.loadable.setDidSyncSuccessfully(4)
        await store.saved()
        #expect(await cache.keys.isEmpty)
        #expect(await cache.completedSaveCount == 2)
    }

    @Test("logout: removeAll() leaves nothing in the cache, also entries the store never made")
    func logoutLeavesNothing() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: [
            "post-7": try persistedEntry(7, savedAt: wall.now), "other": try persistedEntry(0, savedAt: wall.now),
        ])
        let store = persistedStore(cache: cache, wall: wall)
        let lease = store.lease(1)
        lease.loadable.setContents(1)
        store.setContents(2, for: 2)
        store.removeAll()
        await store.saved()
        #expect(await cache.keys.isEmpty)
        #expect(store.count == 0)
    }

    @Test("setContents(_:for:) on a new entry saves, and the entry's older cached contents do not come back")
    func setContentsOnNewEntrySaves() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["post-4": try persistedEntry(1, savedAt: wall.at(-50))])
        let store = persistedStore(cache: cache, wall: wall)
        store.setContents(3, for: 4)
        await store.saved()
        let entry = try #require(await cache.entry("post-4"))
        #expect(persistedInt(entry) == 3)
        #expect(entry.savedAt == wall.now)
        #expect(store.peek(4)?.contents == 3)
        #expect(await cache.operations == [.load, .save])
    }

    @Test("an entry's persistence stops when the entry leaves the store", arguments: StoreDeparture.allCases)
    func persistenceStopsWhenEntryLeaves(departure: StoreDeparture) async throws {
        let clock = ManualClock()
        let cache = ScriptedPersistenceCache()
        let store = persistedStore(cache: cache, clock: clock, retention: .seconds(10))
        let lease = store.lease(1)
        let loadable = lease.loadable
        let handle = try #require(persistence(of: loadable))
        #expect(handle.key == "post-1")
        #expect(!handle.isStopped)
        loadable.setContents(1)
        await store.saved()
        #expect(await cache.completedSaveCount == 1)
        switch departure {
        case .expiry:
            lease.release()
            #expect(await settle { clock.pendingSleepCount >= 1 })
            await clock.advance(by: .seconds(10))
        case .remove: store.remove(1)
        case .removeAll: store.removeAll()
        }
        #expect(store.peek(1) == nil)
        #expect(handle.isStopped)
        #expect(persistence(of: loadable) == nil)
        loadable.setContents(2)
        await store.saved()
        #expect(await cache.completedSaveCount == 1)
        #expect(await cache.savedInts("post-1") == [1])
    }

    @Test("saved() of a store without a cache returns", .timeLimit(.minutes(5)))
    func savedWithoutCache() async {
        let store = LoadableStore<Int, PersistedLoadable<Int>>(clock: ManualClock()) { _ in PersistedLoadable() }
        let lease = store.lease(1)
        lease.loadable.setContents(1)
        await store.saved()
        #expect(persistence(of: lease.loadable) == nil)
    }

    @Test("onError receives every failure, naming the cache key")
    func onErrorNamesCacheKey() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["post-1": try persistedEntry(1, savedAt: wall.now, version: 9)])
        let log = PersistenceErrorLog()
        let store = persistedStore(cache: cache, wall: wall, log: log)
        let first = store.lease(1)
        await store.saved()
        #expect(log.summaries == ["versionMismatch post-1"])

        await cache.fail(.save, with: TestError("full"))
        first.loadable.setContents(1)
        await store.saved()
        await cache.fail(.remove, with: TestError("locked"))
        store.remove(2)
        await store.saved()
        await cache.fail(.removeAll, with: TestError("locked"))
        store.removeAll()
        await store.saved()
        #expect(
            log.summaries == [
                "versionMismatch post-1", "saveFailed post-1", "removeFailed post-2", "removeAllFailed -",
            ])
        for error in log.errors.dropLast() {
            #expect("\(error)".contains("\"post-"))
        }
    }
}

extension String {
    /// The text before the first space (all of it when there is none).
    fileprivate var prefixBeforeSpace: String { String(prefix { $0 != " " }) }
}
