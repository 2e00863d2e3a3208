import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableSyncer
import LoadableTesting
import Testing

/// Two `SQLiteLoadableCache` objects on one file are one cache, as two `FileLoadableCache` objects
/// on one folder are: two outboxes on one key, or two unscoped stores, each through its own
/// object, stop the program with the message they get through one object (they would overwrite
/// each other's entries), and the persistences on both share one order of reads and writes.
@Suite("SQLiteLoadableCache: the objects of one file share their claims and their order")
struct SQLiteCacheClaimTests {
    /// A store of `PersistedLoadable<Int>` on `cache`.
    @MainActor
    static func store(on cache: any LoadableCache) -> LoadableStore<Int, PersistedLoadable<Int>> {
        LoadableStore(cache: cache, cacheKey: { "\($0)" }) { _ in PersistedLoadable<Int>(clock: ManualClock()) }
    }

    @Test("an outbox through each of two objects of one file, on the same key, stops the program naming the fix")
    func twoOutboxesOnOneKey() async {
        let folder = FileCacheFixtures.temporaryDirectory("sqlite-claims")
        defer { FileCacheFixtures.removeDirectory(folder) }
        let path = folder.appendingPathComponent("cache.sqlite").path
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [path = path as String] in
            try await MainActor.run {
                let first = try SQLiteLoadableCache(path: URL(fileURLWithPath: path))
                let second = try SQLiteLoadableCache(path: URL(fileURLWithPath: path))
                let one = LoadableOutbox<Append>(cache: first) { _, _ in }
                let other = LoadableOutbox<Append>(cache: second) { _, _ in }
                withExtendedLifetime((one, other)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(
                text.contains("LoadableOutbox: the key \"outbox\" of SQLiteLoadableCache overlaps the key \"outbox\""))
            #expect(text.contains("give each outbox its own key"))
        }
    }

    @Test("an unscoped store through each of two objects of one file stops the program naming scoped(_:)")
    func twoStoresOnOneFile() async {
        let folder = FileCacheFixtures.temporaryDirectory("sqlite-claims")
        defer { FileCacheFixtures.removeDirectory(folder) }
        let path = folder.appendingPathComponent("cache.sqlite").path
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [path = path as String] in
            try await MainActor.run {
                let first = SQLiteCacheClaimTests.store(on: try SQLiteLoadableCache(path: URL(fileURLWithPath: path)))
                let second = SQLiteCacheClaimTests.store(on: try SQLiteLoadableCache(path: URL(fileURLWithPath: path)))
                withExtendedLifetime((first, second)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableStore: the whole cache of SQLiteLoadableCache overlaps the whole cache"))
            #expect(text.contains("give each store its own scope: cache.scoped(\"posts/\")"))
        }
    }

    @Test("outboxes on their own keys and stores on their own scopes, through two objects of one file, work")
    @MainActor
    func ownKeysAndScopes() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        let first = try SQLiteLoadableCache(path: path)
        let second = try SQLiteLoadableCache(path: path)
        // Inactive: the items stay in the queues.
        let activity = ActivityMonitor(isActive: false)
        let notes = LoadableOutbox<Append>(cache: first, key: "outbox/notes", activity: activity) { _, _ in }
        let tasks = LoadableOutbox<Append>(cache: second, key: "outbox/tasks", activity: activity) { _, _ in }
        notes.enqueue(Append(word: "note"))
        tasks.enqueue(Append(word: "task"))
        await notes.saved()
        await tasks.saved()

        let posts = Self.store(on: first.scoped("posts/"))
        let users = Self.store(on: second.scoped("users/"))
        try await second.save(contractEntry(3), key: "users/1")
        posts.removeAll()
        await posts.saved()

        let third = try SQLiteLoadableCache(path: path)
        // Each queue's first journal entry.
        #expect(try await third.load(key: "outbox/notes#0#1") != nil)
        #expect(try await third.load(key: "outbox/tasks#0#1") != nil)
        #expect(try await third.load(key: "users/1") == contractEntry(3))
        withExtendedLifetime((notes, tasks, posts, users)) {}
    }

    @Test("the objects of one path share one queue identity; another path has its own")
    func oneQueuePerPath() throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        let first = try SQLiteLoadableCache(path: path)
        let second = try SQLiteLoadableCache(path: URL(fileURLWithPath: folder.path + "/./cache.sqlite"))
        let elsewhere = try SQLiteLoadableCache(path: folder.appendingPathComponent("other.sqlite"))
        #expect(first.sharedEntries == second.sharedEntries)
        #expect(first.sharedEntries != elsewhere.sharedEntries)
        #expect(first.sharedEntries.cacheName == "SQLiteLoadableCache")
    }
}
