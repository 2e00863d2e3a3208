import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

// MARK: - Persistence, stores and outboxes on every cache kind

/// What the package builds on a cache works on every kind (``CacheKind``) across a relaunch: a new
/// loadable, store or outbox on the same storage (for files and SQLite through a new cache object
/// on the same path, for memory the same object) starts from what the last one saved.
@Suite("Every LoadableCache: persist(in:key:), LoadableStore and LoadableOutbox across a relaunch")
@MainActor
struct CacheContractIntegrationTests {
    @Test("persist(in:key:) restores the contents and their age after a relaunch", arguments: CacheKind.allCases)
    func persistRestoresAfterRelaunch(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let wall = PersistenceWallClock()
        let log = PersistenceErrorLog()
        do {
            let loadable = PersistedLoadable<[String]>(clock: ManualClock())
            let persistence = loadable.persist(
                in: subject.cache, key: "feed/caf\u{E9}", now: wall.function, onError: log.handler)
            await persistence.restored()
            #expect(loadable.contents == nil)
            loadable.setContents(["a", "ü", ""])
            await persistence.saved()
        }
        wall.advance(by: 30)
        let relaunched = PersistedLoadable<[String]>(clock: ManualClock())
        let persistence = relaunched.persist(
            in: try subject.another(), key: "feed/cafe\u{301}", now: wall.function, onError: log.handler)
        await persistence.restored()
        #expect(relaunched.contents == ["a", "ü", ""])
        #expect(relaunched.age == .seconds(30))
        #expect(relaunched.loadableState == .idle)

        // A change after the relaunch is saved over the entry.
        relaunched.setContents(["b"])
        await persistence.saved()
        let entry = try #require(try await subject.another().load(key: "feed/caf\u{E9}"))
        #expect(try JSONDecoder().decode([String].self, from: entry.data) == ["b"])
        #expect(entry.savedAt == wall.now)
        #expect(log.summaries.isEmpty)
    }

    @Test(
        "a store on a scope restores its entries after a relaunch; its removeAll clears its scope only",
        arguments: CacheKind.allCases)
    func storeRestoresAndRemoveAllClears(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let wall = PersistenceWallClock()
        let log = PersistenceErrorLog()
        let clock = ManualClock()
        func store(on cache: any LoadableCache) -> LoadableStore<Int, PersistedLoadable<Int>> {
            LoadableStore(
                clock: clock, cache: cache.scoped("posts/"), cacheKey: { "\($0)" }, now: wall.function,
                onError: log.handler
            ) { _ in PersistedLoadable(clock: clock) }
        }
        try await subject.cache.save(try persistedEntry(3, savedAt: wall.now), key: "users/1")
        try await subject.cache.save(try persistedEntry(4, savedAt: wall.at(-100)), key: "posts/4")
        do {
            let first = store(on: subject.cache)
            let lease = first.lease(1)
            lease.loadable.setContents(10)
            first.setContents(20, for: 2)
            await first.saved()
        }
        wall.advance(by: 5)

        let relaunched = store(on: try subject.another())
        let one = relaunched.lease(1)
        let two = relaunched.lease(2)
        let four = relaunched.lease(4)
        await relaunched.saved()
        #expect(one.contents == 10)
        #expect(one.loadable.age == .seconds(5))
        #expect(two.contents == 20)
        #expect(four.contents == 4)
        #expect(four.loadable.age == .seconds(105))

        relaunched.removeAll()
        await relaunched.saved()
        for key in ["posts/1", "posts/2", "posts/4"] {
            #expect(try await subject.cache.load(key: key) == nil, "\(key)")
        }
        #expect(persistedInt(try await subject.cache.load(key: "users/1")) == 3)
        #expect(try await subject.storedCount() == 1)
        #expect(log.summaries.isEmpty)
    }

    @Test(
        "an outbox restores its items, in order, with their idempotency keys, after a relaunch",
        arguments: CacheKind.allCases)
    func outboxRestoresAfterRelaunch(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let server = ScriptedServer()
        var outbox: LoadableOutbox<Append>! = makeOutbox(cache: subject.cache, server: server, clock: ManualClock())
        await outbox.restored()
        for word in ["a", "b", "ü"] { outbox.enqueue(Append(word: word)) }
        await yield(until: { server.runningCount == 1 })
        let before = outbox.items
        #expect(before.map(\.change.word) == ["a", "b", "ü"])
        await outbox.saved()
        outbox = nil

        let second = ScriptedServer()
        var relaunched: LoadableOutbox<Append>! = makeOutbox(
            cache: try subject.another(), server: second, clock: ManualClock())
        await relaunched.restored()
        let after = relaunched.items
        #expect(after.map(\.id) == before.map(\.id))
        #expect(after.map(\.change) == before.map(\.change))
        #expect(after.map(\.idempotencyKey) == before.map(\.idempotencyKey))
        #expect(after.map(\.enqueuedAt) == before.map(\.enqueuedAt))
        await settleOutbox()
        // The item being sent at the relaunch is sent again, with the same key.
        #expect(second.calls.first?.idempotencyKey == before[0].idempotencyKey)
        for _ in 0..<3 { await second.finish() }
        #expect(second.applied.map(\.word) == ["a", "b", "ü"])
        #expect(relaunched.items.isEmpty)
        await relaunched.saved()
        await server.finish()  // the first launch's answer arrives after all: ignored

        relaunched = nil

        // The emptied outbox is what the next launch finds.
        let third = makeOutbox(cache: try subject.another(), server: ScriptedServer(), clock: ManualClock())
        await third.restored()
        #expect(third.items.isEmpty)
    }

    /// The setup the offline guide recommends, on a bounded cache: a store in one scope, the
    /// outbox in another. The store's saves push the cache past `maxBytes` many times over, and
    /// the app clears old entries at launch; the queue is pinned, so neither takes it.
    @Test(
        "an outbox in a scope of a bounded cache keeps its queue through eviction, removeEntries(savedBefore:) and a relaunch",
        arguments: BoundedCacheKind.allCases)
    func outboxSurvivesEviction(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 4_096)
        defer { subject.cleanUp() }
        let wall = PersistenceWallClock()
        let log = PersistenceErrorLog()
        let offline = ActivityMonitor(connectivity: .offline)
        let server = ScriptedServer()
        do {
            let outbox = makeOutbox(
                cache: subject.cache.scoped("outbox/"), server: server, activity: offline, clock: ManualClock())
            await outbox.restored()
            // A queue larger than the whole limit on its own.
            for index in 0..<60 { outbox.enqueue(Append(word: String(repeating: "w", count: 100) + "\(index)")) }
            await outbox.saved()
            let store = LoadableStore<Int, PersistedLoadable<String>>(
                clock: ManualClock(), cache: subject.cache.scoped("posts/"), cacheKey: { "\($0)" },
                now: wall.function, onError: log.handler
            ) { _ in PersistedLoadable(clock: ManualClock()) }
            for key in 0..<200 { store.setContents(String(repeating: "p", count: 300), for: key) }
            await store.saved()
            #expect(outbox.items.count == 60)
        }
        wall.advance(by: 3_600)
        try await subject.removeEntries(savedBefore: wall.now)

        let relaunched = makeOutbox(
            cache: try CacheSubject(kind, directory: subject.directory, maxBytes: 1_024).cache.scoped("outbox/"),
            server: ScriptedServer(), activity: offline, clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.count == 60)
        #expect(relaunched.items.first?.change.word.hasSuffix("0") == true)
        #expect(relaunched.items.last?.change.word.hasSuffix("59") == true)
        #expect(log.summaries.isEmpty)
        #expect(server.calls.isEmpty, "nothing was sent offline")
    }
}
