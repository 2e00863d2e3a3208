import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableTestSupport
import LoadableTesting
import Testing

/// A persisted loadable that keeps strings beside its contents, as an HTTP loadable keeps its
/// validators: its loads return them with the contents (a `LoadResult`'s metadata).
/// (Changed with issue 45: metadata is a value that travels with the contents, no longer a
/// protocol the loadable conforms to; the rules tested are the same.)
@MainActor
private func taggedLoadable(_ contents: Int, tag: String) -> AsyncLoadable<Int> {
    AsyncLoadable<Int>(clock: ManualClock(), loadResult: { .loaded(contents, metadata: ["tag": tag]) })
}

/// `LoadablePersistence.restored()` and `LoadableStore.restored(_:)`: one restore awaited, so a
/// first frame can show the last launch's contents; metadata kept with the contents; a store's
/// `onError` set after its entries were made.
@Suite("Persistence: restored(), metadata, onError")
@MainActor
struct PersistenceRestoredTests {
    @Test("restored() returns once the held restore has set the contents, and at once after that")
    func restoredWaitsForTheRestore() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(await waitUntilHeld(cache))
        let waits = (0..<3).map { _ in Task { await persistence.restored() } }
        await letCacheRun(cache)
        #expect(persistence.isRestoring)
        await cache.releaseAll()
        for wait in waits { await wait.value }
        #expect(loadable.contents == 7)
        #expect(!persistence.isRestoring)
        await persistence.restored()
    }

    @Test("restored() does not wait for saves asked for after the restore")
    func restoredDoesNotWaitForLaterSaves() async throws {
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k")
        loadable.setContents(1)
        await persistence.restored()
        #expect(await waitUntilHeld(cache))
        #expect(await cache.operations == [.load, .save])
        await cache.releaseAll()
    }

    @Test(
        "restored() returns when the restore found nothing, failed, was dropped by a sync's contents, or was stopped",
        arguments: ["nothing", "failed", "dropped", "stopped"])
    func restoredEndsWhateverTheOutcome(_ outcome: String) async throws {
        let wall = PersistenceWallClock()
        let stored: [String: CachedEntry] =
            switch outcome {
            case "nothing": [:]
            case "failed": ["k": CachedEntry(data: Data("garbage".utf8), savedAt: wall.now, version: 1)]
            default: ["k": try persistedEntry(7, savedAt: wall.now)]
            }
        let cache = ScriptedPersistenceCache(entries: stored)
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function, onError: log.handler)
        #expect(await waitUntilHeld(cache))
        if outcome == "dropped" {
            loadable.sync()
            loadable.setDidSyncSuccessfully(9)
        }
        if outcome == "stopped" { persistence.stop() }
        let wait = Task { await persistence.restored() }
        await cache.releaseAll()
        await wait.value
        #expect(loadable.contents == (outcome == "dropped" ? 9 : nil))
        #expect(log.summaries == (outcome == "failed" ? ["decodingFailed k"] : []))
    }

    @Test("metadata is saved with the contents it came with, and given back with restored contents")
    func metadataRoundTrip() async throws {
        let cache = InMemoryLoadableCache()
        let first = taggedLoadable(1, tag: "v1")
        let persistence = first.persist(in: cache, key: "k")
        try await first.synced()
        await persistence.saved()
        #expect(await cache.load(key: "k")?.metadata == ["tag": "v1"])

        let second = taggedLoadable(2, tag: "v2")
        var seen: [String] = []
        let token = second.addObserver { _ in
            seen.append("metadata \(second.baseMetadata) with contents \(String(describing: second.contents))")
        }
        await second.persist(in: cache, key: "k").restored()
        #expect(second.contents == 1)
        #expect(second.baseMetadata == ["tag": "v1"])
        // One change: the metadata comes with the contents, never before or after them.
        #expect(seen == [#"metadata ["tag": "v1"] with contents Optional(1)"#])
        token.cancel()
    }

    @Test("a dropped restore gives no metadata back; an entry without metadata gives none")
    func droppedRestoreKeepsOwnMetadata() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: [
            "k": CachedEntry(
                data: try JSONEncoder().encode(1), savedAt: wall.now, version: 1, metadata: ["tag": "old"]),
            "plain": try persistedEntry(2, savedAt: wall.now),
        ])
        await cache.hold(.load)
        let loadable = taggedLoadable(5, tag: "new")
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(await waitUntilHeld(cache))
        try await loadable.synced()
        await cache.releaseAll()
        await persistence.restored()
        #expect(loadable.contents == 5)
        #expect(loadable.baseMetadata == ["tag": "new"])

        let plain = taggedLoadable(0, tag: "unused")
        await plain.persist(in: cache, key: "plain", now: wall.function).restored()
        #expect(plain.contents == 2)
        #expect(plain.baseMetadata.isEmpty)
    }

    @Test("an entry encoded before metadata existed decodes with none")
    func codableWithoutMetadata() throws {
        let json = #"{"data":"AQI=","savedAt":0,"version":3}"#
        let entry = try JSONDecoder().decode(CachedEntry.self, from: Data(json.utf8))
        #expect(entry == CachedEntry(data: Data([1, 2]), savedAt: Date(timeIntervalSinceReferenceDate: 0), version: 3))
        #expect(entry.metadata.isEmpty)
        let tagged = CachedEntry(data: Data(), savedAt: .distantPast, version: 1, metadata: ["ETag": "\"x\""])
        #expect(try JSONDecoder().decode(CachedEntry.self, from: JSONEncoder().encode(tagged)) == tagged)
    }

    @Test(
        "store.restored(key) waits for the entry's restore; a key without an entry, or a store without a cache, returns at once"
    )
    func storeRestored() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["post-1": try persistedEntry(10, savedAt: wall.now)])
        await cache.hold(.load)
        let store = LoadableStore<Int, PersistedLoadable<Int>>(
            cache: cache, cacheKey: { "post-\($0)" }, now: wall.function
        ) { _ in PersistedLoadable(clock: ManualClock()) }
        await store.restored(1)
        let lease = store.lease(1)
        #expect(await waitUntilHeld(cache))
        let wait = Task { await store.restored(1) }
        await cache.releaseAll()
        await wait.value
        #expect(lease.contents == 10)
        let plain = LoadableStore<Int, PersistedLoadable<Int>> { _ in PersistedLoadable(clock: ManualClock()) }
        let plainLease = plain.lease(1)
        await plain.restored(1)
        #expect(plainLease.contents == nil)
    }

    @Test("onError set after entries were made reaches them, and the store's own removals")
    func settableOnCacheError() async throws {
        let cache = ScriptedPersistenceCache()
        let first = PersistenceErrorLog()
        let store = LoadableStore<Int, PersistedLoadable<Int>>(
            cache: cache, cacheKey: { "post-\($0)" }, onError: first.handler
        ) { _ in PersistedLoadable(clock: ManualClock()) }
        let lease = store.lease(1)
        await store.saved()
        let second = PersistenceErrorLog()
        store.onError = second.handler
        #expect(store.onError != nil)
        await cache.fail(.save, with: TestError("disk full"))
        await cache.fail(.remove, with: TestError("busy"))
        lease.loadable.setContents(1)
        store.remove(2)
        await store.saved()
        #expect(first.summaries.isEmpty)
        #expect(second.summaries == ["saveFailed post-1", "removeFailed post-2"])
        let plain = LoadableStore<Int, PersistedLoadable<Int>> { _ in PersistedLoadable(clock: ManualClock()) }
        plain.onError = second.handler
        #expect(plain.onError == nil)
    }
}
