import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

/// An app's own cache that does not implement `removeEntries(keyPrefix:)`.
private final class MinimalCache: LoadableCache, @unchecked Sendable {
    private let entries = Locked([String: CachedEntry]())
    func load(key: String) -> CachedEntry? { entries.withLock { $0[key] } }
    func save(_ entry: CachedEntry, key: String) { entries.withLock { $0[key] = entry } }
    func remove(key: String) { entries.withLock { $0[key] = nil } }
    func removeAll() { entries.withLock { $0.removeAll() } }
}

private func entry(_ text: String) -> CachedEntry {
    CachedEntry(data: Data(text.utf8), savedAt: PersistenceWallClock.start, version: 1)
}

/// `scoped(_:)` on a cache of the app's own and on a scripted one (the rules of scopes on every
/// cache kind the package ships are in
/// `Tests/LoadableSQLiteTests/CacheContract/CacheContractTests.swift`).
@Suite("LoadableCache.scoped(_:)")
@MainActor
struct ScopedCacheTests {
    @Test("a cache without removeEntries(keyPrefix:) fails a scope's removeAll(), naming its type, and removes nothing")
    func unsupportedPrefixRemoval() async throws {
        let cache = MinimalCache()
        let scope = cache.scoped("a/")
        try await scope.save(entry("x"), key: "1")
        let error = await #expect(throws: LoadableCacheError.self) { try await scope.removeAll() }
        #expect(
            error?.description
                == "the cache could not be cleared: MinimalCache does not implement removeEntries(keyPrefix:), which the removeAll() of a scoped(_:) view needs"
        )
        #expect(cache.load(key: "a/1") == entry("x"))
    }

    @Test("a scope and its cache share one order: a save through one, then a restore through the other, reads it")
    func sharedOrder() async throws {
        let cache = ScriptedPersistenceCache()
        let first = PersistedLoadable<Int>(clock: ManualClock())
        first.persist(in: cache.scoped("s/"), key: "k")
        await cache.hold(.save)
        first.setContents(5)
        #expect(await waitUntilHeld(cache))
        // The restore of the same entry through the cache itself waits behind the held save.
        let second = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = second.persist(in: cache, key: "s/k")
        await letCacheRun(cache)
        #expect(await cache.operations == [.load, .save])
        await cache.releaseAll()
        await persistence.restored()
        #expect(second.contents == 5)
    }
}
