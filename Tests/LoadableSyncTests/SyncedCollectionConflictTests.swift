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
}
