import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

/// Conflicts of a synced collection in the cases `SyncModelTests` found wrong: each test is one of
/// its sequences, shrunk and written out.
@MainActor
@Suite struct SyncedCollectionConflictTests {
    let server = SyncTestServer<TaskRecord>(pageSize: 2)
    let cache = InMemoryLoadableCache()
    let clock = ManualClock()
    let activity = ActivityMonitor()

    /// Pulls and waits for the pull to end (pushes may go on).
    func pull(_ tasks: TestCollection) async {
        tasks.sync()
        _ = await settle { tasks.loadableState != .syncing }
    }

    @Test func aLocalEditOfAHeldConflictSurvivesARelaunch() async {
        server.put(TaskRecord(id: "c", title: "theirs"))
        weak var released: TestCollection?
        do {
            let tasks = makeCollection(server: server, cache: cache, activity: activity, clock: clock)
            released = tasks
            tasks.insert(TaskRecord(id: "c", title: "mine"))
            _ = await settle { tasks.status.conflictCount == 1 }
            await tasks.saved()
            tasks.update("c") { $0.note = "edited while held" }
            #expect(tasks.conflicts.first?.local?.note == "edited while held")
            await tasks.saved()
        }
        #expect(await settle { released == nil })
        let relaunched = makeCollection(server: server, cache: cache, activity: activity, clock: clock)
        await relaunched.restored()
        #expect(relaunched.conflicts.first?.local == TaskRecord(id: "c", title: "mine", note: "edited while held"))
        #expect(relaunched.contents?[id: "c"]?.note == "edited while held")
    }

    /// The pull brings the tombstone of another device's record of the same id, created and deleted
    /// since the last pull: the server has no record, as when the insert was made.
    @Test(arguments: ["serverWins", "fieldwise", "manual"])
    func anInsertOfAnIdWhoseEarlierRecordWasDeletedIsNoConflict(_ policy: String) async {
        let conflicts: ConflictPolicy<TaskRecord> =
            switch policy {
            case "serverWins": .serverWins
            case "fieldwise": .fieldwise
            default: .manual
            }
        let tasks = makeCollection(
            server: server, cache: cache, conflicts: conflicts, activity: activity, clock: clock)
        await pull(tasks)
        activity.connectivity = .offline
        server.put(TaskRecord(id: "a", title: "theirs"))
        tasks.insert(TaskRecord(id: "a", title: "mine"))
        server.remove("a")
        await pull(tasks)
        #expect(tasks.conflicts.isEmpty)
        #expect(tasks.contents?[id: "a"]?.title == "mine")
        activity.connectivity = .online
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        #expect(server.records["a"]?.title == "mine")
    }

    /// The app's own delete comes back on the pull after it inserted the id again.
    @Test func anInsertAfterTheAppsOwnDeleteIsNoConflictWhenTheDeleteComesBack() async {
        server.put(TaskRecord(id: "a", title: "first"))
        let tasks = makeCollection(
            server: server, cache: cache, conflicts: .serverWins, activity: activity, clock: clock)
        await pull(tasks)
        tasks.delete("a")
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        #expect(server.records["a"] == nil)
        activity.connectivity = .offline
        tasks.insert(TaskRecord(id: "a", title: "again"))
        await pull(tasks)
        #expect(tasks.contents?[id: "a"]?.title == "again")
        activity.connectivity = .online
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        #expect(server.records["a"]?.title == "again")
    }

    /// The first pull's conflict makes a change on the server's version; the second pull's
    /// conflict must compare with that version, not with the one the app's edit was made on.
    @Test func aSecondConflictSettlesOnTheBaseOfTheChangeTheFirstMade() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let tasks = makeCollection(
            server: server, cache: cache, conflicts: .fieldwise, activity: activity, clock: clock)
        await pull(tasks)
        activity.connectivity = .offline
        tasks.update("a") { $0.title = "mine" }
        server.put(TaskRecord(id: "a", title: "A", done: true))
        await pull(tasks)
        #expect(tasks.contents?[id: "a"] == TaskRecord(id: "a", title: "mine", done: true))
        // The other side takes its change back: `done` is the server's again.
        server.put(TaskRecord(id: "a", title: "A", done: false))
        await pull(tasks)
        #expect(tasks.contents?[id: "a"] == TaskRecord(id: "a", title: "mine", done: false))
        activity.connectivity = .online
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        #expect(server.records["a"] == TaskRecord(id: "a", title: "mine", done: false))
    }

    /// The push of "first" reached the server but its answer was lost; "second" was made before it
    /// was sent again, and a pull brings "first" back: the app's own change, no conflict.
    @Test(arguments: ["serverWins", "manual"])
    func aPullOfTheAppsOwnChangeWhoseAnswerWasLostIsNoConflictWithTheChangesAfterIt(_ policy: String) async {
        server.put(TaskRecord(id: "a", title: "A"))
        let tasks = makeCollection(
            server: server, cache: cache, conflicts: policy == "manual" ? .manual : .serverWins, activity: activity,
            clock: clock)
        await pull(tasks)
        server.answersToLose = 1
        tasks.update("a") { $0.title = "first" }
        _ = await settle { server.pushCount == 1 && !tasks.status.isPushing }
        #expect(server.records["a"]?.title == "first")
        activity.connectivity = .offline
        tasks.update("a") { $0.note = "second" }
        await pull(tasks)
        #expect(tasks.conflicts.isEmpty)
        #expect(tasks.contents?[id: "a"] == TaskRecord(id: "a", title: "first", note: "second"))
        activity.connectivity = .online
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        #expect(server.records["a"] == TaskRecord(id: "a", title: "first", note: "second"))
        #expect(server.applications.values.allSatisfy { $0 == 1 })
    }

    /// The same with a server that ignores idempotency keys (as Kinto does): "first" sent again
    /// meets itself as a conflict, which is its own change applied.
    @Test(arguments: ["serverWins", "fieldwise", "manual"])
    func aChangeSentAgainThatMeetsItselfOnAServerWithoutIdempotencyKeysIsApplied(_ policy: String) async {
        let conflicts: ConflictPolicy<TaskRecord> =
            switch policy {
            case "serverWins": .serverWins
            case "fieldwise": .fieldwise
            default: .manual
            }
        server.ignoresIdempotencyKeys = true
        server.put(TaskRecord(id: "a", title: "A"))
        let tasks = makeCollection(server: server, cache: cache, conflicts: conflicts, activity: activity, clock: clock)
        await pull(tasks)
        server.answersToLose = 1
        tasks.update("a") { $0.title = "first" }
        _ = await settle { server.pushCount == 1 && !tasks.status.isPushing }
        tasks.update("a") { $0.note = "second" }
        // The retry waits on the clock.
        _ = await settle { clock.pendingSleepCount == 1 }
        await clock.advance(by: .seconds(10))
        #expect(tasks.conflicts.isEmpty)
        #expect(server.records["a"] == TaskRecord(id: "a", title: "first", note: "second"))
        #expect(tasks.contents?[id: "a"] == TaskRecord(id: "a", title: "first", note: "second"))
    }
}
