import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

// MARK: - Bad input and failures

/// An entry that cannot be used is removed and reported once, naming the key; a save that fails
/// is reported once per failure; the loadable's state never changes because of either, and it
/// keeps working.
@Suite("Persistence: errors")
@MainActor
struct PersistenceErrorTests {
    @Test("an entry of another version is removed and reported once; the loadable keeps working")
    func versionMismatch() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now, version: 1)])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", version: 2, now: wall.function, onError: log.handler)
        await persistence.saved()

        #expect(log.summaries == ["versionMismatch k"])
        let error = try #require(log.errors.first as? LoadableCacheError)
        guard case .versionMismatch(let key, let found, let expected) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(key == "k")
        #expect(found == 1)
        #expect(expected == 2)
        #expect(error.description.contains("\"k\""))
        #expect(await cache.keys.isEmpty)
        #expect(await cache.operations == [.load, .remove])
        #expect(loadable.contents == nil)
        #expect(loadable.loadableState == .idle)
        #expect(recorder.count == 0)

        loadable.sync()
        loadable.setDidSyncSuccessfully(8)
        await persistence.saved()
        let entry = try #require(await cache.entry("k"))
        #expect(persistedInt(entry) == 8)
        #expect(entry.version == 2)
        #expect(log.errors.count == 1)
    }

    @Test("an entry that is not JSON of the contents is removed and reported as decodingFailed")
    func undecodable() async {
        let wall = PersistenceWallClock()
        let garbage = CachedEntry(data: Data("not json".utf8), savedAt: wall.now, version: 1)
        let cache = ScriptedPersistenceCache(entries: ["k": garbage])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        await loadable.persist(in: cache, key: "k", now: wall.function, onError: log.handler).saved()
        #expect(log.summaries == ["decodingFailed k"])
        #expect(await cache.keys.isEmpty)
        #expect(loadable.contents == nil)
        #expect(loadable.loadableState == .idle)
        #expect(recorder.count == 0)
    }

    @Test(
        "a load that throws: a corrupt entry is removed; any other failure (a read error, loadFailed) is reported and the entry kept"
    )
    func loadThrows() async throws {
        let wall = PersistenceWallClock()
        for (thrown, summary, isRemoved) in [
            (TestError("disk") as any Error, "loadFailed k", false),
            (
                LoadableCacheError.loadFailed(key: "k", underlying: TestError("disk")) as any Error, "loadFailed k",
                false
            ),
            (LoadableCacheError.corrupt(key: "k", reason: "cut short") as any Error, "corrupt k", true),
        ] {
            let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
            await cache.fail(.load, with: thrown)
            let loadable = PersistedLoadable<Int>(clock: ManualClock())
            loadable.sync()
            let log = PersistenceErrorLog()
            await loadable.persist(in: cache, key: "k", now: wall.function, onError: log.handler).saved()
            #expect(log.summaries == [summary])
            if case .loadFailed(_, let underlying) = log.errors.first as? LoadableCacheError {
                #expect((underlying as? TestError) == TestError("disk"))
            }
            #expect(await cache.operations == (isRemoved ? [.load, .remove] : [.load]))
            #expect(await cache.keys == (isRemoved ? [] : ["k"]))
            #expect(loadable.loadableState == .syncing)
            #expect(loadable.contents == nil)
        }
    }

    @Test("a save that throws is reported once per failing save; the previous entry and the state stay")
    func saveThrows() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function, onError: log.handler)
        await persistence.saved()
        await cache.fail(.save, with: TestError("disk full"))
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        await persistence.saved()
        #expect(log.summaries == ["saveFailed k"])
        loadable.setContents(2)
        await persistence.saved()
        #expect(log.summaries == ["saveFailed k", "saveFailed k"])
        if case .saveFailed(_, let underlying) = log.errors.first as? LoadableCacheError {
            #expect((underlying as? TestError) == TestError("disk full"))
        } else {
            Issue.record("not saveFailed: \(log.summaries)")
        }
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.error == nil)
        #expect(loadable.contents == 2)
        #expect(persistedInt(await cache.entry("k")) == 7)

        await cache.fail(.save, with: nil)
        loadable.setContents(3)
        await persistence.saved()
        #expect(persistedInt(await cache.entry("k")) == 3)
        #expect(log.errors.count == 2)
    }

    @Test("contents that cannot be encoded: encodingFailed, nothing saved, the state stays")
    func encodingThrows() async {
        let cache = ScriptedPersistenceCache()
        let loadable = PersistedLoadable<Unencodable>(clock: ManualClock())
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", now: PersistenceWallClock().function, onError: log.handler)
        loadable.sync()
        loadable.setDidSyncSuccessfully(Unencodable(value: 1))
        await persistence.saved()
        #expect(log.summaries == ["encodingFailed k"])
        #expect(await cache.operations == [.load])
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.contents == Unencodable(value: 1))
    }

    @Test("onError can be set on the handle after persist")
    func onErrorSetLater() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now, version: 5)])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(persistence.onError == nil)
        let log = PersistenceErrorLog()
        persistence.onError = log.handler
        await persistence.saved()
        #expect(log.summaries == ["versionMismatch k"])
    }

    @Test("persist twice: the first stops, the second saves")
    func persistTwice() async {
        let cache = ScriptedPersistenceCache()
        let wall = PersistenceWallClock()
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let first = loadable.persist(in: cache, key: "first", now: wall.function)
        let second = loadable.persist(in: cache, key: "second", now: wall.function)
        #expect(first.isStopped)
        #expect(!second.isStopped)
        #expect(first.key == "first")
        #expect(second.key == "second")
        #expect(second.cache === cache)
        loadable.setContents(4)
        await second.saved()
        #expect(await cache.keys == ["second"])
        #expect(await cache.savedInts("second") == [4])
        #expect(await cache.savedInts("first").isEmpty)
    }
}

// MARK: - Releases during the work

/// A loadable released by an observer of its restore, or on another thread with a save pending,
/// goes without a crash; the save still lands.
@Suite("Persistence: releases during the work")
@MainActor
struct PersistenceReleaseTests {
    @Test("an observer that releases the loadable on the restore's notification")
    func releasedByRestoreObserver() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
        let holder = Holder()
        holder.loadable = PersistedLoadable(clock: ManualClock())
        weak let weakLoadable = holder.loadable
        let observation = holder.loadable?.addObserver { [weak holder] loadable in
            holder?.seen.append((loadable as? PersistedLoadable<Int>)?.contents)
            holder?.loadable = nil
        }
        let persistence = try #require(holder.loadable?.persist(in: cache, key: "k", now: wall.function))
        #expect(weakLoadable != nil)
        await persistence.saved()
        #expect(holder.seen == [7])
        #expect(weakLoadable == nil)
        #expect(observation?.isActive == false)
    }

    @Test("a loadable released on another thread with a save held: the save still lands")
    func releasedOnAnotherThreadWithPendingSave() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let box = Locked<PersistedLoadable<Int>?>(PersistedLoadable(clock: ManualClock()))
        weak let weakLoadable = box.withLock { $0 }
        let persistence = try #require(box.withLock { $0?.persist(in: cache, key: "k", now: wall.function) })
        box.withLock { $0?.setContents(1) }
        try #require(await waitUntilHeld(cache))
        box.withLock { $0?.setContents(2) }  // waiting behind the held save
        releaseOnAnotherThread(box)
        #expect(weakLoadable == nil)
        await cache.releaseAll()
        await persistence.saved()
        #expect(await cache.savedInts("k") == [1, 2])
        #expect(persistedInt(await cache.entry("k")) == 2)
    }
}
