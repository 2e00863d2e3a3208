import Foundation
import LoadableGroup
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// `view(where:sortedBy:)`: what a view shows, when it notifies, its state, its lifetime.
@MainActor
@Suite struct RecordViewTests {
    let server = SyncTestServer<TaskRecord>(pageSize: 100)
    let cache = InMemoryLoadableCache()
    let clock = ManualClock()

    /// A collection pulled from a server holding `records`.
    func pulled(_ records: [TaskRecord]) async -> TestCollection {
        for record in records { server.put(record) }
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.pullAndSettle()
        return tasks
    }

    static let byTitle: (TaskRecord, TaskRecord) -> Bool = { $0.title < $1.title }
    static let open: (TaskRecord) -> Bool = { !$0.done }

    @Test func aViewShowsTheMatchingRecordsSortedWithPendingLocalChanges() async {
        let tasks = await pulled([
            TaskRecord(id: "a", title: "C"), TaskRecord(id: "b", title: "A", done: true),
            TaskRecord(id: "c", title: "B"),
        ])
        let open = tasks.view(where: Self.open, sortedBy: Self.byTitle)
        #expect(open.contents?.titles == ["B", "C"])
        #expect(open.count == 2)
        #expect(open.loadableState == .didSyncSuccessfully)
        server.isOffline = true
        tasks.insert(TaskRecord(id: "d", title: "A0"))
        #expect(open.contents?.titles == ["A0", "B", "C"])
        #expect(tasks.status.pendingCount == 1)
        let all = tasks.view(sortedBy: Self.byTitle)
        #expect(all.contents?.titles == ["A", "A0", "B", "C"])
    }

    @Test func aChangedRecordMovesEntersOrLeavesAndTheViewNotifiesOnlyWhenItsOutputChanged() async {
        let tasks = await pulled((0..<10).map { TaskRecord(id: "r\($0)", title: "t\($0)") })
        let open = tasks.view(where: Self.open, sortedBy: Self.byTitle)
        var outputs: [[String]] = []
        observing(open, { outputs.append($0.contents?.titles ?? []) }) {
            tasks.update("r3") { $0.title = "t9z" }  // moves to the end
            tasks.update("r0") { $0.title = "t55" }  // moves into the middle
            tasks.update("r5") { $0.done = true }  // leaves
            tasks.update("r5") { $0.note = "hidden" }  // not shown before or after: nothing
            tasks.update("r5") { $0.done = false }  // comes back
            tasks.update("r1") { $0.title = "t1" }  // equal: nothing at all
            tasks.delete("r9")
        }
        #expect(
            outputs == [
                ["t0", "t1", "t2", "t4", "t5", "t6", "t7", "t8", "t9", "t9z"],
                ["t1", "t2", "t4", "t5", "t55", "t6", "t7", "t8", "t9", "t9z"],
                ["t1", "t2", "t4", "t55", "t6", "t7", "t8", "t9", "t9z"],
                ["t1", "t2", "t4", "t5", "t55", "t6", "t7", "t8", "t9", "t9z"],
                ["t1", "t2", "t4", "t5", "t55", "t6", "t7", "t8", "t9z"],
            ])
        #expect(open.contents?.titles == Array(tasks.contents!).filter(Self.open).map(\.title).sorted())
    }

    @Test func observationOfAViewIsToldOnlyWhenItsOutputChanged() async {
        let tasks = await pulled([TaskRecord(id: "a", title: "A"), TaskRecord(id: "b", title: "B", done: true)])
        let open = tasks.view(where: Self.open, sortedBy: Self.byTitle)
        func changes(_ body: () -> Void) -> Int {
            let changes = trackObservationChanges { _ = open.contents }
            body()
            return changes.count
        }
        #expect(changes { tasks.update("b") { $0.title = "B2" } } == 0)
        #expect(changes { tasks.update("a") { $0.title = "A" } } == 0)
        #expect(changes { tasks.update("a") { $0.title = "A2" } } == 1)
        #expect(open.contents?.titles == ["A2"])
    }

    @Test func aPullThatChangesNothingAViewShowsNotifiesTheViewOfNothing() async {
        let tasks = await pulled([TaskRecord(id: "a", title: "A"), TaskRecord(id: "b", title: "B", done: true)])
        let open = tasks.view(where: Self.open, sortedBy: Self.byTitle)
        var notifications = 0
        await observing(open, { _ in notifications += 1 }) {
            // A new version of an equal record, a change of a hidden record, then nothing new.
            server.put(TaskRecord(id: "a", title: "A"))
            server.put(TaskRecord(id: "b", title: "B2", done: true))
            await tasks.pullAndSettle()
            await tasks.pullAndSettle()
        }
        #expect(notifications == 0)
        #expect(open.loadableState == .didSyncSuccessfully)
    }

    @Test func recordsTheSortRanksEqualKeepTheCollectionsOrder() async {
        let tasks = await pulled((0..<6).map { TaskRecord(id: "r\($0)", title: "t\($0)", done: $0 % 2 == 0) })
        let byDone = tasks.view { !$0.done && $1.done }
        #expect(byDone.contents?.map(\.id) == ["r1", "r3", "r5", "r0", "r2", "r4"])
        tasks.update("r3") { $0.done = true }
        tasks.update("r0") { $0.done = false }
        #expect(byDone.contents?.map(\.id) == ["r0", "r1", "r5", "r2", "r3", "r4"])
        tasks.insert(TaskRecord(id: "n", title: "new"))
        #expect(byDone.contents?.map(\.id) == ["r0", "r1", "r5", "n", "r2", "r3", "r4"])
    }

    @Test func aPageOfManyChangesIsMergedIntoTheViewInOneNotification() async {
        let tasks = await pulled((0..<40).map { TaskRecord(id: String(format: "r%02d", $0), title: "\(100 + $0)") })
        let view = tasks.view(where: { !$0.title.hasPrefix("x") }, sortedBy: { $0.title > $1.title })
        for index in stride(from: 0, to: 40, by: 2) {
            server.put(TaskRecord(id: String(format: "r%02d", index), title: index % 4 == 0 ? "x" : "\(200 + index)"))
        }
        for index in 0..<10 { server.put(TaskRecord(id: "n\(index)", title: "\(150 + index)")) }
        server.remove("r01")
        var notifications = 0
        await observing(view, { _ in notifications += 1 }) {
            await tasks.pullAndSettle()
        }
        #expect(notifications == 1)
        let expected = Array(tasks.contents!).filter { !$0.title.hasPrefix("x") }.map(\.title).sorted(by: >)
        #expect(view.contents?.titles == expected)
        #expect(view.count == 39 - 10 + 10)
    }

    @Test func beforeTheCollectionHasContentsAViewFollowsItsStateThenStaysDone() async {
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.restored()
        let view = tasks.view(sortedBy: Self.byTitle)
        #expect(view.contents == nil)
        #expect(view.loadableState == .idle)
        server.isOffline = true
        tasks.sync()
        #expect(view.loadableState == .syncing)
        _ = await settle { tasks.loadableState != .syncing }
        #expect(view.loadableState == .didFailToSync)
        #expect(view.error != nil)
        server.isOffline = false
        server.put(TaskRecord(id: "a", title: "A"))
        await tasks.pullAndSettle()
        #expect(view.loadableState == .didSyncSuccessfully)
        #expect(view.contents?.titles == ["A"])
        var states: [LoadableState] = []
        server.isOffline = true
        await observing(view, { states.append($0.loadableState) }) {
            await tasks.pullAndSettle()
        }
        #expect(tasks.loadableState == .didFailToSync)
        #expect(states.isEmpty)
        #expect(view.loadableState == .didSyncSuccessfully)
    }

    @Test func aViewMadeBeforeARestoreShowsTheRestoredRecordsAndRemoveAllEmptiesIt() async {
        do {
            let tasks = await pulled([TaskRecord(id: "a", title: "A"), TaskRecord(id: "b", title: "B")])
            await tasks.saved()
        }
        let relaunched = makeCollection(server: server, cache: cache, clock: clock)
        let view = relaunched.view(sortedBy: { $0.title > $1.title })
        await relaunched.restored()
        #expect(view.contents?.titles == ["B", "A"])
        #expect(view.loadableState == .didSyncSuccessfully)
        relaunched.removeAll()
        #expect(view.contents == nil)
        #expect(view.loadableState == .idle)
    }

    @Test func viewsAreUpToDateWhenTheCollectionsObserversAreTold() async {
        let tasks = await pulled([TaskRecord(id: "a", title: "A")])
        let view = tasks.view(sortedBy: Self.byTitle)
        let record = tasks.record("a")
        var seen: [[String]] = []
        var seenRecord: [String?] = []
        observing(
            tasks,
            { _ in
                seen.append(view.contents?.titles ?? [])
                seenRecord.append(record.contents?.title)
            }
        ) {
            tasks.update("a") { $0.title = "A2" }
            tasks.insert(TaskRecord(id: "b", title: "B"))
        }
        #expect(seen == [["A2"], ["A2", "B"]])
        #expect(seenRecord == ["A2", "A2"])
    }

    @Test func aWriteFromInsideAViewsNotificationIsShownByTheViewToo() async {
        let tasks = await pulled([TaskRecord(id: "a", title: "A")])
        let view = tasks.view(sortedBy: Self.byTitle)
        var wrote = false
        observing(
            view,
            { _ in
                guard !wrote else { return }
                wrote = true
                tasks.insert(TaskRecord(id: "b", title: "0"))
            }
        ) {
            tasks.update("a") { $0.title = "Z" }
        }
        #expect(view.contents?.titles == ["0", "Z"])
        #expect(view.contents?.titles == Array(tasks.contents!).map(\.title).sorted())
    }

    @Test func aWriteOfTheSameRecordFromInsideTheFirstViewsNotificationLeavesEveryViewRight() async {
        let tasks = await pulled((0..<5).map { TaskRecord(id: "r\($0)", title: "t\($0)") })
        let first = tasks.view(sortedBy: Self.byTitle)
        let second = tasks.view { $0.title > $1.title }
        let third = tasks.view(where: { $0.title.hasPrefix("t") }, sortedBy: Self.byTitle)
        var wrote = false
        observing(
            first,
            { _ in
                guard !wrote else { return }
                wrote = true
                tasks.update("r2") { $0.title = "a-first" }
                tasks.update("r4") { $0.title = "z-last" }
            }
        ) {
            tasks.update("r2") { $0.title = "t9" }
        }
        let records = Array(tasks.contents!)
        #expect(first.contents?.titles == records.map(\.title).sorted())
        #expect(second.contents?.titles == records.map(\.title).sorted(by: >))
        #expect(third.contents?.titles == records.map(\.title).filter { $0.hasPrefix("t") }.sorted())
        #expect(first.contents?.titles == ["a-first", "t0", "t1", "t3", "z-last"])
    }

    @Test func aSortThatReadsSomethingElseIsShownAgainWhenARecordIsNotWhereItWasPut() async {
        var priority = ["a": 1, "b": 2, "c": 3]
        let tasks = await pulled([
            TaskRecord(id: "a", title: "A"), TaskRecord(id: "b", title: "B"), TaskRecord(id: "c", title: "C"),
        ])
        let view = tasks.view { priority[$0.id, default: 0] < priority[$1.id, default: 0] }
        #expect(view.contents?.map(\.id) == ["a", "b", "c"])
        priority = ["a": 3, "b": 2, "c": 1]
        tasks.update("a") { $0.note = "moved" }
        #expect(view.contents?.map(\.id) == ["c", "b", "a"])
    }

    @Test func viewsCanBeMappedAndGrouped() async {
        let tasks = await pulled([TaskRecord(id: "a", title: "A"), TaskRecord(id: "b", title: "B", done: true)])
        let open = tasks.view(where: Self.open, sortedBy: Self.byTitle)
        let titles = open.map { $0.map(\.title) }
        let group = PureLoadableGroup([open, tasks.record("b")])
        var groupNotifications = 0
        observing(group, { _ in groupNotifications += 1 }) {
            #expect(titles.contents == ["A"])
            tasks.update("b") { $0.done = false }
            #expect(titles.contents == ["A", "B"])
        }
        #expect(group.loadableState == .didSyncSuccessfully)
        #expect(groupNotifications >= 1)
    }

    @Test func aViewKeepsItsCollectionAliveAndTheCollectionHoldsItsViewsWeakly() async {
        weak var weakTasks: TestCollection?
        weak var weakView: RecordView<TaskRecord>?
        var view: RecordView<TaskRecord>? = nil
        do {
            let tasks = await pulled([TaskRecord(id: "a", title: "A")])
            weakTasks = tasks
            view = tasks.view(sortedBy: Self.byTitle)
            weakView = view
            let dropped = tasks.view(sortedBy: Self.byTitle)
            _ = dropped
        }
        #expect(weakTasks != nil)
        weakTasks?.insert(TaskRecord(id: "b", title: "B"))
        #expect(view?.contents?.titles == ["A", "B"])
        // Released on another thread: the collection goes with it, and nothing is called after.
        let box = UncheckedBox(view)
        view = nil
        await Task.detached { box.value = nil }.value
        #expect(await settle { weakView == nil && weakTasks == nil })
    }

    @Test func releasingAViewDuringItsOwnNotificationIsSafe() async {
        let tasks = await pulled([TaskRecord(id: "a", title: "A")])
        var view: RecordView<TaskRecord>? = tasks.view(sortedBy: Self.byTitle)
        weak let weakView = view
        let observation = view!.observe { _ in view = nil }
        tasks.update("a") { $0.title = "A2" }
        #expect(weakView == nil)
        observation.cancel()
        tasks.update("a") { $0.title = "A3" }
        #expect(tasks.contents?[id: "a"]?.title == "A3")
    }
}

/// `record(_:)`: one record as a loadable.
@MainActor
@Suite struct RecordLoadableTests {
    let server = SyncTestServer<TaskRecord>(pageSize: 100)
    let cache = InMemoryLoadableCache()
    let clock = ManualClock()

    @Test func aRecordLoadableIsTheCollectionsCopyAndNotifiesOnlyWhenItsRecordChanged() async {
        server.put(TaskRecord(id: "a", title: "A"))
        server.put(TaskRecord(id: "b", title: "B"))
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.pullAndSettle()
        let pulls = server.pullCount
        let record = tasks.record("a")
        #expect(tasks.record("a") === record)
        #expect(record.id == "a")
        #expect(record.contents == tasks.contents?[id: "a"])
        #expect(record.loadableState == .didSyncSuccessfully)
        var titles: [String?] = []
        await observing(record, { titles.append($0.contents?.title) }) {
            tasks.update("b") { $0.title = "B2" }
            tasks.update("a") { $0.title = "A" }
            server.isOffline = true
            tasks.update("a") { $0.title = "A2" }
            #expect(record.contents == tasks.contents?[id: "a"])
            server.isOffline = false
            server.put(TaskRecord(id: "b", title: "B3"))
            await tasks.pullAndSettle()
            tasks.delete("a")
        }
        #expect(titles == ["A2", nil])
        #expect(record.loadableState == .idle)
        #expect(server.pullCount == pulls + 1)
    }

    @Test func aRecordMadeBeforeItExistsShowsItWhenItComesAndFollowsTheCollectionBefore() async {
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.restored()
        let record = tasks.record("x")
        #expect(record.contents == nil)
        #expect(record.loadableState == .idle)
        server.holdPulls()
        tasks.sync()
        #expect(record.loadableState == .syncing)
        server.put(TaskRecord(id: "y", title: "Y"))
        server.releasePulls()
        _ = await settle { tasks.loadableState != .syncing }
        #expect(record.loadableState == .idle)
        #expect(record.contents == nil)
        tasks.insert(TaskRecord(id: "x", title: "X"))
        #expect(record.contents?.title == "X")
        #expect(record.loadableState == .didSyncSuccessfully)
    }

    @Test func aReleasedRecordLoadableIsMadeAgain() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let tasks = makeCollection(server: server, cache: cache, clock: clock)
        await tasks.pullAndSettle()
        weak var first: RecordLoadable<TaskRecord>?
        do {
            let record = tasks.record("a")
            first = record
            #expect(record.contents?.title == "A")
        }
        #expect(first == nil)
        tasks.update("a") { $0.title = "A2" }
        #expect(tasks.record("a").contents?.title == "A2")
    }
}

/// A reference that crosses to another thread in a test.
final class UncheckedBox<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
