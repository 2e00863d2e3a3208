import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A cache an app writes itself: the four requirements without a default, and the removal by
/// prefix that scopes need; every capability else is the protocol's default.
private actor AppCache: LoadableCache {
    private var entries: [String: CachedEntry] = [:]

    func load(key: String) -> CachedEntry? { entries[key] }
    func save(_ entry: CachedEntry, key: String) { entries[key] = entry }
    func remove(key: String) { entries[key] = nil }
    func removeAll() { entries.removeAll() }

    nonisolated func removeEntries(keyPrefix prefix: String) async {
        await removeEntriesHere(keyPrefix: prefix)
    }

    private func removeEntriesHere(keyPrefix prefix: String) {
        entries = entries.filter { !$0.key.hasPrefix(prefix) }
    }

    var keys: [String] { entries.keys.sorted() }
}

private typealias PersistedStore = LoadableStore<Int, PersistedLoadable<Int>>

@MainActor
private func store(on cache: any LoadableCache, clock: ManualClock = ManualClock()) -> PersistedStore {
    LoadableStore(retention: .seconds(10), clock: clock, cache: cache, cacheKey: { "post-\($0)" }) { _ in
        PersistedLoadable(clock: clock)
    }
}

/// The persistence's vocabulary, one for the loadable's persistence, the store, the outbox and
/// the synced collection: `restored()`, `saved()`, `onError`, `stop()`, `removeAll()`.
@Suite("Persistence: one vocabulary")
@MainActor
struct PersistenceVocabularyTests {
    @Test("a store's restored() waits for the restore of every entry it has")
    func storeRestoredWaitsForEveryEntry() async throws {
        let cache = InMemoryLoadableCache()
        await cache.save(try persistedEntry(10, savedAt: .now), key: "post-1")
        await cache.save(try persistedEntry(20, savedAt: .now), key: "post-2")
        let posts = store(on: cache)
        let first = posts.lease(1)
        let second = posts.lease(2)
        #expect(first.contents == nil && second.contents == nil)
        await posts.restored()
        #expect(first.contents == 10)
        #expect(second.contents == 20)
        await posts.restored()  // at once once restored
    }

    @Test("a store without a cache: restored() and saved() return at once, onError reads nil")
    func storeWithoutCache() async {
        let posts = PersistedStore(clock: ManualClock()) { _ in PersistedLoadable() }
        _ = posts.lease(1)
        await posts.restored()
        await posts.saved()
        posts.onError = { _ in }
        #expect(posts.onError == nil)
    }

    @Test("a store's onError reaches the entries already made")
    func storeOnErrorIsSettable() async throws {
        let cache = InMemoryLoadableCache()
        await cache.save(CachedEntry(data: Data("not json".utf8), savedAt: .now, version: 1), key: "post-1")
        let posts = store(on: cache)
        var errors: [String] = []
        posts.onError = { errors.append("\($0)") }
        _ = posts.lease(1)
        await posts.restored()
        #expect(errors.count == 1)
        #expect(errors.first?.contains("post-1") == true)
    }

    @Test("a persistence's removeAll() removes its entry after the saves before it; the contents stay")
    func persistenceRemoveAll() async {
        let cache = InMemoryLoadableCache()
        let loadable = PersistedLoadable<Int>()
        let persistence = loadable.persist(in: cache, key: "k")
        loadable.setContents(3)
        persistence.removeAll()
        await persistence.saved()
        #expect(await cache.load(key: "k") == nil)
        #expect(loadable.contents == 3)
        // Still persisting until stopped: the next change is saved again.
        loadable.setContents(4)
        await persistence.saved()
        #expect(persistedInt(await cache.load(key: "k")) == 4)
        persistence.stop()
        persistence.removeAll()
        loadable.setContents(5)
        await persistence.saved()
        #expect(await cache.load(key: "k") == nil)
    }

    @Test("the persistence's old flush() still waits for its saves")
    @available(*, deprecated)
    func persistenceFlushAlias() async {
        let cache = InMemoryLoadableCache()
        let loadable = PersistedLoadable<Int>()
        let persistence = loadable.persist(in: cache, key: "k")
        loadable.setContents(3)
        await persistence.flush()
        #expect(persistedInt(await cache.load(key: "k")) == 3)
    }

    @Test("the store's old flush() and onCacheError still work")
    @available(*, deprecated)
    func storeAliases() async {
        let cache = InMemoryLoadableCache()
        let posts = store(on: cache)
        var told = 0
        posts.onCacheError = { _ in told += 1 }
        #expect(posts.onError != nil)
        #expect(posts.onCacheError != nil)
        posts.onError?(CancellationError())
        #expect(told == 1)
        posts.setContents(4, for: 1)
        await posts.flush()
        #expect(persistedInt(await cache.load(key: "post-1")) == 4)
        posts.onCacheError = nil
        #expect(posts.onError == nil)
    }
}

/// What an app's own `LoadableCache` gets from the protocol's defaults: it serves a persistence,
/// a store, an outbox and scopes, ordered and claimed per object.
@Suite("Persistence: an app's own cache")
@MainActor
struct AppCacheTests {
    @Test("its shared entries are its own, named by its type; a scope adds its prefix")
    func sharedEntriesDefault() {
        let cache = AppCache()
        #expect(cache.sharedEntries.id == ObjectIdentifier(cache))
        #expect(cache.sharedEntries.cacheName == "AppCache")
        #expect(cache.sharedEntries.keyPrefix == "")
        let scope = cache.scoped("a/").scoped("b/")
        #expect(scope.sharedEntries.id == ObjectIdentifier(cache))
        #expect(scope.sharedEntries.cacheName == "AppCache")
        #expect(scope.sharedEntries.keyPrefix == "a/b/")
        #expect(AppCache().sharedEntries != cache.sharedEntries)
    }

    @Test("the file cache's objects of one folder share their entries")
    func fileCacheObjectsShare() {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("shared-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = FileLoadableCache(directory: directory)
        let second = FileLoadableCache(directory: directory)
        #expect(first.sharedEntries == second.sharedEntries)
        #expect(first.sharedEntries.cacheName == "FileLoadableCache")
        #expect(first.scoped("x/").sharedEntries.id == second.sharedEntries.id)
    }

    @Test("a loadable persisted in it saves and restores")
    func persistence() async {
        let cache = AppCache()
        let loadable = PersistedLoadable<Int>()
        let persistence = loadable.persist(in: cache, key: "feed")
        await persistence.restored()
        loadable.setContents(7)
        await persistence.saved()
        let relaunched = PersistedLoadable<Int>()
        let restoring = relaunched.persist(in: cache, key: "feed")
        await restoring.restored()
        #expect(relaunched.contents == 7)
        restoring.stop()
        #expect(restoring.isStopped)
    }

    @Test("stores on scopes of it keep their entries apart; removeAll clears only its scope")
    func storesOnScopes() async {
        let cache = AppCache()
        let posts = store(on: cache.scoped("posts/"))
        let users = store(on: cache.scoped("users/"))
        posts.setContents(1, for: 1)
        users.setContents(2, for: 1)
        await posts.saved()
        await users.saved()
        #expect(await cache.keys == ["posts/post-1", "users/post-1"])
        posts.removeAll()
        await posts.saved()
        #expect(await cache.keys == ["users/post-1"])
        let lease = users.lease(1)
        await users.restored(1)
        #expect(lease.contents == 2)
    }

    @Test("an outbox on it saves its items and restores them after a relaunch")
    func outbox() async {
        let cache = AppCache()
        let offline = ActivityMonitor(connectivity: .offline)
        var outbox: LoadableOutbox<Append>? = makeOutbox(
            cache: cache, server: ScriptedServer(), activity: offline, clock: ManualClock())
        await outbox?.restored()
        _ = outbox?.enqueue(Append(word: "a"))
        await outbox?.saved()
        outbox = nil
        let relaunched = makeOutbox(cache: cache, server: ScriptedServer(), activity: offline, clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.map(\.change) == [Append(word: "a")])
        relaunched.removeAll()
        await relaunched.saved()
        #expect(await cache.keys.isEmpty)
    }
}
