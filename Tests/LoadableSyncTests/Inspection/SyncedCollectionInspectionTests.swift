import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

/// What a synced collection tells an attached `LoadableInspector`: its pulls (records and
/// tombstones applied), its pushes (records accepted), the conflicts it meets, and its entry of a
/// snapshot; the page's `sync` action pulls it. One serialized suite: the attached inspector is
/// the process's.
@MainActor
@Suite(.serialized) struct SyncedCollectionInspectionTests {
    let server = SyncTestServer<TaskRecord>()
    let cache = InMemoryLoadableCache()
    let clock = ManualClock()
    let activity = ActivityMonitor()

    func makeTasks(label: String) -> TestCollection {
        let tasks = makeCollection(server: server, cache: cache, key: label, activity: activity, clock: clock)
        tasks.inspectorLabel = label
        return tasks
    }

    /// The events of the collection's pulls, pushes and conflicts.
    func collectionEvents(_ inspector: LoadableInspector, _ label: String) -> [LoadableEvent] {
        inspector.events(of: label).filter {
            [.collectionPulled, .collectionPushed, .collectionConflict].contains($0.kind)
        }
    }

    @Test("its default label is the type and the key")
    func defaultLabel() {
        let tasks = makeCollection(server: server, cache: cache, key: "inspection-tasks", activity: activity)
        #expect(tasks.inspectorLabel == "SyncedCollection<SyncTestRemote<TaskRecord>>[inspection-tasks]")
    }

    @Test("a pull records what it applied (a tombstone too), a push the record accepted, each conflict its record")
    func pullsPushesAndConflicts() async {
        let label = "sync-inspection.events"
        server.put(TaskRecord(id: "a", title: "A"))
        server.put(TaskRecord(id: "b", title: "B"))
        server.put(TaskRecord(id: "c", title: "C"))
        await withAttachedInspector(clock: clock) { inspector in
            let tasks = makeTasks(label: label)
            await tasks.pullAndSettle()  // a, b, c
            server.remove("b")
            server.put(TaskRecord(id: "d", title: "D"))
            await tasks.pullAndSettle()  // the tombstone of b, and d
            await tasks.pullAndSettle()  // nothing new
            #expect(tasks.contents?.map(\.id) == ["a", "c", "d"])
            #expect(
                collectionEvents(inspector, label) == [
                    .collectionPulled(label: label, time: .zero, changes: 3),
                    .collectionPulled(label: label, time: .zero, changes: 2),
                    .collectionPulled(label: label, time: .zero, changes: 0),
                ])

            await clock.advance(by: .seconds(1))
            tasks.insert(TaskRecord(id: "e", title: "mine"))
            await tasks.settlePushes()
            #expect(server.records["e"]?.title == "mine")
            #expect(
                collectionEvents(inspector, label).last
                    == .collectionPushed(label: label, time: .seconds(1), changes: 1))

            // A push that meets another device's record of the same id: held, for the app to decide.
            server.put(TaskRecord(id: "f", title: "theirs"))
            tasks.insert(TaskRecord(id: "f", title: "mine"))
            await tasks.settlePushes()
            #expect(tasks.status.conflictCount == 1)
            // A pull that meets another device's edit of a record changed here, offline.
            activity.connectivity = .offline
            tasks.update("a") { $0.title = "mine" }
            server.put(TaskRecord(id: "a", title: "theirs"))
            await tasks.pullAndSettle()
            #expect(tasks.status.conflictCount == 2)
            #expect(
                collectionEvents(inspector, label).suffix(5) == [
                    .collectionPushed(label: label, time: .seconds(1), changes: 1),
                    .collectionConflict(label: label, time: .seconds(1), record: "f"),
                    .collectionPushed(label: label, time: .seconds(1), changes: 0),
                    .collectionConflict(label: label, time: .seconds(1), record: "a"),
                    // a alone: the push's conflict already brought the server's f.
                    .collectionPulled(label: label, time: .seconds(1), changes: 1),
                ])
            activity.connectivity = .online
        }
    }

    @Test("its snapshot entry counts records, pending changes, conflicts and live views; sync(label:) pulls it")
    func snapshotAndActions() async {
        let label = "sync-inspection.snapshot"
        server.put(TaskRecord(id: "a", title: "A"))
        server.put(TaskRecord(id: "b", title: "B"))
        await withAttachedInspector(clock: clock) { inspector in
            let tasks = makeTasks(label: label)
            @MainActor func entry() -> LoadableInspectorSnapshot.Collection? {
                inspector.snapshot().collections.first { $0.label == label }
            }
            #expect(
                entry()
                    == LoadableInspectorSnapshot.Collection(
                        label: label, state: "idle", age: nil, records: 0, pending: 0, conflicts: 0, leases: 0))
            #expect(inspector.actionLabels.contains(label))
            #expect(inspector.perform(.sync(label: label)))
            #expect(tasks.loadableState == .syncing)
            _ = await settle { tasks.loadableState != .syncing }
            #expect(server.pullCount == 1)

            server.put(TaskRecord(id: "c", title: "theirs"))
            activity.connectivity = .offline
            tasks.insert(TaskRecord(id: "c", title: "mine"))  // meets "theirs" on the next pull
            tasks.update("a") { $0.title = "edited" }
            let view = tasks.view(sortedBy: { $0.id < $1.id })
            let record = tasks.record("a")
            await clock.advance(by: .seconds(5))
            #expect(
                entry()
                    == LoadableInspectorSnapshot.Collection(
                        label: label, state: "didSyncSuccessfully", age: 5, records: 3, pending: 2, conflicts: 0,
                        leases: 2))
            #expect(inspector.perform(.sync(label: label)))
            _ = await settle { tasks.loadableState != .syncing }
            #expect(server.pullCount == 2)
            #expect(
                entry()
                    == LoadableInspectorSnapshot.Collection(
                        label: label, state: "didSyncSuccessfully", age: 0, records: 3, pending: 1, conflicts: 1,
                        leases: 2))
            #expect(inspector.perform(.sync(label: "sync-inspection.nobody")) == false)
            activity.connectivity = .online
            withExtendedLifetime((view, record)) {}
        }
    }

    @Test("once the inspector is detached, the same pulls and pushes record nothing more")
    func nothingOnceDetached() async {
        let label = "sync-inspection.detached"
        server.put(TaskRecord(id: "a", title: "A"))
        let tasks = makeTasks(label: label)
        let inspector = await withAttachedInspector(clock: clock) { inspector in
            await tasks.pullAndSettle()
            return inspector
        }
        let recorded = inspector.events(of: label)
        #expect(recorded.map(\.kind).contains(.collectionPulled))
        server.remove("a")
        server.put(TaskRecord(id: "b", title: "theirs"))
        tasks.insert(TaskRecord(id: "b", title: "mine"))
        await tasks.settlePushes()
        await tasks.pullAndSettle()
        #expect(tasks.status.conflictCount == 1)
        #expect(inspector.events(of: label) == recorded)
        #expect(inspector.snapshot().collections.first { $0.label == label } != nil)  // still readable
    }
}
