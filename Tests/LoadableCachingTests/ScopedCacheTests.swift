import Foundation
import Loadable
import LoadableCaching
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

/// `scoped(_:)`: a view whose keys are prefixed and whose `removeAll()` removes its own entries
/// only, for any cache.
@Suite("LoadableCache.scoped(_:)")
@MainActor
struct ScopedCacheTests {
    @Test("keys are stored under prefix + key; removeAll() of a scope leaves the rest")
    func prefixedKeysAndScopedRemoval() async throws {
        let cache = InMemoryLoadableCache()
        let posts = cache.scoped("posts/")
        let users = cache.scoped("users/")
        try await posts.save(entry("p1"), key: "1")
        try await users.save(entry("u1"), key: "1")
        await cache.save(entry("top"), key: "settings")
        #expect(await cache.keys == ["posts/1", "settings", "users/1"])
        #expect(try await posts.load(key: "1") == entry("p1"))
        #expect(try await users.load(key: "1") == entry("u1"))
        #expect(try await posts.load(key: "2") == nil)
        try await posts.removeAll()
        #expect(await cache.keys == ["settings", "users/1"])
        // Called on the cache itself, it is the cache's own, not the protocol's failing default.
        await cache.removeEntries(keyPrefix: "users/")
        #expect(await cache.keys == ["settings"])
        try await users.save(entry("u1"), key: "1")
        try await users.remove(key: "1")
        #expect(await cache.keys == ["settings"])
    }

    @Test("a scope of a scope adds its prefix after its parent's")
    func nestedScopes() async throws {
        let cache = InMemoryLoadableCache()
        let drafts = cache.scoped("posts/").scoped("drafts/")
        try await drafts.save(entry("d"), key: "7")
        try await cache.scoped("posts/").save(entry("p"), key: "7")
        #expect(await cache.keys == ["posts/7", "posts/drafts/7"])
        try await drafts.removeAll()
        #expect(await cache.keys == ["posts/7"])
    }

    @Test("keys compare as Swift compares strings: café typed two ways is one key, in a scope too")
    func canonicallyEquivalentKeys() async throws {
        let cache = InMemoryLoadableCache()
        let scope = cache.scoped("caf\u{E9}/")
        try await scope.save(entry("one"), key: "caf\u{E9}")
        #expect(try await cache.scoped("cafe\u{301}/").load(key: "cafe\u{301}") == entry("one"))
        try await cache.scoped("cafe\u{301}/").removeAll()
        #expect(await cache.keys.isEmpty)
    }

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

    @Test("a store on a scope: removeAll() clears the scope's entries of earlier launches too, and nothing else")
    func storeLogoutClearsItsScope() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: [
            "posts/1": try persistedEntry(1, savedAt: wall.now),
            "posts/2": try persistedEntry(2, savedAt: wall.now),
            "users/1": try persistedEntry(3, savedAt: wall.now),
        ])
        let posts = LoadableStore<Int, PersistedLoadable<Int>>(
            cache: cache.scoped("posts/"), cacheKey: { "\($0)" }, now: wall.function
        ) { _ in PersistedLoadable(clock: ManualClock()) }
        let lease = posts.lease(1)
        await posts.restored(1)
        #expect(lease.contents == 1)
        posts.removeAll()
        await posts.flush()
        #expect(await cache.keys == ["users/1"])
    }
}
