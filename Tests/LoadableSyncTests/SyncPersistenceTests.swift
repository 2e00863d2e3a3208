import Foundation
import LoadableSQLite
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

/// What a collection keeps in its cache: pages with their cursor, snapshots that replace them,
/// restores that equal what was shown, and bad entries that are errors, not traps.
@MainActor
@Suite struct SyncPersistenceTests {
    let server = SyncTestServer<TaskRecord>(pageSize: 100)
    let clock = ManualClock()

    func temporaryFolder() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sync-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Runs `body` with a collection on `cache`, then waits until it is released.
    func withCollection(
        _ cache: any LoadableCache, _ body: (TestCollection) async -> Void
    ) async {
        weak var released: TestCollection?
        do {
            let tasks = makeCollection(server: server, cache: cache, clock: clock)
            released = tasks
            await tasks.restored()
            await body(tasks)
            await tasks.saved()
        }
        #expect(await settle { released == nil })
    }

    @Test(arguments: ["sqlite", "file"])
    func manyPagesAndSnapshotsRestoreWhatWasShown(_ kind: String) async throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache: any LoadableCache =
            kind == "sqlite"
            ? try SQLiteLoadableCache(path: folder.appendingPathComponent("cache.sqlite"))
            : FileLoadableCache(directory: folder)
        var shown: [TaskRecord] = []
        await withCollection(cache) { tasks in
            for round in 0..<6 {
                for index in 0..<300 { server.put(TaskRecord(id: "r\(index + round * 150)", title: "round \(round)")) }
                for index in stride(from: 0, to: 60, by: 7) { server.remove("r\(index + round * 100)") }
                await tasks.pullAndSettle()
            }
            shown = Array(tasks.contents ?? RecordSet())
        }
        #expect(shown.count > 900)
        await withCollection(cache) { tasks in
            #expect(Array(tasks.contents ?? RecordSet()) == shown)
            #expect(tasks.status.hasSynced)
            let pulls = server.pullCount
            await tasks.pullAndSettle()
            // From the saved cursor: one empty page.
            #expect(server.pullCount == pulls + 1)
            #expect(Array(tasks.contents ?? RecordSet()) == shown)
        }
    }

    @Test func aSnapshotThatDoesNotDecodeIsReportedAndTheCollectionStartsOver() async throws {
        let cache: any LoadableCache = InMemoryLoadableCache()
        server.put(TaskRecord(id: "a", title: "A"))
        await withCollection(cache) { tasks in
            await tasks.pullAndSettle()
        }
        try await cache.save(
            CachedEntry(data: Data("not json".utf8), savedAt: .distantPast, version: 1), key: "tasks/records")
        var errors: [any Error] = []
        weak var released: TestCollection?
        do {
            let tasks = makeCollection(server: server, cache: cache, clock: clock)
            released = tasks
            tasks.onError = { errors.append($0) }
            await tasks.restored()
            #expect(tasks.contents == nil)
            #expect(!tasks.status.hasSynced)
            #expect(errors.count == 1)
            #expect((errors.first as? LoadableCacheError)?.key == "tasks/records")
            await tasks.pullAndSettle()
            #expect(tasks.contents?.ids == ["a"])
            await tasks.saved()
        }
        #expect(await settle { released == nil })
    }

    @Test func aPageThatDoesNotDecodeEndsTheRestoreThereAndTheNextPullRepeatsFromItsCursor() async throws {
        let cache: any LoadableCache = InMemoryLoadableCache()
        server.put(TaskRecord(id: "a", title: "A"))
        await withCollection(cache) { tasks in
            await tasks.pullAndSettle()
            server.put(TaskRecord(id: "b", title: "B"))
            await tasks.pullAndSettle()
            server.put(TaskRecord(id: "c", title: "C"))
            await tasks.pullAndSettle()
        }
        // Page 2 spoiled: pages 2 and 3 go, and the cursor is page 1's.
        try await cache.save(
            CachedEntry(data: Data("{".utf8), savedAt: .distantPast, version: 1), key: "tasks/records/2")
        await withCollection(cache) { tasks in
            #expect(tasks.contents?.ids == ["a"])
            await tasks.pullAndSettle()
            #expect(tasks.contents?.ids == ["a", "b", "c"])
        }
        #expect(try await cache.load(key: "tasks/records/3") == nil)
    }

    @Test func theCollectionsEntriesArePinnedSoABoundedCacheKeepsThem() async throws {
        let cache: any LoadableCache = InMemoryLoadableCache()
        server.put(TaskRecord(id: "a", title: "A"))
        await withCollection(cache) { tasks in
            await tasks.pullAndSettle()
        }
        let page = try await cache.load(key: "tasks/records/1")
        #expect(page?.isPinned == true)
    }
}
