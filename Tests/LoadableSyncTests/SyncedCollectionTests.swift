import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

@MainActor
@Suite struct SyncedCollectionTests {
    let server = SyncTestServer<TaskRecord>(pageSize: 2)
    let cache = InMemoryLoadableCache()
    let clock = ManualClock()

    @Test func aPullBringsEveryPageAndTombstonesRemoveRecords() async {
        server.put(TaskRecord(id: "a", title: "A"))
        server.put(TaskRecord(id: "b", title: "B"))
        server.put(TaskRecord(id: "c", title: "C"))
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.pullAndSettle()
        #expect(tasks.loadableState == .didSyncSuccessfully)
        #expect(tasks.contents.map { Array($0) }?.titles == ["A", "B", "C"])
        #expect(tasks.status.hasSynced)
        server.remove("b")
        server.put(TaskRecord(id: "a", title: "A2"))
        await tasks.pullAndSettle()
        #expect(tasks.contents.map { Array($0) }?.titles == ["A2", "C"])
    }

    @Test func aLocalInsertShowsAtOnceBeforeTheFirstSyncAndIsPushedOnce() async {
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        #expect(tasks.contents == nil)
        tasks.insert(TaskRecord(id: "n", title: "New"))
        #expect(tasks.contents?[id: "n"]?.title == "New")
        await tasks.settlePushes()
        #expect(server.records["n"]?.title == "New")
        #expect(tasks.status.pendingCount == 0)
        await tasks.pullAndSettle()
        #expect(tasks.contents.map { Array($0) }?.titles == ["New"])
    }

    @Test func editsQueuedOfflineReachTheServerInOrderWithoutConflictingWithEachOther() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.pullAndSettle()
        server.isOffline = true
        tasks.update("a") { $0.title = "A1" }
        await tasks.settlePushes()
        tasks.update("a") { $0.done = true }
        tasks.insert(TaskRecord(id: "b", title: "B"))
        tasks.delete("b")
        #expect(tasks.contents?[id: "a"] == TaskRecord(id: "a", title: "A1", done: true))
        #expect(tasks.contents?[id: "b"] == nil)
        tasks.insert(TaskRecord(id: "c", title: "C"))
        await server.comeBackOnline(tasks, clock: clock)
        #expect(server.records["a"] == TaskRecord(id: "a", title: "A1", done: true))
        #expect(server.records["b"] == nil)
        #expect(tasks.conflicts.isEmpty)
    }

    @Test func aRelaunchRestoresRecordsCursorAndPendingChangesBeforeTheFirstSync() async {
        server.put(TaskRecord(id: "a", title: "A"))
        weak var released: TestCollection?
        do {
            let tasks = makeCollection(server: server, cache: cache, clock: clock)
            released = tasks
            await tasks.pullAndSettle()
            server.isOffline = true
            tasks.update("a") { $0.title = "offline" }
            tasks.insert(TaskRecord(id: "b", title: "B"))
            await tasks.saved()
        }
        #expect(await settle { released == nil })
        let relaunched = makeCollection(server: server, cache: cache, clock: clock)
        await relaunched.restored()
        #expect(relaunched.contents.map { Array($0) }?.titles == ["offline", "B"])
        #expect(relaunched.status.hasSynced)
        #expect(relaunched.status.pendingCount == 2)
        let pulls = server.pullCount
        await relaunched.pullAndSettle()
        await server.comeBackOnline(relaunched, clock: clock)
        #expect(server.records["a"]?.title == "offline")
        #expect(server.records["b"]?.title == "B")
        // A delta pull from the saved cursor: one page.
        #expect(server.pullCount == pulls + 1)
    }

    /// The conflict is found by a pull (the change waits: the app is offline for pushes) or by the
    /// push (held in flight while the other device writes).
    @Test func recordsCreatedOfflineComeBackInTheOrderTheyWereMadeAfterARelaunch() async {
        let ids = ["f", "a", "e", "b", "d", "c", "h", "g"]
        weak var released: TestCollection?
        do {
            let tasks = makeCollection(
                server: server, cache: cache, activity: ActivityMonitor(connectivity: .offline), clock: clock)
            released = tasks
            for id in ids { tasks.insert(TaskRecord(id: id, title: id)) }
            #expect(tasks.contents?.ids == ids)
            await tasks.saved()
        }
        #expect(await settle { released == nil })
        let relaunched = makeCollection(server: server, cache: cache, clock: clock)
        await relaunched.restored()
        #expect(relaunched.contents?.ids == ids)
    }

    @Test(arguments: ["serverWins", "clientWins", "fieldwise", "merge", "manual"], ["pull", "push"])
    func aConflictWithAPendingEditGoesThroughThePolicy(_ name: String, foundBy: String) async {
        let policy: ConflictPolicy<TaskRecord> =
            switch name {
            case "serverWins": .serverWins
            case "clientWins": .clientWins
            case "fieldwise": .fieldwise
            case "merge":
                .merge { _, local, remote in
                    local.map {
                        var merged = $0
                        merged.note = remote?.note ?? ""
                        return merged
                    }
                }
            default: .manual
            }
        server.put(TaskRecord(id: "a", title: "A"))
        let activity = ActivityMonitor()
        let tasks = makeCollection(server: server, cache: cache, conflicts: policy, activity: activity, clock: clock)
        await tasks.pullAndSettle()
        if foundBy == "pull" { activity.connectivity = .offline } else { server.holdPushes() }
        tasks.update("a") { $0.title = "mine" }
        server.put(TaskRecord(id: "a", title: "A", note: "theirs"))
        if foundBy == "push" { _ = await settle { server.heldPushCount == 1 } }
        tasks.sync()
        _ = await settle { tasks.loadableState != .syncing }
        if foundBy == "pull" { activity.connectivity = .online } else { server.releasePushes() }
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        let expected: TaskRecord? =
            switch name {
            case "serverWins": TaskRecord(id: "a", title: "A", note: "theirs")
            case "clientWins": TaskRecord(id: "a", title: "mine")
            case "fieldwise", "merge": TaskRecord(id: "a", title: "mine", note: "theirs")
            default: nil
            }
        if let expected {
            #expect(server.records["a"] == expected)
            #expect(tasks.contents?[id: "a"] == expected)
            #expect(tasks.conflicts.isEmpty)
        } else {
            #expect(tasks.conflicts.count == 1)
            let conflict = tasks.conflicts.first
            #expect(conflict?.local?.title == "mine")
            #expect(conflict?.remote?.note == "theirs")
            #expect(conflict?.base?.title == "A")
            #expect(tasks.contents?[id: "a"]?.title == "mine")
            #expect(tasks.status.conflictCount == 1)
            tasks.resolve("a", with: TaskRecord(id: "a", title: "mine", note: "theirs"))
            _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
            #expect(server.records["a"] == TaskRecord(id: "a", title: "mine", note: "theirs"))
            await tasks.pullAndSettle()
            #expect(tasks.conflicts.isEmpty)
            #expect(tasks.contents?[id: "a"] == TaskRecord(id: "a", title: "mine", note: "theirs"))
        }
    }

    @Test func anExpiredCursorPullsEverythingAgainAndKeepsPendingChanges() async {
        server.put(TaskRecord(id: "a", title: "A"))
        server.put(TaskRecord(id: "b", title: "B"))
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.pullAndSettle()
        server.remove("b")
        server.put(TaskRecord(id: "c", title: "C"))
        server.expireHistory()
        server.isOffline = true
        tasks.insert(TaskRecord(id: "d", title: "D"))
        server.isOffline = false
        await tasks.pullAndSettle()
        await server.comeBackOnline(tasks, clock: clock)
        #expect(tasks.error == nil)
        _ = await settle { tasks.status.pendingCount == 0 }
        #expect(Set(tasks.contents?.ids ?? []) == ["a", "c", "d"])
    }

    @Test func aChangeMadeWhileItsRecordIsPushedIsNotLostAndDoesNotConflict() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.pullAndSettle()
        server.holdPushes()
        tasks.update("a") { $0.title = "first" }
        _ = await settle { server.heldPushCount == 1 }
        tasks.update("a") { $0.done = true }
        tasks.sync()
        _ = await settle { tasks.loadableState != .syncing }
        server.releasePushes()
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        #expect(server.records["a"] == TaskRecord(id: "a", title: "first", done: true))
        #expect(tasks.conflicts.isEmpty)
        #expect(tasks.contents?[id: "a"] == TaskRecord(id: "a", title: "first", done: true))
    }

    @Test func removeAllForgetsRecordsCursorAndPendingChanges() async {
        server.put(TaskRecord(id: "a", title: "A"))
        weak var released: TestCollection?
        do {
            let tasks = makeCollection(server: server, cache: cache, clock: clock)
            released = tasks
            await tasks.pullAndSettle()
            server.isOffline = true
            tasks.insert(TaskRecord(id: "b", title: "B"))
            tasks.removeAll()
            #expect(tasks.contents == nil)
            #expect(tasks.status.pendingCount == 0)
            #expect(!tasks.status.hasSynced)
            await tasks.saved()
        }
        #expect(await settle { released == nil })
        let relaunched = makeCollection(server: server, cache: cache, clock: clock)
        await relaunched.restored()
        #expect(relaunched.contents == nil)
        #expect(!relaunched.status.hasSynced)
        #expect(relaunched.status.pendingCount == 0)
    }
}

@MainActor
@Suite struct SyncedCollectionLifetimeTests {
    @Test func aCollectionGoesWhenReleased() async {
        let server = SyncTestServer<TaskRecord>()
        server.put(TaskRecord(id: "a", title: "A"))
        weak var weakTasks: TestCollection?
        do {
            let tasks = makeCollection(server: server, cache: InMemoryLoadableCache())
            weakTasks = tasks
            await tasks.pullAndSettle()
            server.isOffline = true
            tasks.insert(TaskRecord(id: "b", title: "B"))
            await tasks.saved()
        }
        _ = await settle { weakTasks == nil }
        #expect(weakTasks == nil)
    }
}
