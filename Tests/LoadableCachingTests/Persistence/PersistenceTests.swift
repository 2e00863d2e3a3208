import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableTestSupport
import LoadableTesting
import Testing

// MARK: - Restore

/// A restore sets the contents of an entry of the same version, young enough, without changing
/// the state, with one notification, and with the entry's real age; too old an entry is left
/// alone.
@Suite("Persistence: restore")
@MainActor
struct PersistenceRestoreTests {
    @Test(
        "a young entry of the same version sets the contents and the age, leaves the state, notifies once",
        arguments: StateAtRestore.allCases)
    func restores(state: StateAtRestore) async throws {
        let clock = ManualClock()
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-30))])
        let loadable = PersistedLoadable<Int>(clock: clock)
        state.apply(to: loadable)
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(loadable.contents == nil)
        await persistence.saved()

        #expect(loadable.contents == 7)
        #expect(loadable.loadableState == state.state)
        #expect(recorder.states == [state.state])
        if state == .failed {
            #expect((loadable.error as? TestError) == TestError("offline"))
        } else {
            #expect(loadable.error == nil)
        }
        #expect(loadable.doSyncCount == (state == .idle ? 0 : 1))
        #expect(loadable.age == .seconds(30))
        await clock.advance(by: .seconds(10))
        #expect(loadable.age == .seconds(40))
        // The restore itself is not saved.
        #expect(await cache.operations == [.load])
        #expect(await cache.keys == ["k"])
    }

    @Test(
        "with maxAge, the restored contents are stale when the entry is older than it (equal is stale)",
        arguments: zip([90.0, 60, 59, 30], [true, true, false, false]))
    func restoredContentsJudgedByMaxAge(savedSecondsAgo: Double, isStale: Bool) async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-savedSecondsAgo))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        loadable.maxAge = .seconds(60)
        await loadable.persist(in: cache, key: "k", now: wall.function).saved()
        #expect(loadable.contents == 7)
        #expect(loadable.isStale == isStale)
        #expect(loadable.needsSync)  // idle: a restore never stands for a sync
    }

    @Test(
        "maxRestoreAge: an entry exactly that old is restored, one 1 ms older is not (no error, entry left)",
        arguments: zip([60.0, 60.001, 0], [60.0, 60, 0]))
    func maxRestoreAgeBoundary(savedSecondsAgo: Double, maxRestoreAgeSeconds: Double) async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-savedSecondsAgo))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", maxRestoreAge: .seconds(maxRestoreAgeSeconds), now: wall.function,
            onError: log.handler)
        await persistence.saved()
        let restores = savedSecondsAgo <= maxRestoreAgeSeconds
        #expect(loadable.contents == (restores ? 7 : nil))
        #expect(recorder.count == (restores ? 1 : 0))
        #expect(loadable.age == (restores ? .seconds(savedSecondsAgo) : nil))
        #expect(log.errors.isEmpty)
        #expect(await cache.operations == [.load])
        #expect(await cache.keys == ["k"])
        #expect(!persistence.isRestoring)
    }

    @Test("no maxRestoreAge: an entry of any age is restored")
    func noMaxRestoreAge() async throws {
        let wall = PersistenceWallClock()
        let tenYears: Double = 10 * 365 * 24 * 3600
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-tenYears))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        await loadable.persist(in: cache, key: "k", now: wall.function).saved()
        #expect(loadable.contents == 7)
        #expect(loadable.age == .seconds(tenYears))
    }

    @Test(
        "an entry saved longer ago than Duration counts in nanoseconds has a large positive age, also later",
        arguments: [
            Date.distantPast, PersistenceWallClock.start - 1e10, PersistenceWallClock.start - 1e12,
        ])
    func restoredFromBeforeTheClockCounts(savedAt: Date) async throws {
        let clock = ManualClock()
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: savedAt)])
        let loadable = PersistedLoadable<Int>(clock: clock)
        loadable.maxAge = .seconds(3600)
        await loadable.persist(in: cache, key: "k", now: wall.function).saved()
        #expect(loadable.contents == 7)
        let centuries = Duration.seconds(200 * 365 * 24 * 3600)
        let restoredAge = try #require(loadable.age)
        #expect(restoredAge > centuries)
        await clock.advance(by: .seconds(1))
        let laterAge = try #require(loadable.age)
        #expect(laterAge >= restoredAge, "the age went from \(restoredAge) to \(laterAge)")
        #expect(loadable.isStale)
    }

    @Test("an entry saved in the future (the wall clock went back) is restored with age zero")
    func savedInTheFuture() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(100))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        loadable.maxAge = .seconds(60)
        await loadable.persist(in: cache, key: "k", maxRestoreAge: .seconds(1), now: wall.function).saved()
        #expect(loadable.contents == 7)
        #expect(loadable.age == .zero)
        #expect(!loadable.isStale)
    }

    @Test("no entry: nothing changes, no notification, no error")
    func noEntry() async {
        let cache = ScriptedPersistenceCache()
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", now: PersistenceWallClock().function, onError: log.handler)
        await persistence.saved()
        #expect(loadable.contents == nil)
        #expect(loadable.age == nil)
        #expect(recorder.count == 0)
        #expect(log.errors.isEmpty)
        #expect(await cache.operations == [.load])
    }

    @Test("isRestoring is true until the restore finished, then false")
    func isRestoring() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(persistence.isRestoring)
        try #require(await waitUntilHeld(cache))
        #expect(persistence.isRestoring)
        #expect(loadable.contents == nil)
        await cache.releaseAll()
        await persistence.saved()
        #expect(!persistence.isRestoring)
        #expect(loadable.contents == 7)
    }
}

// MARK: - Restore races

/// A restore never takes contents backwards and never holds anything up: it is dropped when the
/// contents were confirmed before it landed, or when it was stopped, or when the loadable is gone;
/// a failure or a sync meanwhile does not stop it.
@Suite("Persistence: a restore racing with changes")
@MainActor
struct PersistenceRestoreRaceTests {
    @Test(
        "a confirmation while the load is held wins: the restore is dropped, no extra notification",
        arguments: ContentsConfirmation.allCases)
    func confirmationWins(confirmation: ContentsConfirmation) async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.at(-5))])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(contents: 1, clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        confirmation.apply(to: loadable)
        let notifications = recorder.count
        #expect(notifications >= 1)
        await cache.releaseAll()
        await persistence.saved()

        #expect(loadable.contents == confirmation.expected)
        #expect(recorder.count == notifications)
        #expect(loadable.age == .zero)  // confirmed now, not 5 s ago
        #expect(!persistence.isRestoring)
        // The confirmation was saved, after the restore read the entry.
        #expect(await cache.operations == [.load, .save])
        #expect(persistedInt(await cache.entry("k")) == confirmation.expected)
    }

    @Test("a failed sync while the load is held does not stop the restore; the state stays failed")
    func failureDoesNotStopRestore() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.at(-5))])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        loadable.sync()
        loadable.setDidFailToSync(TestError("offline"))
        await cache.releaseAll()
        await persistence.saved()

        #expect(loadable.contents == 100)
        #expect(loadable.loadableState == .didFailToSync)
        #expect((loadable.error as? TestError) == TestError("offline"))
        #expect(recorder.states == [.syncing, .didFailToSync, .didFailToSync])
        #expect(loadable.age == .seconds(5))
        #expect(await cache.operations == [.load])  // nothing saved
    }

    @Test("a sync asked for during the restore starts at once; the restore lands while it runs")
    func syncStartsAtOnce() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.at(-5))])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 1)
        #expect(loadable.loadableState == .syncing)
        #expect(await cache.heldCalls.map(\.operation) == [.load])  // the load is still held
        await cache.releaseAll()
        await persistence.saved()

        #expect(loadable.contents == 100)
        #expect(loadable.loadableState == .syncing)
        #expect(recorder.states == [.syncing, .syncing])
        #expect(loadable.doSyncCount == 1)
        loadable.setDidSyncSuccessfully(3)
        await persistence.saved()
        #expect(persistedInt(await cache.entry("k")) == 3)
    }

    @Test("a restore still held when stop() is called is dropped; later changes are not saved")
    func stopDropsRestore() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.now)])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        persistence.stop()
        #expect(persistence.isStopped)
        await cache.releaseAll()
        await persistence.saved()

        #expect(loadable.contents == nil)
        #expect(recorder.count == 0)
        #expect(!persistence.isRestoring)
        loadable.setContents(5)
        await persistence.saved()
        #expect(await cache.operations == [.load])
        #expect(persistedInt(await cache.entry("k")) == 100)
    }

    @Test("a loadable released before its restore lands: nothing happens, nothing leaks")
    func releasedBeforeRestoreLands() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.now)])
        await cache.hold(.load)
        var loadable: PersistedLoadable<Int>? = PersistedLoadable(clock: ManualClock())
        weak let weakLoadable = loadable
        var handle = loadable?.persist(in: cache, key: "k", now: wall.function)
        weak let weakPersistence = handle
        try #require(await waitUntilHeld(cache))
        loadable = nil
        #expect(weakLoadable == nil)  // the persistence holds its loadable weakly
        await cache.releaseAll()
        await handle?.saved()
        #expect(handle?.isRestoring == false)
        handle = nil
        #expect(weakPersistence == nil)
        #expect(await cache.operations == [.load])
        #expect(await cache.keys == ["k"])
    }

    @Test("the loadable owns its persistence: both go at the loadable's release, before the restore lands")
    func persistenceGoesWithLoadable() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.now)])
        await cache.hold(.load)
        var loadable: PersistedLoadable<Int>? = PersistedLoadable(clock: ManualClock())
        weak let weakLoadable = loadable
        weak let weakPersistence = loadable?.persist(in: cache, key: "k", now: wall.function)
        #expect(weakPersistence != nil)  // alive while the loadable is
        try #require(await waitUntilHeld(cache))
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(weakPersistence == nil)
        await cache.releaseAll()
        // Another loadable's restore of the same cache runs after the dropped one.
        let next = PersistedLoadable<Int>(clock: ManualClock())
        await next.persist(in: cache, key: "k", now: wall.function).saved()
        #expect(next.contents == 100)
        #expect(await cache.operations == [.load, .load])
    }

    @Test("a restore onto a loadable that was persisted, restored and persisted again is dropped")
    func secondRestoreOfSameLoadableIsDropped() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: [
            "a": try persistedEntry(1, savedAt: wall.now), "b": try persistedEntry(2, savedAt: wall.now),
        ])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        await loadable.persist(in: cache, key: "a", now: wall.function).saved()
        #expect(loadable.contents == 1)
        await loadable.persist(in: cache, key: "b", now: wall.function).saved()
        #expect(loadable.contents == 1)
        #expect(recorder.count == 1)
    }
}
